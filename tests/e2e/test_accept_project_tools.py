"""`mmo accept project-tools` as a user runs it: real `mmo serve` + `mmo runner` subprocesses,
every spec 12 acceptance case through real MCP HTTP requests, a JSON report."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
from support.waiting import wait_until

MMO = Path(sys.executable).parent / "mmo"
CASES = ["entry_read_recovery", "mixed_files_conflict", "encoded_csv",
         "failure_repair_log_pressure", "pending_independent_join", "code_repair_review",
         "stale_read_revision", "extra_missing_output", "extra_large_output_retention",
         "goal_plan_revision"]
TOTAL_KEYS = {"calls", "request_bytes", "response_bytes", "tool_failures", "wall_seconds"}
CALL_KEYS = {"case", "tool", "surface", "request_bytes", "response_bytes", "wall_seconds",
             "success", "content_types", "response_sha256", "sentinel_occurrences"}


def accept_env(tmp_path: Path) -> dict[str, str]:
    """The caller's environment with TMPDIR in the test's tmp dir (the run's temp folder)."""
    return {**os.environ, "TMPDIR": str(tmp_path)}


def test_every_case_passes_and_the_report_has_the_spec_structure(tmp_path):
    report_path = tmp_path / "report.json"
    done = subprocess.run([str(MMO), "accept", "project-tools", "--report", str(report_path)],
                          cwd=tmp_path, env=accept_env(tmp_path), capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    text = report_path.read_text(encoding="utf-8")
    report = json.loads(text)
    assert [c["name"] for c in report["cases"]] == CASES
    assert all(c["correctness"] == "passed" and c["failure"] is None
               for c in report["cases"]), [c for c in report["cases"] if c["failure"]]
    assert report["correctness"] == "passed" and report["failure"] is None
    assert set(report) == {"correctness", "failure", "cases", "calls", "totals",
                           "setup_totals", "version", "wall_seconds"}
    from mmo_kernel import package_version

    assert report["version"] == package_version()
    for case in report["cases"]:
        assert set(case) == {"name", "correctness", "failure", "evidence", "calls",
                             "wall_seconds"}
        assert case["calls"] == sum(1 for c in report["calls"] if c["case"] == case["name"])
    assert all(set(call) == CALL_KEYS for call in report["calls"])
    assert {c["case"] for c in report["calls"]} == {"setup", *CASES}
    dispatched = {c["tool"] for c in report["calls"] if c["surface"] == "call_project_tool"}
    assert {"write_job_input", "prepare_goal_workflow", "transfer_project_artifact"} <= dispatched
    counted = [c for c in report["calls"] if c["case"] in CASES[:7] + CASES[9:]]
    assert set(report["totals"]) == TOTAL_KEYS == set(report["setup_totals"])
    assert report["totals"]["calls"] == len(counted)
    assert report["totals"]["request_bytes"] == sum(c["request_bytes"] for c in counted)
    assert report["totals"]["tool_failures"] == sum(not c["success"] for c in counted) > 0
    noisy = [c for c in report["calls"] if c["case"] == "failure_repair_log_pressure"
             and c["tool"] == "run_script"]
    assert noisy[0]["success"] is False and noisy[0]["sentinel_occurrences"] > 0
    for prefix in ("mmo_pat_", "mmo_rt_", "mmo_adm_", "Bearer"):
        assert prefix not in text
    assert not list(tmp_path.glob("mmo-accept-*"))  # a passing run leaves no temp folder


def _ctrl_c_default() -> None:
    """Ctrl-C as at a terminal: a test run started in the background (``cmd &`` in a shell
    without job control) ignores SIGINT, and a child would inherit that."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_interrupt_stops_the_server_and_the_runner_and_reports_a_failure(tmp_path):
    report_path = tmp_path / "report.json"
    # every case: the run lasts seconds after its runner starts, so the interrupt lands in it
    proc = subprocess.Popen([str(MMO), "accept", "project-tools", "--report", str(report_path)],
                            cwd=tmp_path, env=accept_env(tmp_path), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, preexec_fn=_ctrl_c_default)
    try:
        ready = wait_until(lambda: list(tmp_path.glob("mmo-accept-*/logs/runner.log")),
                           timeout=120, what="the runner to be started")
        server = json.loads((ready[0].parents[1] / "state/serve/server.json").read_text())
        proc.send_signal(signal.SIGINT)
        output, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, output
    assert not psutil.pid_exists(server["pid"]) or \
        psutil.Process(server["pid"]).status() == psutil.STATUS_ZOMBIE
    report = json.loads(report_path.read_text(encoding="utf-8"))
    assert report["correctness"] == "failed" and report["failure"]


def test_an_unknown_case_is_a_one_line_error_and_starts_nothing(tmp_path):
    report_path = tmp_path / "report.json"
    done = subprocess.run([str(MMO), "accept", "project-tools", "--report", str(report_path),
                           "--cases", "encoded_csv,no_such_case"], cwd=tmp_path,
                          env=accept_env(tmp_path), capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert done.stderr.strip().splitlines() == [
        done.stderr.strip()] and "no_such_case" in done.stderr
    assert not report_path.exists() and not list(tmp_path.glob("mmo-accept-*"))

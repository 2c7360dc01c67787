"""`mmo demo` as a user runs it: a subprocess that ends with the project's tests passing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

MMO = Path(sys.executable).parent / "mmo"


def run_demo(tmp_path: Path, codex_bin: str | None) -> tuple[subprocess.CompletedProcess, Path]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("MMO_STATE_DIR", "MMO_CONFIG_DIR", "MMO_CODEX_BIN")}
    env["TMPDIR"] = str(tmp_path)  # the demo's throw-away folder lands in the test's tmp dir
    if codex_bin:
        env["MMO_CODEX_BIN"] = codex_bin
    done = subprocess.run([str(MMO), "demo"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=150)
    folders = list(tmp_path.glob("mmo-demo-*"))
    assert len(folders) == 1, done.stdout + done.stderr
    return done, folders[0]


def assert_fixed(done: subprocess.CompletedProcess, folder: Path) -> None:
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), [line for line in lines if len(line) > 80]
    assert any(line.startswith("tests before: FAIL") for line in lines)
    assert any(line.startswith("tests after") and ": pass (OK)" in line for line in lines)
    project = folder / "project"
    check = subprocess.run([sys.executable, "-B", "-m", "unittest", "-q"], cwd=project,
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    assert "range(1, n + 1)" in (project / "calc" / "ranges.py").read_text()
    assert list((folder / "state" / "sessions").iterdir())  # evidence in the private state


def demo_jobs(folder: Path) -> dict[str, dict]:
    """The demo's job records by agent, read from its private state."""
    jobs = {}
    for meta in (folder / "state" / "jobs").glob("*/metadata.json"):
        record = json.loads(meta.read_text())
        jobs[record["agent"]] = record
    return jobs


def assert_reviewed_the_writers_patch(folder: Path, review_evidence: str) -> None:
    """The reviewer started after the writer's patch existed and was given that patch."""
    jobs = demo_jobs(folder)
    writer, reviewer = jobs["implementation_specialist"], jobs["adversarial_reviewer"]
    assert writer["result_state"] == "integrated" and reviewer["result_state"] == "accepted"
    assert reviewer["created_at"] >= writer["finished_at"]
    assert review_evidence in reviewer["task"]


@pytest.mark.real_codex
def test_demo_on_real_codex_integrates_the_reviewed_fix(tmp_path, real_codex):
    done, folder = run_demo(tmp_path, None)
    assert_fixed(done, folder)
    assert "Codex: real Codex" in done.stdout
    assert "integrated" in done.stdout and "adversarial_reviewer" in done.stdout
    writer = demo_jobs(folder)["implementation_specialist"]
    # the reviewer diffed the writer's own worktree against its base, and checked it applies
    assert_reviewed_the_writers_patch(folder, f"git -C '{writer['cwd']}' diff --cached")
    reviewer = demo_jobs(folder)["adversarial_reviewer"]
    result = (Path(reviewer["events_path"]).parent / "result.md").read_text()
    assert "Checking patch calc/ranges.py" in result
    assert "+    return list(range(1, n + 1))" in result


def test_demo_on_the_stand_in_runs_the_simpler_flow(tmp_path):
    standin = Path(sys.executable).parent / "mmo-codex-standin"
    done, folder = run_demo(tmp_path, str(standin))
    assert_fixed(done, folder)
    assert "Codex: stand-in" in done.stdout
    assert_reviewed_the_writers_patch(folder, "+def count_up(n): return list(range(1, n + 1))")

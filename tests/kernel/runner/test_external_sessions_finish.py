"""``finish_coding_task`` on the runner (spec 12): outputs hashed now, the outcome judged
from the session's validation run and running jobs, a short git status."""

from __future__ import annotations

import hashlib
import os
import signal

import pytest
from support.runner_core import LocalRunner, register_project, write_runner_config
from support.waiting import wait_until

from mmo_kernel.runner.process_jobs import ProcessJobs


@pytest.fixture(autouse=True)
def _env(mmo_env, mmo_process_guard, monkeypatch, tmp_path):
    monkeypatch.setenv("MMO_CODEX_BIN", str(tmp_path / "no-codex"))  # never needed here
    yield mmo_env


@pytest.fixture
def runner(tmp_path, mmo_git_workspace):
    config = write_runner_config(tmp_path / "runner",
                                 allowed_roots=[mmo_git_workspace, tmp_path / "plain"])
    register_project(config, "code", mmo_git_workspace)
    register_project(config, "plain", tmp_path / "plain")
    state = tmp_path / "runner-state"
    local = LocalRunner(config, state_dir=state)
    local.jobs = ProcessJobs(state, local.config.policy)
    yield local
    local.jobs.stop_all(grace_secs=1)


def session(runner: LocalRunner, project: str = "code") -> str:
    return runner.ok("work_on_project", {"project": project, "instruction": "x"})["session_id"]


def finish(runner: LocalRunner, sid: str, project: str = "code", **arguments) -> dict:
    return runner.ok("finish_coding_task", {"project": project, "session_id": sid, **arguments})


def test_outputs_are_verified_missing_or_unavailable_in_request_order(runner,
                                                                     mmo_git_workspace,
                                                                     tmp_path):
    root = mmo_git_workspace
    big = os.urandom(10 * 1024 * 1024 + 1)
    (root / "out").mkdir()
    (root / "out" / "big.bin").write_bytes(big)
    (root / "report.txt").write_text("ok\n")
    (root / "link.txt").symlink_to(root / "report.txt")
    os.mkfifo(root / "pipe")
    (root / "linkdir").symlink_to(root / "out")
    sid = session(runner)
    asked = ["out/big.bin", "missing.txt", "link.txt", "out", "pipe", "../escape.txt",
             str(tmp_path / "abs.txt"), "linkdir/big.bin", "report.txt", "nodir/x.txt"]
    out = finish(runner, sid, outputs=asked, summary="done")
    outputs = out["task_outputs"]
    assert [(i["path"], i["status"]) for i in outputs["items"]] == [
        ("out/big.bin", "verified"), ("missing.txt", "missing"), ("link.txt", "unavailable"),
        ("out", "unavailable"), ("pipe", "unavailable"), ("../escape.txt", "unavailable"),
        ("<path>", "unavailable"), ("linkdir/big.bin", "unavailable"),
        ("report.txt", "verified"), ("nodir/x.txt", "missing")]
    big_item = outputs["items"][0]
    assert big_item == {"path": "out/big.bin", "status": "verified",
                        "sha256": hashlib.sha256(big).hexdigest(), "file_bytes": len(big)}
    assert all(set(i) == {"path", "status", "reason"} for i in outputs["items"]
               if i["status"] != "verified")  # reasons, and never a timestamp
    assert (outputs["requested_count"], outputs["verified_count"], outputs["missing_count"],
            outputs["unavailable_count"]) == (10, 2, 2, 6)
    assert out["task_outcome"] == {"status": "fail", "blocking": True,
                                   "blocking_reasons": ["task_outputs_unverified"],
                                   "validation": "not_run"}
    assert str(tmp_path) not in str(out)


def test_the_outcome_follows_validation_and_running_jobs(runner):
    sid = session(runner)
    assert finish(runner, sid, summary_only=True) == {
        "session_id": sid, "task_outcome": {"status": "pass", "blocking": False,
                                            "blocking_reasons": [], "validation": "not_run"}}
    failing = runner.call("run_script", {"project": "code", "session_id": sid,
                                         "language": "python", "script": "raise SystemExit(3)",
                                         "purpose": "validation", "wait_secs": 30})
    assert failing["output"]["exit_code"] == 3
    assert finish(runner, sid, summary_only=True)["task_outcome"]["blocking_reasons"] == [
        "validation_failed"]
    pending = runner.ok("run_script", {"project": "code", "session_id": sid,
                                       "language": "python", "wait_secs": 0,
                                       "script": "import time; time.sleep(120)"})
    outcome = finish(runner, sid, summary_only=True)["task_outcome"]
    assert outcome == {"status": "fail", "blocking": True, "validation": "failed",
                       "blocking_reasons": ["validation_failed", "jobs_still_running"]}
    job = runner.jobs.get(pending["job_id"])
    os.killpg(job.pid, signal.SIGKILL)  # the job ends (it is no validation run)
    wait_until(lambda: job.terminal, timeout=60, what="the killed job to be reaped")
    runner.ok("run_script", {"project": "code", "session_id": sid, "language": "python",
                             "script": "print('green')", "purpose": "validation",
                             "wait_secs": 30})
    other = session(runner)  # another session's validation is its own
    assert finish(runner, other, summary_only=True)["task_outcome"]["validation"] == "not_run"
    assert finish(runner, sid, summary_only=True)["task_outcome"] == {
        "status": "pass", "blocking": False, "blocking_reasons": [], "validation": "passed"}


def test_changes_is_a_short_git_status_unless_summary_only(runner, mmo_git_workspace):
    (mmo_git_workspace / "README.md").write_text("changed\n")
    (mmo_git_workspace / "new.py").write_text("x = 1\n")
    sid = session(runner)
    assert finish(runner, sid)["changes"] == {
        "vcs": "git", "files": [{"path": "README.md", "status": " M"},
                                {"path": "new.py", "status": "??"}],
        "total_count": 2, "truncated": False}
    assert "changes" not in finish(runner, sid, summary_only=True)
    plain = session(runner, "plain")
    assert finish(runner, plain, "plain")["changes"] == {"vcs": "none", "files": [],
                                                        "total_count": 0, "truncated": False}
    runner.fails("finish_coding_task", {"project": "plain", "session_id": sid},
                 "session_not_found")  # a session of another project

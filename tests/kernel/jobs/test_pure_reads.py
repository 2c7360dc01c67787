"""Pure job reads (issue 17, item 1): what a reconciling read would report, nothing written.

``peek_job`` / ``peek_jobs`` give the status, reason and record that ``load_job`` /
``list_jobs`` would give, flagged when the stored record is stale, and leave the state
dir byte-for-byte and mtime-for-mtime as it was (records, partial results, lock files,
the listing index and its WAL); no process is signalled. The reconciling reads still
reconcile and write afterwards. Hosts are real processes: a job host on the stand-in
killed with SIGKILL, and detached ``sleep`` processes standing in for live hosts.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from support.state_snapshot import changes, snapshot
from support.waiting import wait_until

from mmo_kernel.api import list_jobs, load_job, peek_job, peek_jobs
from mmo_kernel.jobs.records import job_file, new_job_id, read_job_record, utc_now, write_job_record
from mmo_kernel.sessions.records import session_dir
from mmo_kernel.state.files import lifecycle_lock
from mmo_kernel.state.processes import process_matches, spawn_detached, terminate_process_groups

LAB = "access-efficient-escalation-lab"
OFFLINE = {"*": "local_scripted"}
SID = "20260101-000000-s-abcdef"
FLAGS = ("reconcile_pending", "stored_status")


@pytest.fixture(autouse=True)
def _env(mmo_env, mmo_process_guard):
    yield mmo_env


@pytest.fixture
def state(mmo_env) -> Path:
    return mmo_env.state_dir


@pytest.fixture
def sleeper():
    """Real detached processes (own group) standing in for a live runner or app-server."""
    started: list[int] = []

    def start() -> tuple[int, str]:
        pid, token = spawn_detached(["sleep", "60"], cwd="/", env=dict(os.environ))
        started.append(pid)
        return pid, token

    yield start
    terminate_process_groups(started, 1.0)


def _record(sleeper, runner: bool = True, **fields) -> dict:
    record = {"job_id": new_job_id("worker"), "session_id": SID, "agent": "worker",
              "status": "running", "created_at": utc_now(), "mode": "read-only", "depth": 1,
              "control_revision": 0}
    if runner:
        pid, token = sleeper()
        record.update(runner_pid=pid, runner_pgid=pid, runner_start_token=token)
    record.update(fields)
    return write_job_record(record)


def _without_flags(row: dict) -> dict:
    return {k: v for k, v in row.items() if k not in FLAGS}


def _gone(record: dict, pid: str, token: str) -> bool:
    return not process_matches(record.get(pid), record.get(token))


def test_a_job_whose_real_host_was_killed_peeks_suspended_and_nothing_is_written(
        mmo_standin, mmo_git_workspace, state):
    from mmo_kernel.gateway.process import stop_gateway
    from mmo_kernel.hosts.warm_host import stop as stop_warm_host
    from mmo_kernel.jobs.cancel import cancel_job
    from mmo_kernel.jobs.spawn import spawn_job
    from mmo_kernel.sessions.create import create_session

    session = create_session(LAB, cwd=mmo_git_workspace, bindings=OFFLINE)
    sid = session["session_id"]
    job = spawn_job(sid, "escalation_lead", None, "flagship_escalation",
                    task="Work slowly. FAKE_SLEEP_SECONDS=30")
    working = wait_until(lambda: (r := read_job_record(job["job_id"])).get("active_turn_id")
                         and r, timeout=60, what="the job's turn")
    os.killpg(working["runner_pgid"], signal.SIGKILL)
    os.killpg(working["app_server_pgid"], signal.SIGKILL)  # no process left to write
    wait_until(lambda: _gone(working, "runner_pid", "runner_start_token")
               and _gone(working, "app_server_pid", "app_server_start_token"),
               what="the killed job host to be gone")
    stop_gateway()
    stop_warm_host()  # nothing runs that could write while the state dir is compared

    before = snapshot(state)
    peeked = peek_job(job["job_id"])
    listed = peek_jobs(sid)
    assert changes(before, snapshot(state)) == []

    assert peeked["status"] == "suspended" and peeked["stored_status"] == "running"
    assert peeked["reconcile_pending"] is True
    assert "persisted app-server thread" in peeked["failure"]["message"]
    assert working["app_server_thread_id"] in peeked["failure"]["message"]
    assert listed == [peeked]
    assert not job_file(job["job_id"], "partial-result.md").exists()

    loaded = load_job(job["job_id"])  # the reconciling read still reconciles, and writes
    assert loaded == _without_flags(peeked)  # same status, reason, partial path, revision
    assert read_job_record(job["job_id"]) == loaded
    after = changes(before, snapshot(state))
    assert f"jobs/{job['job_id']}/metadata.json" in after
    assert f"jobs/{job['job_id']}/partial-result.md" in after
    again = peek_job(job["job_id"])
    assert (again["status"], again["reconcile_pending"]) == ("suspended", False)
    assert _without_flags(again) == loaded
    cancel_job(job["job_id"], sid)
    stop_gateway()


def test_a_live_job_peeks_running_and_nothing_is_written(sleeper, state):
    job = _record(sleeper)
    before = snapshot(state)
    peeked = peek_job(job["job_id"])
    assert changes(before, snapshot(state)) == []
    assert peeked == {**job, "reconcile_pending": False, "stored_status": "running"}
    assert load_job(job["job_id"]) == job


def test_a_job_with_a_dead_runner_peeks_suspended_without_killing_its_app_server(
        sleeper, state):
    app_pid, app_token = sleeper()
    job = _record(sleeper, status="waiting", app_server_pid=app_pid, app_server_pgid=app_pid,
                  app_server_start_token=app_token)
    terminate_process_groups([job["runner_pgid"]], 1.0)
    before = snapshot(state)

    peeked = peek_job(job["job_id"])
    assert changes(before, snapshot(state)) == []
    assert process_matches(app_pid, app_token)  # a pure read signals nothing
    assert (peeked["status"], peeked["stored_status"]) == ("suspended", "waiting")
    assert peeked["failure"]["message"] == ("The job's runner is gone before its persisted "
                                            "app-server thread existed; `continue` starts "
                                            "the task again.")

    [row] = list_jobs(SID)  # the reconciling listing: same answer, now on disk
    assert row == _without_flags(peeked)
    assert not process_matches(app_pid, app_token)
    assert read_job_record(job["job_id"])["status"] == "suspended"


def test_an_interrupted_cold_pause_peeks_paused_and_leaves_the_hosts_and_lock_alone(
        sleeper, state):
    session_dir(SID).mkdir(parents=True)
    app_pid, app_token = sleeper()
    job = _record(sleeper, cold_pause_pending=True, app_server_pid=app_pid,
                  app_server_pgid=app_pid, app_server_start_token=app_token)
    with lifecycle_lock(session_dir(SID)):  # a pause in progress: nothing to reconcile
        held = snapshot(state)
        busy = peek_job(job["job_id"])
        assert changes(held, snapshot(state)) == []
    assert (busy["status"], busy["reconcile_pending"]) == ("running", False)

    before = snapshot(state)  # the lock file exists and is free: an interrupted pause
    assert f"sessions/{SID}/lifecycle.lock" in before
    peeked = peek_job(job["job_id"])
    assert changes(before, snapshot(state)) == []
    assert process_matches(job["runner_pid"], job["runner_start_token"])
    assert process_matches(app_pid, app_token)
    assert (peeked["status"], peeked["reconcile_pending"]) == ("paused", True)
    for name in ("cold_pause_pending", "runner_pid", "app_server_pid"):
        assert name not in peeked

    loaded = load_job(job["job_id"])
    assert loaded == _without_flags(peeked)
    assert not process_matches(app_pid, app_token)


def test_a_job_never_launched_peeks_failed_with_the_reason_of_the_reconciling_read(
        sleeper, state):
    job = _record(sleeper, runner=False, status="queued",
                  created_at="2020-01-01T00:00:00+00:00")
    before = snapshot(state)
    peeked = peek_job(job["job_id"])
    assert [r["status"] for r in peek_jobs(status="failed")] == ["failed"]
    assert peek_jobs(status="queued") == []
    assert changes(before, snapshot(state)) == []
    assert (peeked["status"], peeked["stored_status"]) == ("failed", "queued")

    loaded = load_job(job["job_id"])
    assert loaded["error"] == peeked["error"] == "the job host was never launched"
    assert {k: v for k, v in loaded.items() if k != "finished_at"} == {
        k: v for k, v in _without_flags(peeked).items() if k != "finished_at"}


def test_a_torn_record_gives_the_error_of_the_reconciling_read_and_writes_nothing(
        sleeper, state):
    good = _record(sleeper, runner=False, status="completed")
    torn = _record(sleeper, runner=False, status="completed")
    path = job_file(torn["job_id"], "metadata.json")
    path.write_bytes(path.read_bytes()[:40])  # a write cut short
    before = snapshot(state)

    with pytest.raises(ValueError) as peeked:
        peek_job(torn["job_id"])
    with pytest.raises(RuntimeError) as listed:
        peek_jobs()
    rows = peek_jobs(include_unreadable=True)
    with pytest.raises(FileNotFoundError) as unknown:
        peek_job("not a job")
    assert changes(before, snapshot(state)) == []

    with pytest.raises(ValueError) as loaded:
        load_job(torn["job_id"])
    assert str(peeked.value) == str(loaded.value)
    assert str(peeked.value).startswith(str(path)) and "\n" not in str(peeked.value)
    with pytest.raises(RuntimeError) as strict:
        list_jobs()
    assert str(listed.value) == str(strict.value)
    assert [_without_flags(r) for r in rows] == list_jobs(include_unreadable=True)
    by_status = {r["status"]: r for r in rows}
    assert by_status.keys() == {"unreadable", "completed"}
    assert by_status["completed"] == {**good, "reconcile_pending": False,
                                      "stored_status": "completed"}
    assert by_status["unreadable"]["error"] == " ".join(str(peeked.value).split())
    with pytest.raises(FileNotFoundError) as unknown_load:
        load_job("not a job")
    assert str(unknown.value) == str(unknown_load.value)

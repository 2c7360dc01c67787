"""Pure session reads (issue 17, item 1): what a reconciling read would report, nothing written.

``peek_session`` / ``peek_sessions`` give the status and reason ``load_session`` /
``iter_sessions`` would give, flagged when the stored record is stale, and leave the
state dir byte-for-byte and mtime-for-mtime as it was (session and run records, the
capabilities file, lock files, the listing index). The reconciling reads still
reconcile and write afterwards. Real root hosts on the stand-in, killed with SIGKILL.
"""

from __future__ import annotations

import os
import signal
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from support.state_snapshot import changes, snapshot
from support.waiting import wait_until

from mmo_kernel.api import iter_sessions, load_session, peek_session, peek_sessions
from mmo_kernel.gateway.process import stop_gateway
from mmo_kernel.hosts.warm_host import stop as stop_warm_host
from mmo_kernel.lifecycle.root_exec import run_root_exec
from mmo_kernel.sessions.create import create_session
from mmo_kernel.sessions.records import (
    read_run_record,
    read_session_record,
    session_file,
    session_run_id,
    write_session_record,
)
from mmo_kernel.sessions.state import update_session
from mmo_kernel.state.processes import process_matches

TURN_PROFILE = "access-efficient-escalation-lab"  # root in turn mode
OFFLINE = {"*": "local_scripted"}
FLAGS = ("reconcile_pending", "stored_status")
STAMPED = ("last_active_at", "finished_at")
"""Times a reconciling write stamps when it happens (a peek shows its own now)."""


@pytest.fixture(autouse=True)
def _env(mmo_env, mmo_process_guard):
    yield mmo_env
    stop_gateway()


@pytest.fixture
def state(mmo_env) -> Path:
    return mmo_env.state_dir


def _quiet() -> None:
    """Nothing left running that could write while the state dir is compared."""
    stop_gateway()
    stop_warm_host()


def _same_but_stamps(peeked: dict, loaded: dict) -> None:
    strip = FLAGS + STAMPED
    assert {k: v for k, v in peeked.items() if k not in strip} == {
        k: v for k, v in loaded.items() if k not in strip}


def _gone(record: dict, pid: str, token: str) -> bool:
    return not process_matches(record.get(pid), record.get(token))


def test_a_detached_session_whose_real_host_died_peeks_suspended_and_nothing_is_written(
        mmo_standin, mmo_git_workspace, state):
    out = run_root_exec(TURN_PROFILE, mmo_git_workspace, "long work FAKE_SLEEP=120", 2,
                        bindings=OFFLINE)
    assert out["status"] == "detached"
    sid = out["session"]["session_id"]
    working = wait_until(lambda: (r := read_session_record(sid)).get("active_root_turn_id")
                         and r, what="the detached root's turn")
    os.killpg(working["root_pgid"], signal.SIGKILL)
    os.killpg(working["root_app_server_pgid"], signal.SIGKILL)
    wait_until(lambda: _gone(working, "root_pid", "root_start_token")
               and _gone(working, "root_app_server_pid", "root_app_server_start_token"),
               what="the killed root host and app-server to be gone")
    _quiet()

    before = snapshot(state)
    peeked = peek_session(sid)
    listed = peek_sessions()
    assert changes(before, snapshot(state)) == []

    reason = f"root host {working['root_pid']} is gone"
    assert (peeked["status"], peeked["stored_status"]) == ("suspended", "detached")
    assert peeked["reconcile_pending"] is True
    assert peeked["error"] == reason
    assert peeked["failure"] == {"kind": "host_lost", "retryable": True, "message": reason}
    assert peeked["root_pid"] == working["root_pid"]  # the lost identity is kept, as on load
    [row] = listed
    _same_but_stamps(row, peeked)
    assert row["reconcile_pending"] is True
    run_id = session_run_id(working)
    assert read_run_record(sid, run_id)["status"] == "detached"

    loaded = load_session(sid)  # the reconciling read still reconciles, and writes
    assert loaded["status"] == "suspended" and loaded["error"] == reason
    _same_but_stamps(peeked, loaded)
    after = changes(before, snapshot(state))
    assert f"sessions/{sid}/session.json" in after
    assert f"sessions/{sid}/runs/{run_id}/run.json" in after
    assert read_run_record(sid, run_id)["status"] == "suspended"
    again = peek_session(sid)
    assert (again["status"], again["reconcile_pending"]) == ("suspended", False)
    assert {k: v for k, v in again.items() if k not in FLAGS} == loaded


def test_a_starting_session_that_never_started_peeks_failed_and_keeps_its_capabilities(
        mmo_standin, mmo_git_workspace, state):
    sid = create_session(TURN_PROFILE, cwd=mmo_git_workspace, bindings=OFFLINE)["session_id"]
    long_ago = (datetime.now(UTC) - timedelta(minutes=5)).isoformat()
    update_session(sid, created_at=long_ago, run_created_at=long_ago)
    _quiet()
    capabilities = session_file(sid, "capabilities.json")
    before = snapshot(state)

    peeked = peek_session(sid)
    assert [r["status"] for r in peek_sessions(status="failed")] == ["failed"]
    assert peek_sessions(status="starting") == []
    assert changes(before, snapshot(state)) == []
    assert capabilities.exists()
    assert (peeked["status"], peeked["stored_status"]) == ("failed", "starting")
    assert peeked["error"] == "root host never started (stale starting)"

    loaded = load_session(sid)
    _same_but_stamps(peeked, loaded)
    assert not capabilities.exists()  # the reconciling read finishes it, as before


def _record(sid: str, status: str) -> dict:
    return write_session_record({
        "session_id": sid, "status": status, "profile_id": "demo", "snapshot_hash": "ab" * 32,
        "cwd": "/tmp", "session_kind": "noninteractive", "root_agent": "lead",
        "created_at": "2026-01-01T12:00:00+00:00"})


def test_a_torn_session_record_gives_the_error_of_the_reconciling_read_and_writes_nothing(
        state):
    good = _record("20260101-120000-demo-000001", "completed")
    torn = "20260101-120100-demo-000002"
    _record(torn, "completed")
    path = session_file(torn, "session.json")
    path.write_bytes(path.read_bytes()[:40])  # a write cut short
    before = snapshot(state)

    with pytest.raises(ValueError) as peeked:
        peek_session(torn)
    with pytest.raises(RuntimeError) as listed:
        peek_sessions()
    rows = peek_sessions(include_unreadable=True)
    assert changes(before, snapshot(state)) == []

    with pytest.raises(ValueError) as loaded:
        load_session(torn)
    assert str(peeked.value) == str(loaded.value)
    assert str(peeked.value).startswith(str(path)) and "\n" not in str(peeked.value)
    with pytest.raises(RuntimeError) as strict:
        iter_sessions()
    assert str(listed.value) == str(strict.value)
    shown = iter_sessions(include_unreadable=True)
    assert [{k: v for k, v in r.items() if k not in FLAGS} for r in rows] == shown
    assert [r["status"] for r in rows] == ["unreadable", "completed"]
    assert rows[1] == {**good, "reconcile_pending": False, "stored_status": "completed"}

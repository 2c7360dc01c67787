"""kill -9 of a root's processes before its first turn, and of a detached root's host.

Real hosts on the stand-in. The first turn is held back by the stand-in's
``initialize`` delay (``FAKE_CODEX_APP_SERVER_INITIALIZE_DELAY``), so every kill
provably lands before the root thread exists; a host is held in ``starting`` by
holding the runtime lock it needs to publish itself (a real lock, not a mock).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from support.waiting import Background, wait_until

from mmo_kernel.hosts.control_socket import send_control_request
from mmo_kernel.lifecycle.controls import (
    cancel_session,
    continue_session,
    load_session,
    pause_session,
)
from mmo_kernel.lifecycle.interactive import launch_interactive, resume_interactive
from mmo_kernel.lifecycle.root_exec import run_root_exec, start_root
from mmo_kernel.sessions.create import create_session
from mmo_kernel.sessions.records import iter_session_records, read_session_record, session_file
from mmo_kernel.sessions.state import update_session
from mmo_kernel.state.files import runtime_lock
from mmo_kernel.state.processes import process_matches

TURN_PROFILE = "access-efficient-escalation-lab"   # root in turn mode
OFFLINE = {"*": "local_scripted"}
PROMPT = "Summarize the repository in one line"
DELAY = "FAKE_CODEX_APP_SERVER_INITIALIZE_DELAY"
MMO = str(Path(sys.executable).with_name("mmo"))


@pytest.fixture(autouse=True)
def _standin(mmo_standin, gateway_stopped_after):
    yield


@pytest.fixture
def workspace(mmo_git_workspace):
    return mmo_git_workspace


def _latest() -> str:
    return wait_until(lambda: (iter_session_records() or [None])[0],
                      what="the session")["session_id"]


def _app_server_recorded_without_thread(sid: str) -> dict:
    record = wait_until(lambda: (r := read_session_record(sid)).get("root_app_server_pgid")
                        and r, what="the root app-server on record")
    assert not record.get("root_thread_id")  # initialize is still held back: no thread yet
    return record


def _alive(record: dict, pid: str, token: str) -> bool:
    return process_matches(record.get(pid), record.get(token))


def _wait_retired(record: dict) -> None:
    wait_until(lambda: not _alive(record, "root_pid", "root_start_token")
               and not _alive(record, "root_app_server_pid", "root_app_server_start_token"),
               what="the finished host and its app-server to exit")


def _turns(sid: str) -> list[dict]:
    return json.loads(session_file(sid, "root-terminal-history.json").read_text())["turns"]


def _sent(sid: str, method: str) -> list[dict]:
    rows = [json.loads(line) for line in
            session_file(sid, "root-events.jsonl").read_text().splitlines()]
    return [r["message"] for r in rows
            if r["direction"] == "sent" and r["message"].get("method") == method]


def _audit(sid: str, event: str) -> list[dict]:
    rows = [json.loads(line) for line in session_file(sid, "audit.jsonl").read_text().splitlines()]
    return [r for r in rows if r["event"] == event]


def _assert_prompt_delivered_once(sid: str) -> None:
    [start] = _sent(sid, "turn/start")  # exactly one turn/start, carrying the prompt itself
    assert start["params"]["input"][0]["text"] == PROMPT
    assert [t["status"] for t in _turns(sid)] == ["completed"]
    assert "FAKE_CODEX_OK" in session_file(sid, "root-result.md").read_text()


def test_a_root_app_server_killed_before_the_first_turn_is_restarted_and_the_run_completes(
        workspace, monkeypatch):
    monkeypatch.setenv(DELAY, "3")
    run = Background(run_root_exec, TURN_PROFILE, workspace, PROMPT, 120, bindings=OFFLINE)
    sid = _latest()
    before = _app_server_recorded_without_thread(sid)
    os.killpg(before["root_app_server_pgid"], signal.SIGKILL)

    out = run.join(150)
    assert out["status"] == "completed", out["session"].get("error")
    session = out["session"]
    assert session["root_recovery_attempts"] == 1
    assert session["root_app_server_pid"] != before["root_app_server_pid"]
    _assert_prompt_delivered_once(sid)
    _wait_retired(read_session_record(sid))


def test_continue_starts_the_first_turn_from_the_recorded_prompt_when_host_and_app_server_died(
        workspace, monkeypatch):
    monkeypatch.setenv(DELAY, "600")  # this handshake never ends by itself
    run = Background(run_root_exec, TURN_PROFILE, workspace, PROMPT, 120, bindings=OFFLINE)
    sid = _latest()
    before = _app_server_recorded_without_thread(sid)
    os.killpg(before["root_pgid"], signal.SIGKILL)
    os.killpg(before["root_app_server_pgid"], signal.SIGKILL)

    out = run.join()
    assert out["status"] == "suspended"
    assert out["session"]["error"] == (f"root host {before['root_pid']} died during start-up, "
                                       "before the root thread existed")
    monkeypatch.delenv(DELAY)
    continue_session(sid)
    done = wait_until(lambda: (r := load_session(sid))["status"] == "completed" and r,
                      timeout=90, what="the continued root to complete")
    assert done["root_thread_id"]
    _assert_prompt_delivered_once(sid)
    [resumed] = _audit(sid, "run_resumed")
    assert resumed["first_turn"] is True and resumed["host_relaunched"] is True
    _wait_retired(done)


def test_a_root_host_killed_during_start_up_is_suspended_with_the_truth_and_continuable(
        workspace):
    session = create_session(TURN_PROFILE, cwd=workspace, bindings=OFFLINE)
    sid = session["session_id"]
    with runtime_lock():  # the host cannot publish itself while this is held
        launched = start_root(session, PROMPT, (), None, 60)
        os.kill(launched["root_pid"], signal.SIGKILL)
        wait_until(lambda: not _alive(launched, "root_pid", "root_start_token"),
                   what="the killed host to be gone")
    assert read_session_record(sid)["status"] == "starting"  # it died before it ever ran

    record = load_session(sid)
    reason = (f"root host {launched['root_pid']} died during start-up, "
              "before the root thread existed")
    assert record["status"] == "suspended"
    assert record["error"] == reason
    assert record["failure"] == {"kind": "host_lost", "retryable": True, "message": reason}
    assert record["root_pid"] == launched["root_pid"]  # a suspension keeps the lost identity

    out = continue_session(sid)
    assert out["session"]["status"] == "running"
    done = wait_until(lambda: (r := load_session(sid))["status"] == "completed" and r,
                      timeout=90, what="the continued root to complete")
    _assert_prompt_delivered_once(sid)
    _wait_retired(done)


def test_a_starting_session_that_never_recorded_a_host_still_fails_as_stale(workspace):
    sid = create_session(TURN_PROFILE, cwd=workspace, bindings=OFFLINE)["session_id"]
    long_ago = (datetime.now(UTC) - timedelta(minutes=5)).isoformat()
    update_session(sid, created_at=long_ago, run_created_at=long_ago)
    record = load_session(sid)
    assert record["status"] == "failed"
    assert record["error"] == "root host never started (stale starting)"


def _wall_detached_with_a_working_host(workspace) -> tuple[str, dict]:
    out = run_root_exec(TURN_PROFILE, workspace, "long work FAKE_SLEEP=120", 2,
                        bindings=OFFLINE)
    assert out["status"] == "detached" and out["root_status"] == "harness_wall_detached"
    sid = out["session"]["session_id"]
    working = wait_until(lambda: (r := read_session_record(sid)).get("active_root_turn_id")
                         and r, what="the detached root's turn")
    return sid, working


@pytest.mark.parametrize("reader", [["sessions", "--json"], ["session", "show", "--json"]])
def test_a_detached_session_whose_host_died_is_suspended_by_every_read(workspace, reader):
    sid, working = _wall_detached_with_a_working_host(workspace)
    os.kill(working["root_pid"], signal.SIGKILL)
    wait_until(lambda: not _alive(working, "root_pid", "root_start_token"),
               what="the killed host to be gone")
    assert iter_session_records()[0]["status"] == "detached"  # the pure enumeration only reads

    argv = reader + [sid] if reader[0] == "session" else reader
    listed = subprocess.run([MMO, *argv], capture_output=True, text=True,
                            stdin=subprocess.DEVNULL, timeout=90)
    assert listed.returncode == 0, listed.stderr
    shown = json.loads(listed.stdout)
    row = shown["session"] if "session" in shown else shown["sessions"][0]
    reason = f"root host {working['root_pid']} is gone"
    assert (row["session_id"], row["status"], row["error"]) == (sid, "suspended", reason)
    assert read_session_record(sid)["status"] == "suspended"  # reconciled on disk, once

    # continuable: the new host adopts the live app-server and its turn (steered to finish)
    assert _alive(working, "root_app_server_pid", "root_app_server_start_token")
    continue_session(sid, "Finish now.")
    done = wait_until(lambda: (r := load_session(sid))["status"] == "completed" and r,
                      timeout=90, what="the adopted turn to complete")
    assert [t["id"] for t in _turns(sid)] == [working["active_root_turn_id"]]
    _wait_retired(done)


def test_answering_operator_input_after_a_wall_detach_keeps_the_session_detached(workspace):
    out = run_root_exec(TURN_PROFILE, workspace, "slow FAKE_SLEEP=4 FAKE_REQUEST_USER_INPUT",
                        1, bindings=OFFLINE)
    assert out["root_status"] == "harness_wall_detached" and not out["pending_requests"]
    sid = out["session"]["session_id"]
    waiting = wait_until(lambda: (r := read_session_record(sid)).get("pending_requests") and r,
                         what="the detached root to ask for input")
    assert waiting["status"] == "detached"
    request = waiting["pending_requests"][0]
    path = waiting["root_control_socket"]
    revision = send_control_request(path, {"action": "inspect"})["result"]["control_revision"]
    send_control_request(path, {"action": "respond", "expected_revision": revision,
                                "request_id": request["id"],
                                "response": {"answers": {"q": "carry on"}}})
    answered = read_session_record(sid)
    assert not answered.get("pending_requests")
    assert answered["status"] == "detached"  # the caller's wall detach is never undone
    assert [r["id"] for r in waiting["pending_requests"]] == [request["id"]]  # listed once
    done = wait_until(lambda: (r := load_session(sid))["status"] == "completed" and r,
                      timeout=60, what="the answered root to complete")
    _wait_retired(done)


def test_a_thread_that_never_ran_a_turn_is_replaced_when_its_app_server_is_gone(workspace):
    """Codex never persisted it (``no rollout found``): nothing is lost by a new thread."""
    assert launch_interactive(TURN_PROFILE, workspace, bindings=OFFLINE) == 0
    sid = iter_session_records()[0]["session_id"]
    first = read_session_record(sid)["root_thread_id"]
    paused = pause_session(sid)["session"]  # host and app-server retired; no turn ever ran
    assert paused["status"] == "paused" and paused["root_thread_id"] == first

    assert resume_interactive(sid) == 0
    record = load_session(sid)
    assert record["status"] == "detached"
    assert record["root_thread_id"] and record["root_thread_id"] != first
    # each replacement is audited, old and new: the host's (its thread was not saved) and
    # the adoption of the thread the TUI started (it cannot resume an unsaved one either)
    replaced = _audit(sid, "root_thread_replaced")
    chain = [(e["previous_thread_id"], e["root_thread_id"]) for e in replaced]
    assert first in [old for old, _ in chain] and chain[-1][1] == record["root_thread_id"]
    assert all(new == nxt for (_, new), (nxt, _) in zip(chain, chain[1:], strict=False))
    home = Path(record["homes"][record["root_agent"]]["home"])
    tui = [json.loads(line) for line in
           (home / "fake-interactive-invocations.jsonl").read_text().splitlines()]
    assert tui[-1]["thread_id"] == record["root_thread_id"]  # the TUI joined the new thread
    cancel_session(sid)

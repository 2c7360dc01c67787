"""kill -9 of the real app-server mid-turn: MMO resumes the same thread and finishes."""

from __future__ import annotations

import json
import os
import signal

import pytest

from mmo_kernel.api import run_root_exec
from mmo_kernel.sessions.records import read_session_record, session_file

from .conftest import JOB_LAB, OFFLINE, Background, events, script, wait_until

pytestmark = pytest.mark.real_codex


def _command_started(session_id: str) -> dict | None:
    record = read_session_record(session_id)
    path = session_file(session_id, "root-events.jsonl")
    if not (record.get("active_root_turn_id") and record.get("root_app_server_pgid")
            and path.is_file()):
        return None
    started = any(r["message"].get("method") == "item/started"
                  and r["message"]["params"]["item"].get("type") == "commandExecution"
                  for r in events(path) if r["direction"] == "received")
    return record if started else None


def test_killed_app_server_mid_turn_is_recovered_on_the_same_thread(workspace):
    from mmo_kernel.sessions.records import iter_session_records

    # the lost call comes back to the model with the output "aborted": `try` goes on
    prompt = script("try shell sleep 2 && echo slept", "shell echo after-recovery",
                    "say recovered: {{step1}} / {{step2}}")
    run = Background(run_root_exec, JOB_LAB, workspace, prompt, 90, bindings=OFFLINE)
    sid = wait_until(lambda: (iter_session_records() or [None])[0],
                     what="the session")["session_id"]
    before = wait_until(lambda: _command_started(sid), what="the root's command to start")
    os.killpg(before["root_app_server_pgid"], signal.SIGKILL)
    out = run.join()
    assert out["status"] == "completed", out
    assert out["result"] == "recovered: aborted / after-recovery"
    session = out["session"]
    assert session["root_thread_id"] == before["root_thread_id"]
    assert session["root_recovery_attempts"] == 1
    turns = json.loads(session_file(sid, "root-terminal-history.json").read_text())["turns"]
    # real Codex persisted the killed turn as interrupted; MMO continued in a new turn
    assert turns[0]["id"] == before["active_root_turn_id"]
    assert [t["status"] for t in turns] == ["interrupted", "completed"]


def test_killed_controller_leaves_the_app_server_and_continue_adopts_its_turn(workspace):
    """The running turn survives its controller; the next host waits for that same turn."""
    from mmo_kernel.lifecycle.controls import continue_session, load_session
    from mmo_kernel.sessions.records import iter_session_records
    from mmo_kernel.state.processes import process_matches

    prompt = script("shell sleep 6 && echo slept", "say adopted: {{step1}}")
    run = Background(run_root_exec, JOB_LAB, workspace, prompt, 90, bindings=OFFLINE)
    sid = wait_until(lambda: (iter_session_records() or [None])[0],
                     what="the session")["session_id"]
    before = wait_until(lambda: _command_started(sid), what="the root's command to start")
    os.killpg(before["root_pgid"], signal.SIGKILL)
    assert run.join()["status"] == "suspended"
    app = (before["root_app_server_pid"], before["root_app_server_start_token"])
    assert process_matches(*app)  # left alive on its socket, not on the dead host's pipes

    continue_session(sid)
    wait_until(lambda: load_session(sid)["status"] == "completed", timeout=60,
               what="the adopted turn to complete")
    turns = json.loads(session_file(sid, "root-terminal-history.json").read_text())["turns"]
    assert [(t["id"], t["status"]) for t in turns] == [
        (before["active_root_turn_id"], "completed")]
    assert session_file(sid, "root-result.md").read_text() == "adopted: slept"
    host = (read_session_record(sid)["root_pid"], read_session_record(sid)["root_start_token"])
    wait_until(lambda: not process_matches(*app) and not process_matches(*host),
               what="the finished host to retire the adopted app-server and exit")

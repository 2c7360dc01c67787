"""Controls are refused while a host is still starting, and the refusal changes nothing.

A host publishes its identity before the protocol handshake (spec 03/04), so for a
while a live host has no control socket and no thread. Here the real hosts run on
the stand-in, whose ``initialize`` answer is held back
(``FAKE_CODEX_APP_SERVER_INITIALIZE_DELAY``) far longer than the test: every check
happens while the host is provably mid-handshake. Cancelling still works then.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from support.waiting import Background, wait_until

from mmo_kernel.state.processes import process_matches

JOB_LAB = Path(__file__).resolve().parents[2] / "fixtures" / "profiles" / "job-lab"
TURN_PROFILE = "access-efficient-escalation-lab"
OFFLINE = {"*": "local_scripted"}
HANDSHAKE_HELD_SECONDS = "600"  # the test cancels long before the stand-in answers

JOB_CONTROLS = [
    ("steer", {"input": "hurry"}),
    ("interrupt", {}),
    ("pause", {}),
    ("continue", {"input": "go on"}),
    ("detach", {}),
    ("stop", {}),
    ("compact", {}),
    ("finalize", {}),
    ("respond", {"request_id": 1, "response": {"decision": "accept"}}),
]
"""Every job control action (``set_effort`` is refused earlier: this agent has no efforts)."""
JOB_CONTROL_FIELDS = ("status", "control_revision", "last_control_action", "last_control_status",
                      "last_control_error", "progress_revision", "resume_request", "runner_pid",
                      "runner_start_token", "app_server_pid", "control_socket_ready")
SESSION_FIELDS = ("status", "root_pid", "root_start_token", "root_app_server_pid",
                  "root_thread_id", "root_control_socket_ready", "cold_pause_pending",
                  "paused_job_ids", "root_continue_input", "root_compacted_at",
                  "root_client_pid")


@pytest.fixture(autouse=True)
def _slow_handshake(mmo_env, mmo_standin, monkeypatch):
    monkeypatch.setenv("FAKE_CODEX_APP_SERVER_INITIALIZE_DELAY", HANDSHAKE_HELD_SECONDS)
    yield mmo_env
    from mmo_kernel.gateway.process import stop_gateway

    stop_gateway()


def _subset(record: dict, fields: tuple[str, ...]) -> dict:
    return {k: record.get(k) for k in fields}


def _audit(session_id: str) -> list[str]:
    from mmo_kernel.sessions.records import session_file

    path = session_file(session_id, "audit.jsonl")
    return [json.loads(line)["event"] for line in path.read_text().splitlines()]


def test_job_controls_are_refused_while_its_host_is_mid_handshake(mmo_git_workspace):
    from mmo_kernel.jobs.cancel import cancel_job
    from mmo_kernel.jobs.controls import control_job
    from mmo_kernel.jobs.listing import load_job
    from mmo_kernel.jobs.spawn import spawn_job
    from mmo_kernel.sessions.create import create_session

    session = create_session(JOB_LAB, cwd=mmo_git_workspace)
    sid = session["session_id"]
    job_id = spawn_job(sid, "lead", None, "plain", task="Say hello")["job_id"]
    # the host is live and has started its app-server, whose initialize answer is held
    starting = wait_until(lambda: (r := load_job(job_id)).get("app_server_pid") and r,
                          what="the job host to start its app-server")
    assert process_matches(starting["runner_pid"], starting["runner_start_token"])
    assert not starting.get("control_socket_ready") and starting["status"] == "running"
    before = _subset(starting, JOB_CONTROL_FIELDS)
    try:
        for action, fields in JOB_CONTROLS:
            with pytest.raises(RuntimeError, match="still starting"):
                control_job(job_id, action, sid, "lead",
                            expected_revision=starting.get("control_revision", 0), **fields)
            assert _subset(load_job(job_id), JOB_CONTROL_FIELDS) == before, action
        assert "agent_resumed" not in _audit(sid)
    finally:  # cancelling works mid-handshake (and leaves no process behind)
        done = cancel_job(job_id, sid, reason="test over", caller_agent="lead")["jobs"][0]
    assert done["status"] == "cancelled"
    wait_until(lambda: not process_matches(starting["runner_pid"],
                                           starting["runner_start_token"]),
               what="the cancelled job host to exit")
    assert not process_matches(starting["app_server_pid"], starting.get("app_server_start_token"))


def _session_controls_refused(sid: str) -> None:
    """Detach, pause, compact and continue each refuse a starting root, changing nothing."""
    from mmo_kernel.lifecycle.controls import (
        compact_session,
        continue_session,
        detach_session,
        load_session,
        pause_session,
    )

    before, events = _subset(load_session(sid), SESSION_FIELDS), _audit(sid)
    refusals = [
        (detach_session, "before the persistent root thread"),
        (pause_session, "cannot pause session from status .*no durable root thread"),
        (compact_session, "cannot compact session from status"),
        (continue_session, "already has a live root host"),
    ]
    for control, phrase in refusals:
        with pytest.raises(RuntimeError, match=phrase):
            control(sid)
        assert _subset(load_session(sid), SESSION_FIELDS) == before, control.__name__
    assert _audit(sid) == events  # no run_resumed, no session_paused, ...


def test_session_controls_are_refused_while_the_root_host_is_mid_handshake(mmo_git_workspace):
    from mmo_kernel.lifecycle.controls import cancel_session, load_session
    from mmo_kernel.lifecycle.root_exec import run_root_exec
    from mmo_kernel.sessions.records import iter_session_records

    run = Background(run_root_exec, TURN_PROFILE, mmo_git_workspace, "Say hello", 600,
                     bindings=OFFLINE)
    sid = wait_until(lambda: (iter_session_records() or [None])[0], what="a session")[
        "session_id"]
    starting = wait_until(lambda: (r := load_session(sid)).get("root_app_server_pid") and r,
                          what="the root host to start its app-server")
    assert process_matches(starting["root_pid"], starting["root_start_token"])
    assert not starting.get("root_thread_id") and not starting.get("root_control_socket_ready")
    try:
        _session_controls_refused(sid)
    finally:  # cancelling works mid-handshake (and leaves no process behind)
        cancelled = cancel_session(sid)["session"]
    assert cancelled["status"] == "cancelled"
    with pytest.raises(RuntimeError, match=re.escape(f"session {sid} was cancelled")):
        run.join()
    for pid, token in (("root_pid", "root_start_token"),
                       ("root_app_server_pid", "root_app_server_start_token")):
        assert not process_matches(starting[pid], starting.get(token)), pid


def test_session_controls_are_refused_while_the_record_still_says_starting(mmo_git_workspace):
    """The instant between a host publishing itself and the session turning ``running``."""
    from mmo_kernel.lifecycle.controls import cancel_session, load_session
    from mmo_kernel.sessions.create import create_session
    from mmo_kernel.sessions.records import session_file
    from mmo_kernel.sessions.state import update_session
    from mmo_kernel.state.files import atomic_write_text
    from mmo_kernel.state.processes import spawn_detached

    session = create_session(TURN_PROFILE, cwd=mmo_git_workspace, bindings=OFFLINE)
    sid = session["session_id"]
    # as run_root_exec leaves it: the prompt recorded, a live host published
    atomic_write_text(session_file(sid, "root-prompt.txt"), "Say hello")
    pid, token = spawn_detached(["sleep", "600"], cwd="/", env=dict(os.environ))
    update_session(sid, root_pid=pid, root_pgid=pid, root_start_token=token)
    assert load_session(sid)["status"] == "starting"
    try:
        _session_controls_refused(sid)
        assert load_session(sid)["status"] == "starting"
    finally:
        cancelled = cancel_session(sid)["session"]
    assert cancelled["status"] == "cancelled"
    wait_until(lambda: not process_matches(pid, token), what="the host to be retired")

"""launch_interactive: a bound root thread, the TUI on the host's socket, detached after."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from mmo_codex_standin.websocket import WebSocketClient

from mmo_kernel.hosts.control_socket import send_control_request
from mmo_kernel.hosts.root_socket import root_app_server_socket_path
from mmo_kernel.lifecycle.controls import cancel_session, load_session
from mmo_kernel.lifecycle.interactive import launch_interactive, tui_argv
from mmo_kernel.sessions.records import iter_session_records, session_file
from mmo_kernel.state.processes import process_matches

from .conftest import (
    GOAL_PROFILE,
    OFFLINE,
    TURN_PROFILE,
    audit_events,
    invocations,
    wait_until,
)


def _only_session() -> dict:
    records = iter_session_records()
    assert len(records) == 1
    return load_session(records[0]["session_id"])


def _host_pids(record: dict) -> list[tuple[int, str]]:
    return [(record["root_pid"], record["root_start_token"]),
            (record["root_app_server_pid"], record["root_app_server_start_token"])]


def test_launch_runs_the_tui_on_the_bound_thread_and_leaves_the_host_detached(workspace):
    code = launch_interactive(TURN_PROFILE, workspace, bindings=OFFLINE)

    assert code == 0
    record = _only_session()
    sid, thread = record["session_id"], record["root_thread_id"]
    assert record["status"] == "detached"
    assert record["session_kind"] == "interactive"
    assert thread and record["root_control_socket_ready"] is True
    assert "root_client_pid" not in record  # the client was released
    socket_path = root_app_server_socket_path(sid)
    assert len(os.fsencode(str(socket_path))) < 104 and socket_path.is_socket()
    calls = invocations(record)
    # before its first turn Codex has not saved the thread, so the TUI starts its own and
    # the host adopts it as the root thread (a resume would fail: no rollout found)
    assert calls == [{"args": ["--remote", f"unix://{socket_path}"], "thread_id": thread,
                      "started": True}]
    assert all(process_matches(pid, token) for pid, token in _host_pids(record))
    assert [e["event"] for e in audit_events(sid)] == ["run_started", "root_thread_replaced"]
    assert "root_goal_status" not in record  # turn mode has no goal
    # the socket is a live app-server the TUI shares the root thread on
    client = WebSocketClient(str(socket_path))
    try:
        client.send({"id": 1, "method": "initialize",
                     "params": {"clientInfo": {"name": "codex_tui", "version": "0"}}})
        assert "codexHome" in _response(client, 1)["result"]
        client.send({"id": 2, "method": "thread/resume", "params": {"threadId": thread}})
        assert _response(client, 2)["result"]["thread"]["id"] == thread
    finally:
        client.close()

    result = cancel_session(sid)

    assert result["session"]["status"] == "cancelled"
    assert not any(process_matches(pid, token) for pid, token in _host_pids(record))
    # mmo_process_guard fails the test if any process is left behind


def _response(client: WebSocketClient, request_id: int) -> dict:
    while True:
        message = client.recv()
        if message.get("id") == request_id and "method" not in message:
            return message


def test_goal_mode_root_is_seeded_with_a_paused_goal_not_a_suspension(workspace):
    assert launch_interactive(GOAL_PROFILE, workspace, bindings=OFFLINE) == 0

    record = _only_session()
    assert record["status"] == "detached"
    assert record["root_execution_mode"] == "goal"
    assert record["root_goal_status"] == "paused"
    assert record["root_goal_bootstrap_pending"] is True
    assert "failure" not in record and "resume_error" not in record
    assert invocations(record)[0]["thread_id"] == record["root_thread_id"]
    cancel_session(record["session_id"])


def test_tui_that_cannot_start_leaves_the_session_detached_with_host_and_thread(
        workspace, monkeypatch):
    """The fault (the TUI binary cannot be executed) is injected at process start."""
    real_popen = subprocess.Popen

    def refuse_tui(argv, *args, **kwargs):
        if "--remote" in argv:
            raise PermissionError(13, "Permission denied", argv[0])
        return real_popen(argv, *args, **kwargs)

    monkeypatch.setattr("mmo_kernel.lifecycle.interactive.subprocess.Popen", refuse_tui)

    with pytest.raises(PermissionError):
        launch_interactive(TURN_PROFILE, workspace, bindings=OFFLINE)

    record = _only_session()
    assert record["status"] == "detached"
    assert record["root_thread_id"]
    assert all(process_matches(pid, token) for pid, token in _host_pids(record))
    assert invocations(record) == []
    cancel_session(record["session_id"])


def test_tui_exit_code_is_returned(workspace, tmp_path, monkeypatch):
    """A TUI that exits 3 (a wrapper around the stand-in) is reported as 3, still detached."""
    from mmo_kernel.testing import STANDIN_NAME

    standin = Path(os.environ["MMO_CODEX_BIN"])
    wrapper = tmp_path / "codex-wrapper"
    wrapper.write_text(f'#!/bin/sh\nif [ "$1" = "--remote" ]; then "{standin}" "$@"; exit 3; fi\n'
                       f'exec "{standin}" "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("MMO_CODEX_BIN", str(wrapper))
    assert STANDIN_NAME in standin.name

    assert launch_interactive(TURN_PROFILE, workspace, bindings=OFFLINE) == 3

    record = _only_session()
    assert record["status"] == "detached"
    assert tui_argv(record)[1:] == [  # no turn yet: the TUI starts the thread
        "--remote", f"unix://{root_app_server_socket_path(record['session_id'])}"]
    assert len(invocations(record)) == 1
    cancel_session(record["session_id"])



def test_goal_mode_root_seeded_paused_records_its_objective(workspace):
    assert launch_interactive(GOAL_PROFILE, workspace, bindings=OFFLINE) == 0

    record = _only_session()
    objective = record.get("root_goal_objective")
    assert isinstance(objective, str) and objective.strip(), record.get("root_goal_objective")
    assert len(objective) <= 4000
    assert GOAL_PROFILE in objective
    assert record["root_goal_status"] == "paused"
    cancel_session(record["session_id"])


def test_control_continue_on_an_idle_interactive_root_never_misses_its_fast_turn(workspace):
    """Every ``continue`` answers with the turn it started, however fast that turn ends
    (spec 03): the host hands the turn id over; it never polls for an active turn."""
    assert launch_interactive(TURN_PROFILE, workspace, bindings=OFFLINE) == 0
    record = _only_session()
    path = record["root_control_socket"]

    def control(action, **fields):
        live = send_control_request(path, {"action": "inspect"})["result"]
        request = {"action": action, "expected_revision": live["control_revision"], **fields}
        return send_control_request(path, request, timeout=40)["result"]

    def idle():
        return send_control_request(path, {"action": "inspect"})["result"]["active_turn_id"] \
            is None

    started = []
    try:
        for n in range(100):  # one missed turn in a hundred is enough to fail
            started.append(control("continue", input=f"quick answer {n}")["turn_id"])
            wait_until(idle, what="the continued turn to end", poll=0.005)
    finally:
        cancel_session(record["session_id"])
    rows = [json.loads(line)["message"] for line in
            session_file(record["session_id"], "root-events.jsonl").read_text().splitlines()]
    completed = [m["params"]["turn"]["id"] for m in rows if m.get("method") == "turn/completed"]
    assert started == completed and len(set(started)) == 100

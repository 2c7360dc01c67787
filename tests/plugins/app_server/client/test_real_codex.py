"""The client and session against the real pinned Codex app-server (offline model)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from mmo_app_server.approvals import ApprovalPolicy
from mmo_app_server.client import KEEP_PENDING, AppServerClient
from mmo_app_server.errors import AppServerError, TransportLost
from mmo_app_server.events import jsonl_recorder
from mmo_app_server.session import AppServerSession
from plugins.app_server.client.scripted_model import call_tool, hang, say, write_codex_config

from mmo_kernel.state.audit import read_jsonl
from mmo_kernel.state.processes import process_group_alive, process_matches

pytestmark = pytest.mark.real_codex


def open_session(setup: Any, **kwargs: Any) -> AppServerSession:
    client = AppServerClient.spawn(setup.argv, cwd=setup.cwd, env=setup.env,
                                   stderr_path=setup.logs / "stderr.log", **kwargs)
    session = AppServerSession(client)
    client.initialize()
    return session


def wait_for(predicate: Any, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.02)


def test_identity_is_published_before_the_handshake(real_codex: Any) -> None:
    events = real_codex.logs / "root-events.jsonl"
    client = AppServerClient.spawn(real_codex.argv, cwd=real_codex.cwd, env=real_codex.env,
                                   stderr_path=real_codex.logs / "stderr.log",
                                   recorder=jsonl_recorder(events))
    try:
        assert os.getpgid(client.pid) == client.pgid == client.pid
        assert process_matches(client.pid, client.start_token)
        assert not events.exists()  # nothing said yet, identity already known
        info = client.initialize()
        assert Path(info["codexHome"]) == real_codex.home
        assert info["userAgent"].startswith("mmo/")
    finally:
        client.close()
    assert not process_group_alive(client.pgid)
    assert not process_matches(client.pid, client.start_token)
    rows = read_jsonl(events, strict=True)
    assert rows[0]["direction"] == "sent"
    assert rows[0]["message"]["params"]["clientInfo"]["name"] == "mmo"
    answered = next(n for n, row in enumerate(rows)
                    if row["direction"] == "received" and row["message"].get("id") == 1)
    initialized = next(n for n, row in enumerate(rows) if row["direction"] == "sent"
                       and row["message"].get("method") == "initialized")
    assert answered < initialized  # the notification follows the handshake's answer


def test_threads_goals_and_typed_errors_offline(real_codex: Any) -> None:
    session = open_session(real_codex)
    try:
        thread = session.start_thread({"cwd": str(real_codex.cwd)})["thread"]
        read = session.read_thread(thread["id"])  # never ran a turn: no rollout yet
        assert read["id"] == thread["id"] and read["turns"] == []
        goal = session.set_goal(thread["id"], objective="ship it", status="paused",
                                token_budget=5000)
        assert (goal["objective"], goal["status"], goal["tokenBudget"]) == (
            "ship it", "paused", 5000)
        wait_for(lambda: session.turns.goal(thread["id"]) is not None)
        assert session.turns.goal(thread["id"])["status"] == "paused"
        assert session.get_goal(thread["id"])["objective"] == "ship it"
        with pytest.raises(AppServerError) as refused:
            session.read_thread("not-a-thread-id")
        assert refused.value.code == -32600 and "invalid thread id" in refused.value.message
        with pytest.raises(AppServerError, match="no active turn"):
            session.interrupt(thread["id"], "turn-x")
    finally:
        session.client.close()


def test_turn_collects_message_usage_and_history(real_codex: Any,
                                                 responses_server: Any) -> None:
    responses_server.script(say("all done FAKE_CODEX_OK", input_tokens=150, output_tokens=9))
    session = open_session(real_codex)
    try:
        thread_id = session.start_thread({"cwd": str(real_codex.cwd)})["thread"]["id"]
        outcome = session.run_turn(thread_id, "do the thing", timeout=30)
        history = session.read_thread(thread_id)
    finally:
        session.client.close()
    assert outcome.status == "completed" and outcome.error is None
    assert outcome.final_message == "all done FAKE_CODEX_OK"
    assert outcome.token_usage["last"]["inputTokens"] == 150
    assert outcome.token_usage["last"]["outputTokens"] == 9
    assert [turn["id"] for turn in history["turns"]] == [outcome.turn_id]
    assert responses_server.bodies[0]["input"][-1]["content"][0]["text"] == "do the thing"


def escalated_touch(path: Path) -> Any:
    return call_tool("exec_command", {"cmd": f"touch {path}",
                                      "sandbox_permissions": "require_escalated",
                                      "justification": "test needs a write"})


def test_never_policy_declines_a_real_command_approval(real_codex: Any,
                                                       responses_server: Any) -> None:
    write_codex_config(real_codex.home, responses_server.url, approval_policy="on-request")
    target = real_codex.cwd / "made-by-agent"
    responses_server.script(escalated_touch(target), say("gave up"))
    session = open_session(real_codex, approvals=ApprovalPolicy(approval_policy="never"))
    try:
        thread_id = session.start_thread({"cwd": str(real_codex.cwd)})["thread"]["id"]
        outcome = session.run_turn(thread_id, "touch a file", timeout=30)
    finally:
        session.client.close()
    assert outcome.status == "completed" and outcome.final_message == "gave up"
    assert not target.exists()
    tool_output = responses_server.bodies[1]["input"][-1]
    assert tool_output["type"] == "function_call_output"
    assert "rejected" in tool_output["output"]


def test_pending_approval_is_answered_later(real_codex: Any, responses_server: Any) -> None:
    write_codex_config(real_codex.home, responses_server.url, approval_policy="on-request")
    target = real_codex.cwd / "approved-file"
    responses_server.script(escalated_touch(target), say("made it"))
    session = open_session(real_codex, request_handler=lambda request: KEEP_PENDING,
                           approvals=ApprovalPolicy(approval_policy="on-request"))
    try:
        thread_id = session.start_thread({"cwd": str(real_codex.cwd)})["thread"]["id"]
        turn = session.start_turn(thread_id, "touch a file")
        wait_for(lambda: session.client.pending_server_requests() != [])
        (pending,) = session.client.pending_server_requests()
        assert pending["method"] == "item/commandExecution/requestApproval"
        assert pending["params"]["turnId"] == turn["id"]
        session.client.respond(pending["id"], {"decision": "accept"})
        outcome = session.wait_turn_completed(turn["id"], timeout=30)
    finally:
        session.client.close()
    tool_output = responses_server.bodies[1]["input"][-1]
    assert "exited with code 0" in tool_output["output"], tool_output
    assert outcome.final_message == "made it" and target.exists()


def test_interrupt_ends_a_slow_turn(real_codex: Any, responses_server: Any) -> None:
    responses_server.script(hang(responses_server.gate))
    session = open_session(real_codex)
    try:
        thread_id = session.start_thread({"cwd": str(real_codex.cwd)})["thread"]["id"]
        turn = session.start_turn(thread_id, "take your time")
        wait_for(lambda: len(responses_server.bodies) == 1)
        assert session.interrupt(thread_id, turn["id"]) == {}
        outcome = session.wait_turn_completed(turn["id"], timeout=15)
    finally:
        session.client.close()
    assert outcome.status == "interrupted" and outcome.error is None


def test_killed_server_loses_transport_then_a_new_one_resumes(real_codex: Any,
                                                              responses_server: Any) -> None:
    responses_server.script(say("first answer"), hang(responses_server.gate))
    session = open_session(real_codex)
    try:
        thread_id = session.start_thread({"cwd": str(real_codex.cwd)})["thread"]["id"]
        first = session.run_turn(thread_id, "first", timeout=30)
        second = session.start_turn(thread_id, "second, slow")
        wait_for(lambda: len(responses_server.bodies) == 2)
        os.killpg(session.client.pgid, signal.SIGKILL)
        # the loss ends the wait (TransportLost), not its timeout (TimeoutError)
        with pytest.raises(TransportLost):
            session.wait_turn_completed(second["id"], timeout=30)
        with pytest.raises(TransportLost):
            session.read_thread(thread_id)
    finally:
        session.client.close()

    recovered = open_session(real_codex)
    try:
        resumed = recovered.resume_thread(thread_id, {"cwd": str(real_codex.cwd)})
        assert resumed["thread"]["id"] == thread_id
        turns = recovered.read_thread(thread_id)["turns"]
        again = recovered.run_turn(thread_id, "third", timeout=30)
    finally:
        recovered.client.close()
    assert [(t["id"], t["status"]) for t in turns] == [
        (first.turn_id, "completed"), (second["id"], "interrupted")]
    assert again.status == "completed" and again.final_message == "FAKE_CODEX_OK"

"""Client routing and process handling against a scripted peer (faults on demand)."""

from __future__ import annotations

import logging
import os
import queue
import signal
import time
from typing import Any

import pytest
from mmo_app_server.approvals import ApprovalPolicy
from mmo_app_server.client import KEEP_PENDING, AppServerClient
from mmo_app_server.errors import AppServerError, TransportLost
from mmo_app_server.events import jsonl_recorder
from mmo_app_server.messages import ServerRequest
from mmo_app_server.session import AppServerSession

from mmo_kernel.state.audit import read_jsonl
from mmo_kernel.state.processes import process_alive, process_group_alive


def spawn(peer: Any, **kwargs: Any) -> AppServerClient:
    return AppServerClient.spawn(peer.argv, cwd=peer.cwd, env=peer.env,
                                 stderr_path=peer.logs / "stderr.log", **kwargs)


def test_server_request_ids_colliding_with_ours_are_routed_by_method(peer: Any) -> None:
    seen: list[ServerRequest] = []

    def handler(request: ServerRequest) -> Any:
        seen.append(request)
        return {"answers": {"q": {"answers": ["yes"]}}}

    with spawn(peer, request_handler=handler) as client:
        client.initialize()
        # the peer asks its own request with *our* pending id before answering us
        result = client.request("peer/collide", {"method": "item/tool/requestUserInput",
                                                 "params": {"questions": []}})
    assert len(seen) == 1 and seen[0].method == "item/tool/requestUserInput"
    assert seen[0].id == 2  # our initialize was 1, this request 2: same id as ours
    assert result["answer"] == {"id": 2, "result": {"answers": {"q": {"answers": ["yes"]}}}}


def test_never_policy_declines_approvals_itself(peer: Any) -> None:
    with spawn(peer, approvals=ApprovalPolicy(approval_policy="never")) as client:
        for method, expected in (
            ("item/commandExecution/requestApproval", {"decision": "decline"}),
            ("item/fileChange/requestApproval", {"decision": "decline"}),
            ("mcpServer/elicitation/request", {"action": "decline"}),
        ):
            answer = client.request("peer/collide", {"method": method})["answer"]
            assert answer["result"] == expected
        assert client.pending_server_requests() == []


def test_unanswerable_requests_still_get_an_error_reply(peer: Any) -> None:
    def failing(request: ServerRequest) -> Any:
        raise KeyError("no tool")

    with spawn(peer) as client:
        answer = client.request("peer/collide", {"method": "item/tool/call"})["answer"]
        assert answer["error"]["code"] == -32601
        assert "item/tool/call" in answer["error"]["message"]
    with spawn(peer, request_handler=failing) as client:
        answer = client.request("peer/collide", {"method": "item/tool/call"})["answer"]
        assert answer["error"]["code"] == -32603 and "no tool" in answer["error"]["message"]


def test_kept_pending_request_is_listed_then_answered_once(peer: Any) -> None:
    with spawn(peer, request_handler=lambda request: KEEP_PENDING,
               approvals=ApprovalPolicy(approval_policy="on-request")) as client:
        assert client.request("peer/ask", {"method": "item/commandExecution/requestApproval",
                                           "params": {"command": "rm -rf x"}})["asked"]
        deadline = time.monotonic() + 5
        while not client.pending_server_requests() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert client.pending_server_requests() == [
            {"id": 0, "method": "item/commandExecution/requestApproval",
             "params": {"command": "rm -rf x"}}]
        client.respond(0, {"decision": "accept"})
        assert client.pending_server_requests() == []
        with pytest.raises(ValueError, match="no pending app-server request with id 0"):
            client.respond(0, {"decision": "accept"})


def test_error_response_is_typed(peer: Any) -> None:
    with spawn(peer) as client:
        with pytest.raises(AppServerError) as refused:
            client.request("peer/error")
    assert (refused.value.code, refused.value.message, refused.value.data) == (
        -32600, "bad thing", {"x": 1})
    assert refused.value.method == "peer/error"


def test_non_json_lines_are_ignored_and_logged(peer: Any, caplog: Any) -> None:
    notes: queue.Queue[dict[str, Any]] = queue.Queue()
    caplog.set_level(logging.WARNING, logger="mmo.app_server")
    with spawn(peer) as client:
        client.add_notification_listener(notes.put)
        assert client.request("peer/noise") == {"after": "noise"}
    assert notes.get(timeout=1) == {"method": "peer/noted", "params": {"n": 1}}
    assert "non-JSON line" in caplog.text and "this is not json" in caplog.text


def test_chatty_server_never_blocks(peer: Any) -> None:
    ticks: list[int] = []
    with spawn(peer) as client:
        # a blocked reader would never see the reply: the request would end in TimeoutError
        result = client.request("peer/flood", {"stderr_kib": 4096, "notifications": 3000},
                                timeout=120)
        client.add_notification_listener(lambda m: ticks.append(m["params"]["n"]))
    assert result == {"flooded": True}
    assert (peer.logs / "stderr.log").stat().st_size >= 4096 * 1024


def test_every_message_is_recorded_in_order(peer: Any) -> None:
    events = peer.logs / "events.jsonl"
    with spawn(peer, recorder=jsonl_recorder(events),
               approvals=ApprovalPolicy(approval_policy="never")) as client:
        client.initialize()
        client.request("peer/collide", {"method": "item/fileChange/requestApproval"})
    rows = read_jsonl(events, strict=True)
    assert all(set(row) == {"recorded_at", "direction", "message"} for row in rows)
    assert [(row["direction"], row["message"].get("method")) for row in rows] == [
        ("sent", "initialize"), ("received", None), ("sent", "initialized"),
        ("sent", "peer/collide"), ("received", "item/fileChange/requestApproval"),
        ("sent", None), ("received", None)]
    assert rows[5]["message"] == {"id": 2, "result": {"decision": "decline"}}
    assert events.read_text().count("\n") == len(rows)
    assert '", "' not in events.read_text()  # compact separators


def test_death_fails_pending_requests_at_once(peer: Any) -> None:
    lost: list[TransportLost] = []
    with spawn(peer) as client:
        client.add_loss_listener(lost.append)
        # failed by the death (TransportLost naming the exit), not by its timeout
        with pytest.raises(TransportLost, match="exited with status 3"):
            client.request("peer/die", {"status": 3}, timeout=30)
        with pytest.raises(TransportLost):
            client.request("peer/echo")
        with pytest.raises(TransportLost):
            client.notify("initialized")
        assert client.returncode == 3
    assert len(lost) == 1 and lost[0].returncode == 3


def test_close_kills_the_whole_group_and_reaps(peer: Any) -> None:
    client = spawn(peer)
    assert client.pgid == client.pid and client.start_token
    children = client.request("peer/orphan")
    orphan, escaped = children["orphan_pid"], children["escaped_pid"]
    assert process_alive(orphan) and process_alive(escaped)
    assert os.getpgid(escaped) != client.pgid
    client.close()
    assert not process_alive(orphan) and not process_group_alive(client.pgid)
    assert not process_alive(escaped)
    assert client.returncode is not None
    with pytest.raises(TransportLost, match="closed by MMO"):
        client.request("peer/echo")
    client.close()  # idempotent


def test_close_escalates_to_sigkill_after_grace(peer: Any) -> None:
    client = spawn(peer)
    client.request("peer/ignore_term")
    started = time.monotonic()
    client.close(grace_seconds=0.3)
    assert time.monotonic() - started >= 0.3
    assert client.returncode == -signal.SIGKILL


def test_notifications_racing_ahead_of_the_response_are_kept(peer: Any) -> None:
    with spawn(peer) as client:
        session = AppServerSession(client)
        turn = session.start_turn("thread-1", "FAKE_NOTIFY_BEFORE_RESPONSE",
                                  turnIdForTest="turn-7")
        assert turn["id"] == "turn-7"
        outcome = session.wait_turn_completed("turn-7", timeout=5)
    assert outcome.status == "completed" and outcome.thread_id == "thread-1"
    assert outcome.final_message == "FAKE_CODEX_OK early"
    assert outcome.token_usage is not None and outcome.token_usage["total"]["totalTokens"] == 9
    assert outcome.goal == {"status": "complete"}
    assert session.turns.latest_turn_id("thread-1") == "turn-7"


def test_waiting_on_a_dead_server_raises_transport_lost(peer: Any) -> None:
    with spawn(peer) as client:
        session = AppServerSession(client)
        with pytest.raises(TransportLost):
            client.request("peer/die")
        with pytest.raises(TransportLost):
            session.wait_turn_completed("turn-never", timeout=5)
        with pytest.raises(TimeoutError):
            AppServerSession(spawn_alive := spawn(peer)).wait_turn_completed("x", 0.05)
        spawn_alive.close()

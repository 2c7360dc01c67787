"""Every FAKE_* marker, observed through real processes."""

from __future__ import annotations

import json
import os
import time

import psutil
import pytest
from mmo_codex_standin.fixtures import RpcFailure


@pytest.fixture
def client(spawn_standin):
    server = spawn_standin()
    server.initialize()
    return server


def _resume_after_crash(spawn_standin, thread):
    other = spawn_standin()
    other.initialize()
    return other, other.call("thread/resume", {"threadId": thread})["thread"]


def test_usage_limit_fails_with_reset_time(client):
    thread = client.start_thread()
    done = client.run_turn(thread, "FAKE_PROVIDER_USAGE_LIMIT")
    assert done["status"] == "failed"
    assert done["error"]["codexErrorInfo"] == "usageLimitExceeded"
    assert "2026-08-22 05:24:28" in done["error"]["message"]
    error = client.notification("error")
    assert error["willRetry"] is False and error["error"] == done["error"]
    assert client.run_turn(thread, "FAKE_PROVIDER_USAGE_LIMIT")["status"] == "failed"


def test_usage_limit_once_and_bad_request(client):
    thread = client.start_thread()
    assert client.run_turn(thread, "FAKE_PROVIDER_USAGE_LIMIT_ONCE")["status"] == "failed"
    assert client.run_turn(thread, "continue")["status"] == "completed", "inherited, but only once"
    other = client.start_thread()
    done = client.run_turn(other, "FAKE_PROVIDER_BAD_REQUEST")
    assert done["status"] == "failed" and "400 Bad Request" in done["error"]["message"]


def test_crash_once_mid_turn_then_resume(client, spawn_standin):
    thread = client.start_thread()
    turn = client.start_turn(thread, "FAKE_APP_SERVER_CRASH_ONCE")
    with pytest.raises(EOFError):
        client.turn_completed(turn)
    assert client.proc.wait(timeout=10) != 0
    other, resumed = _resume_after_crash(spawn_standin, thread)
    assert [t["status"] for t in resumed["turns"]] == ["interrupted"]
    assert other.run_turn(thread, "retry FAKE_APP_SERVER_CRASH_ONCE")["status"] == "completed", (
        "once per thread"
    )


def test_crash_after_persist_reads_back_completed(client, spawn_standin):
    thread = client.start_thread()
    turn = client.start_turn(thread, "FAKE_APP_SERVER_CRASH_AFTER_PERSIST_ONCE")
    with pytest.raises(EOFError):
        client.turn_completed(turn)
    assert not any(m.get("method") == "item/agentMessage/delta" for m in client.received)
    other, resumed = _resume_after_crash(spawn_standin, thread)
    assert resumed["turns"][0]["status"] == "completed"
    assert resumed["turns"][0]["items"][-1]["text"] == "FAKE_CODEX_OK"


def test_crash_during_finalization(client, spawn_standin):
    thread = client.start_thread()
    client.call("thread/goal/set", {"threadId": thread, "objective": "o", "status": "paused"})
    client.call("thread/goal/set", {"threadId": thread, "status": "active"})
    work = client.run_turn(
        thread, "FAKE_APP_SERVER_CRASH_DURING_FINALIZATION_ONCE call update_goal"
    )
    assert work["status"] == "completed", "not a finalization turn: no crash"
    assert client.call("thread/goal/get", {"threadId": thread})["goal"]["status"] == "complete"
    schema = {"type": "object", "properties": {"r": {"type": "string"}}, "required": ["r"]}
    final = client.start_turn(thread, "finalize", outputSchema=schema)
    with pytest.raises(EOFError):
        client.turn_completed(final)
    other, resumed = _resume_after_crash(spawn_standin, thread)
    assert resumed["turns"][-1]["id"] == final and resumed["turns"][-1]["status"] == "completed"
    assert json.loads(resumed["turns"][-1]["items"][-1]["text"]) == {"r": "FAKE_CODEX_OK"}


def test_crash_before_goal_reply_keeps_the_goal_and_the_persisted_turn(client, spawn_standin):
    thread = client.start_thread()
    turn = client.start_turn(
        thread, "FAKE_APP_SERVER_CRASH_BEFORE_GOAL_REPLY_ONCE call update_goal FAKE_SLEEP=1"
    )
    with pytest.raises(EOFError):
        client.call("thread/goal/set", {"threadId": thread, "objective": "o", "status": "active"})
    assert not any(m.get("method") == "turn/completed" for m in client.received)
    other, resumed = _resume_after_crash(spawn_standin, thread)
    assert [(t["id"], t["status"]) for t in resumed["turns"]] == [(turn, "completed")]
    assert resumed["turns"][0]["items"][-1]["text"] == "FAKE_CODEX_OK"
    goal = other.call("thread/goal/get", {"threadId": thread})["goal"]
    assert goal["objective"] == "o" and goal["status"] == "complete"
    again = other.call("thread/goal/set", {"threadId": thread, "status": "paused"})["goal"]
    assert again["status"] == "paused", "once per thread"


def test_command_approval_decline_and_cancel(client):
    thread = client.start_thread()
    turn = client.start_turn(thread, "FAKE_REQUEST_COMMAND_APPROVAL")
    request = client.server_request("item/commandExecution/requestApproval")
    assert str(request["id"]).startswith("fake-approval-")
    client.respond(request["id"], {"decision": "decline"})
    done = client.turn_completed(turn)
    assert done["status"] == "completed"
    assert client.notification("serverRequest/resolved")["requestId"] == request["id"]
    mark = len(client.received)
    turn = client.start_turn(thread, "FAKE_REQUEST_COMMAND_APPROVAL")
    request = client.server_request("item/commandExecution/requestApproval", start=mark)
    client.respond(request["id"], {"decision": "cancel"})
    assert client.turn_completed(turn)["status"] == "interrupted"


def test_user_input_waits_and_interrupt_abandons_it(client):
    thread = client.start_thread()
    turn = client.start_turn(thread, "FAKE_REQUEST_USER_INPUT")
    client.server_request("item/tool/requestUserInput")
    flags = client.notification(
        "thread/status/changed", where=lambda p: p["status"].get("activeFlags")
    )
    assert flags["status"]["activeFlags"] == ["waitingOnUserInput"]
    client.call("turn/interrupt", {"threadId": thread, "turnId": turn})
    assert client.turn_completed(turn)["status"] == "interrupted"


def test_notify_before_response(client):
    thread = client.start_thread()
    turn = client.start_turn(thread, "FAKE_NOTIFY_BEFORE_RESPONSE")
    client.turn_completed(turn)
    started = next(i for i, m in enumerate(client.received) if m.get("method") == "turn/started")
    response = next(i for i, m in enumerate(client.received) if m.get("result", {}).get("turn"))
    assert started < response


def test_write_and_orphan(client, standin_workspace):
    thread = client.start_thread(sandbox="workspace-write")
    done = client.run_turn(thread, "FAKE_WRITE out/result.txt::forty two\nFAKE_ORPHAN_CHILD")
    assert done["status"] == "completed"
    assert (standin_workspace / "out" / "result.txt").read_text() == "forty two\n"
    change = client.notification(
        "item/completed", where=lambda p: p["item"]["type"] == "fileChange"
    )["item"]
    assert change["status"] == "completed" and change["changes"][0]["kind"] == {"type": "add"}
    pid = int((standin_workspace / "fake-orphan.pid").read_text())
    assert os.getpgid(pid) == client.proc.pid, "the orphan stays in the app-server's process group"
    client.kill()
    psutil.Process(pid).wait(timeout=10) if psutil.pid_exists(pid) else None
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_write_refused_by_read_only_sandbox(client, standin_workspace):
    thread = client.start_thread(sandbox="read-only")
    client.run_turn(thread, "FAKE_WRITE x.txt::nope")
    change = client.notification(
        "item/completed", where=lambda p: p["item"]["type"] == "fileChange"
    )["item"]
    assert change["status"] == "failed" and not (standin_workspace / "x.txt").exists()


def test_empty_result_and_sleep(client):
    thread = client.start_thread()
    done = client.run_turn(thread, "FAKE_EMPTY_RESULT")
    assert done["status"] == "completed" and done["items"] == []
    started = time.monotonic()
    client.run_turn(thread, "FAKE_SLEEP=0.8")
    assert time.monotonic() - started >= 0.8


def test_goal_budget_and_marker_semantics(client):
    thread = client.start_thread()
    client.call(
        "thread/goal/set",
        {"threadId": thread, "objective": "o", "status": "paused", "tokenBudget": 50},
    )
    client.call("thread/goal/set", {"threadId": thread, "status": "active"})
    done = client.notification("turn/completed")["turn"]
    goal = client.call("thread/goal/get", {"threadId": thread})["goal"]
    assert goal["status"] == "complete", "an automatic continuation turn completes the goal"
    assert goal["tokensUsed"] == 100 + len("o") + len("FAKE_CODEX_OK") // 4
    assert done["status"] == "completed"
    budget = client.start_thread()
    client.call(
        "thread/goal/set",
        {"threadId": budget, "objective": "big", "status": "paused", "tokenBudget": 50},
    )
    client.call("thread/goal/set", {"threadId": budget, "status": "active", "tokenBudget": 50})
    client.call("thread/goal/set", {"threadId": budget, "status": "paused"})
    client.call("thread/goal/set", {"threadId": budget, "status": "active"})
    marker = client.start_thread()
    client.call("thread/goal/set", {"threadId": marker, "objective": "m", "status": "paused"})
    turn = client.start_turn(marker, "FAKE_GOAL_COMPLETE_BEFORE_TURN FAKE_SLEEP=0.3")
    client.call("thread/goal/set", {"threadId": marker, "status": "active"})
    updated = client.notification("thread/goal/updated", where=lambda p: p["turnId"] == turn)
    assert updated["goal"]["status"] == "complete"
    assert client.turn_completed(turn)["status"] == "completed"
    limited = client.start_thread()
    client.call(
        "thread/goal/set",
        {"threadId": limited, "objective": "l", "status": "paused", "tokenBudget": 1000},
    )
    turn = client.start_turn(limited, "FAKE_GOAL_BUDGET_LIMIT_BEFORE_TURN FAKE_SLEEP=0.3")
    client.call("thread/goal/set", {"threadId": limited, "status": "active"})
    client.turn_completed(turn)
    goal = client.call("thread/goal/get", {"threadId": limited})["goal"]
    assert goal["status"] == "budgetLimited" and goal["tokensUsed"] >= 1000
    client.call("thread/goal/set", {"threadId": limited, "status": "paused"})
    assert (
        client.call("thread/goal/get", {"threadId": limited})["goal"]["status"] == "budgetLimited"
    )
    assert client.call("thread/goal/clear", {"threadId": limited}) == {"cleared": True}
    assert client.call("thread/goal/clear", {"threadId": limited}) == {"cleared": False}
    with pytest.raises(RpcFailure):
        client.call("thread/goal/set", {"threadId": limited})


def test_a_goal_set_right_after_turn_start_governs_that_turn(client):
    """MMO's goal bootstrap: the prompt (asking for update_goal) first, then the goal. The
    turn runs under the goal and completes it; Codex starts no continuation turn."""
    thread = client.start_thread()
    turn = client.start_turn(thread, "Do it, then call update_goal with status complete.")
    client.call("thread/goal/set", {"threadId": thread, "objective": "o", "status": "active",
                                    "tokenBudget": 10000})
    assert client.turn_completed(turn)["status"] == "completed"
    goal = client.notification("thread/goal/updated", where=lambda p: p["turnId"] == turn)["goal"]
    assert goal["status"] == "complete" and goal["tokensUsed"] > 0
    started = [m for m in client.received if m.get("method") == "turn/started"]
    assert [m["params"]["turn"]["id"] for m in started] == [turn]


def test_goal_budget_limit_after_turn(client):
    thread = client.start_thread()
    client.call(
        "thread/goal/set",
        {"threadId": thread, "objective": "o", "status": "paused", "tokenBudget": 20},
    )
    turn = client.start_turn(thread, "FAKE_SLEEP=0.3 work without finishing")
    client.call("thread/goal/set", {"threadId": thread, "status": "active"})
    client.turn_completed(turn)
    goal = client.notification("thread/goal/updated", where=lambda p: p["turnId"] == turn)["goal"]
    assert goal["status"] == "budgetLimited" and goal["tokensUsed"] >= 20

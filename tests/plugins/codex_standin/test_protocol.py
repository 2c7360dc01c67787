"""Handshake, thread and turn methods of the stand-in over real pipes and sockets."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mmo_codex_standin.fixtures import RpcFailure, UnixAppServerClient, standin_executable


def test_initialize_rules_and_unknown_methods(spawn_standin, standin_home):
    client = spawn_standin()
    assert client.request("thread/start")["error"] == {"code": -32600, "message": "Not initialized"}
    result = client.initialize()
    assert result["codexHome"] == str(standin_home)
    assert (result["platformFamily"], result["platformOs"]) == ("unix", "linux")
    assert result["userAgent"].startswith("mmo-test/0.169.0")
    assert (
        client.request("initialize", {"clientInfo": {"name": "x", "version": "1"}})["error"][
            "message"
        ]
        == "Already initialized"
    )
    error = client.request("no/such")["error"]
    assert error["code"] == -32600 and "unknown variant `no/such`" in error["message"]
    client.send({"id": 5})  # not JSON-RPC we understand; ignored
    client.proc.stdin.write(b"not json\n")
    client.proc.stdin.flush()
    assert client.call("thread/start")["thread"]["status"] == {"type": "idle"}


def test_initialize_delay_env(spawn_standin):
    client = spawn_standin(env={"FAKE_CODEX_APP_SERVER_INITIALIZE_DELAY": "0.6"})
    started = time.monotonic()
    client.initialize()
    assert time.monotonic() - started >= 0.6


def test_simple_turn_order_usage_and_ids(spawn_standin):
    client = spawn_standin()
    client.initialize()
    thread = client.start_thread()
    text = "hello there"
    turn = client.start_turn(thread, text)
    done = client.turn_completed(turn)
    methods = [m.get("method") for m in client.received]
    start = methods.index("turn/started")
    assert methods[start - 1] == "thread/status/changed"
    assert methods[start:] == [
        "turn/started",
        "item/started",
        "item/completed",
        "item/started",
        "item/agentMessage/delta",
        "item/completed",
        "thread/tokenUsage/updated",
        "thread/status/changed",
        "turn/completed",
    ]
    response_index = next(
        i for i, m in enumerate(client.received) if m.get("result", {}).get("turn")
    )
    assert response_index < start, "notifications follow the turn/start response"
    assert done["status"] == "completed" and done["itemsView"] == "summary"
    assert done["items"][0]["text"] == "FAKE_CODEX_OK"
    usage = client.notification("thread/tokenUsage/updated")["tokenUsage"]["last"]
    assert usage["inputTokens"] == 100 + len(text)
    assert usage["outputTokens"] == len("FAKE_CODEX_OK") // 4
    assert thread.split("-")[2].startswith("7") and turn.split("-")[2].startswith("7"), "UUIDv7 ids"


def test_output_schema_gives_valid_json(spawn_standin):
    client = spawn_standin()
    client.initialize()
    thread = client.start_thread()
    schema = {
        "type": "object",
        "properties": {"verdict": {"enum": ["pass", "fail"]}, "notes": {"type": "string"}},
        "required": ["verdict", "notes"],
    }
    done = client.run_turn(thread, "review", outputSchema=schema)
    assert json.loads(done["items"][0]["text"]) == {"verdict": "pass", "notes": "FAKE_CODEX_OK"}
    done = client.run_turn(thread, "no schema now")
    assert done["items"][0]["text"] == "FAKE_CODEX_OK", "outputSchema applies to one turn only"


def test_contract_schema_in_prompt_and_invalid_first_result(spawn_standin):
    client = spawn_standin()
    client.initialize()
    thread = client.start_thread()
    prompt = (
        "FAKE_INVALID_FIRST_RESULT Answer with JSON matching this schema:\n```json\n"
        '{"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}\n```\n'
    )
    first = client.run_turn(thread, prompt)["items"][0]["text"]
    assert json.loads(first) != {"ok": True} and "ok" not in json.loads(first)
    repaired = client.run_turn(
        thread, "Repair only the final JSON result: 'ok' is a required property"
    )
    assert json.loads(repaired["items"][0]["text"]) == {"ok": True}


def test_join_steer_interrupt(spawn_standin):
    client = spawn_standin()
    client.initialize()
    thread = client.start_thread()
    turn = client.start_turn(thread, "FAKE_SLEEP_SECONDS=600")
    assert (
        client.call(
            "turn/start", {"threadId": thread, "input": [{"type": "text", "text": "more"}]}
        )["turn"]["id"]
        == turn
    ), "turn/start on an active turn joins it"
    with pytest.raises(RpcFailure, match=f"expected active turn id `nope` but found `{turn}`"):
        client.call("turn/steer", {"threadId": thread, "expectedTurnId": "nope", "input": []})
    assert client.call(
        "turn/steer",
        {
            "threadId": thread,
            "expectedTurnId": turn,
            "input": [{"type": "text", "text": "wrap up"}],
        },
    ) == {"turnId": turn}
    # completed although its sleep had ten minutes to go: the steer cut it short
    assert client.turn_completed(turn, timeout=60)["status"] == "completed"
    with pytest.raises(RpcFailure, match="no active turn to steer"):
        client.call("turn/steer", {"threadId": thread, "expectedTurnId": turn, "input": []})
    turn = client.start_turn(thread, "FAKE_SLEEP=30")
    with pytest.raises(RpcFailure, match=f"expected active turn id x but found {turn}"):
        client.call("turn/interrupt", {"threadId": thread, "turnId": "x"})
    assert client.call("turn/interrupt", {"threadId": thread, "turnId": turn}) == {}
    done = client.turn_completed(turn)
    assert done["status"] == "interrupted" and done["error"] is None
    with pytest.raises(RpcFailure, match="no active turn to interrupt"):
        client.call("turn/interrupt", {"threadId": thread, "turnId": turn})
    read = client.call("thread/read", {"threadId": thread, "includeTurns": True})["thread"]
    texts = [
        i["content"][0]["text"] for i in read["turns"][0]["items"] if i["type"] == "userMessage"
    ]
    assert texts == ["FAKE_SLEEP_SECONDS=600", "more", "wrap up"]


def test_bad_params_are_refused(spawn_standin):
    client = spawn_standin()
    client.initialize()
    thread = client.start_thread()
    with pytest.raises(RpcFailure, match="missing field `input`"):
        client.call("turn/start", {"threadId": thread})
    with pytest.raises(RpcFailure, match="invalid thread id"):
        client.call("thread/read", {"threadId": "not-a-uuid"})
    with pytest.raises(RpcFailure, match="thread not found: 01a227a4-0000-7000-8000-000000000000"):
        client.call("turn/start", {"threadId": "01a227a4-0000-7000-8000-000000000000", "input": []})
    with pytest.raises(RpcFailure, match="requires experimentalApi capability"):
        client.call("thread/start", {"dynamicTools": [{"type": "function", "name": "t"}]})
    with pytest.raises(RpcFailure, match="no goal exists"):
        client.call("thread/goal/set", {"threadId": thread})
    ephemeral = client.start_thread(ephemeral=True)
    with pytest.raises(RpcFailure, match="ephemeral thread does not support goals"):
        client.call("thread/goal/set", {"threadId": ephemeral, "objective": "x"})


def test_persistence_resume_and_writer_lock(spawn_standin, standin_home):
    first = spawn_standin()
    first.initialize()
    thread = first.start_thread()
    assert not list((standin_home / "sessions").glob("**/*.jsonl")), (
        "no rollout before the first turn"
    )
    second = spawn_standin()
    second.initialize()
    with pytest.raises(RpcFailure, match=f"no rollout found for thread id {thread}"):
        second.call("thread/resume", {"threadId": thread})
    first.run_turn(thread, "one")
    rollouts = list((standin_home / "sessions").glob(f"*/*/*/rollout-*-{thread}.jsonl"))
    assert len(rollouts) == 1
    with pytest.raises(RpcFailure, match=f"thread {thread} already has an active writer"):
        second.call("thread/resume", {"threadId": thread})
    doomed = first.start_turn(thread, "FAKE_SLEEP=30")
    first.notification("item/completed", where=lambda p: p["turnId"] == doomed)
    first.kill()
    resumed = second.call("thread/resume", {"threadId": thread})["thread"]
    assert [t["status"] for t in resumed["turns"]] == ["completed", "interrupted"]
    assert resumed["turns"][0]["items"][-1]["text"] == "FAKE_CODEX_OK"
    assert second.run_turn(thread, "again")["status"] == "completed"
    assert len(list((standin_home / "sessions").glob(f"**/rollout-*-{thread}.jsonl"))) == 1


def test_fork_and_read_not_loaded(spawn_standin):
    client = spawn_standin()
    client.initialize()
    thread = client.start_thread()
    first = client.run_turn(thread, "one")["id"]
    client.run_turn(thread, "two")
    fork = client.call("thread/fork", {"threadId": thread, "lastTurnId": first})["thread"]
    assert fork["forkedFromId"] == thread and fork["id"] != thread
    assert [t["id"] for t in fork["turns"]] == [first]
    other = spawn_standin()
    other.initialize()
    read = other.call("thread/read", {"threadId": fork["id"], "includeTurns": True})["thread"]
    assert read["status"] == {"type": "notLoaded"} and [t["id"] for t in read["turns"]] == [first]


def test_unix_socket_websocket_transport(standin_home, standin_workspace, tmp_path):
    socket_path = tmp_path / "app.sock"
    proc = subprocess.Popen(
        [str(standin_executable()), "app-server", "--listen", f"unix://{socket_path}"],
        cwd=standin_workspace,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
    )
    try:
        host = UnixAppServerClient(socket_path)
        host.initialize()
        thread = host.start_thread()
        tui = UnixAppServerClient(socket_path)
        tui.initialize()
        tui.call("thread/resume", {"threadId": thread})  # same process: rejoins, no writer conflict
        turn = host.start_turn(thread, "FAKE_REQUEST_USER_INPUT")
        request = tui.server_request("item/tool/requestUserInput")
        assert isinstance(request["id"], int)
        tui.respond(request["id"], {"answers": {"fake_question": {"answers": ["yes"]}}})
        done = host.turn_completed(turn)
        assert "operator answered: yes" in done["items"][0]["text"]
        host.close()
        tui.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)
    assert not socket_path.exists()


def test_interactive_resume_stub_and_version(standin_home):
    exe = str(standin_executable())
    out = subprocess.run([exe, "--version"], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "codex-cli 0.169.0 (mmo stand-in)"
    args = ["--remote", "unix:///tmp/x.sock", "resume", "01a227a4-0000-7000-8000-000000000000"]
    assert subprocess.run([exe, *args], env=os.environ).returncode == 0
    rows = [
        json.loads(line)
        for line in (standin_home / "fake-interactive-invocations.jsonl").read_text().splitlines()
    ]
    assert rows == [{"args": args, "thread_id": "01a227a4-0000-7000-8000-000000000000"}]
    assert subprocess.run([exe, "resume"], capture_output=True).returncode == 2


def test_stdin_eof_ends_the_process(spawn_standin):
    client = spawn_standin()
    client.initialize()
    client.proc.stdin.close()
    assert client.proc.wait(timeout=10) == 0
    assert Path(sys.executable).exists()

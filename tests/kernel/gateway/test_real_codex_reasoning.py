"""The real pinned Codex accepts translated reasoning items and sends them back intact."""

from __future__ import annotations

import json

import pytest
from support.fake_upstream import Reply, chat_reasoning_reply, chat_text_reply, chat_tool_reply, sse
from support.gateway_harness import make_model, make_route
from support.real_codex import codex_binary, run_turn, write_config

from mmo_kernel.plugin.manager import get_driver

pytestmark = pytest.mark.real_codex
KEY = "sk-real-codex-reasoning-0123456789"
ECHO = {"cmd": "echo tool-said-hi", "login": False, "yield_time_ms": 20000}


def codex_config(route, model, gateway_url: str, effort: str | None = None) -> dict:
    config = get_driver("route_drivers", "codex_custom").provider_config(route, model, gateway_url)
    if effort:
        config["model_reasoning_effort"] = effort
    return config


def test_real_codex_keeps_chat_reasoning_through_a_tool_loop(serve, upstream, monkeypatch,
                                                             tmp_path, mmo_process_guard):
    codex_binary()
    monkeypatch.setenv("FAKE_CHAT_KEY", KEY)
    route = make_route("fake_chat", "openai_chat", upstream.url + "/v1",
                       credential_env="FAKE_CHAT_KEY")
    model = make_model("fake_chat")
    upstream.queue(chat_reasoning_reply(
        ["I will run ", "echo."],
        chat_tool_reply([("call_echo", "exec_command", json.dumps(ECHO))])),
        chat_text_reply("The command printed tool-said-hi."))
    with serve([route], [model]) as gw:
        home = tmp_path / "codex-home"
        write_config(home, codex_config(route, model, gw.url))
        result = run_turn(home, tmp_path, "Run echo and report.",
                          env={"FAKE_CHAT_KEY": ""}, timeout=90)
        log = gw.log()
    assert result.status == "completed", (result.error, result.stderr[-2000:])
    [reasoning] = result.items("reasoning")
    assert reasoning["summary"] == ["I will run echo."]
    assert "tool-said-hi" in result.items("commandExecution")[0]["aggregatedOutput"]
    assert result.agent_text() == "The command printed tool-said-hi."
    assert [r["status"] for r in log] == [200, 200]
    [assistant] = [m for m in upstream.seen[1].body["messages"] if m["role"] == "assistant"]
    assert assistant["reasoning_content"] == "I will run echo."
    assert [c["id"] for c in assistant["tool_calls"]] == ["call_echo"]


def test_real_codex_returns_anthropic_thinking_with_its_signature(serve, upstream, monkeypatch,
                                                                  tmp_path, mmo_process_guard):
    codex_binary()
    monkeypatch.setenv("FAKE_ANTH_KEY", KEY)
    route = make_route("fake_anth", "anthropic_messages", upstream.url + "/v1",
                       credential_env="FAKE_ANTH_KEY")
    model = make_model("fake_anth", reasoning_levels=["low", "high"], default_reasoning="high")
    upstream.queue(anthropic_reply([
        [{"type": "thinking", "thinking": "", "signature": ""},
         {"type": "thinking_delta", "thinking": "Run echo first."},
         {"type": "signature_delta", "signature": "sig-real-codex"}],
        [{"type": "tool_use", "id": "toolu_echo", "name": "exec_command", "input": {}},
         {"type": "input_json_delta", "partial_json": json.dumps(ECHO)}]], stop="tool_use"),
        anthropic_reply([[{"type": "text", "text": ""},
                          {"type": "text_delta", "text": "It printed tool-said-hi."}]]))
    with serve([route], [model]) as gw:
        home = tmp_path / "codex-home"
        write_config(home, codex_config(route, model, gw.url, effort="high"))
        result = run_turn(home, tmp_path, "Run echo and report.",
                          env={"FAKE_ANTH_KEY": ""}, timeout=90)
    assert result.status == "completed", (result.error, result.stderr[-2000:])
    assert [r["summary"] for r in result.items("reasoning")] == [["Run echo first."]]
    assert result.agent_text() == "It printed tool-said-hi."
    first, second = (seen.body for seen in upstream.seen)
    assert first["thinking"] == second["thinking"] == {"type": "enabled", "budget_tokens": 16384}
    assistant = second["messages"][1]
    assert assistant["role"] == "assistant"
    assert assistant["content"][0] == {"type": "thinking", "thinking": "Run echo first.",
                                       "signature": "sig-real-codex"}
    assert assistant["content"][1]["type"] == "tool_use"


def anthropic_reply(blocks: list[list[dict]], stop: str = "end_turn") -> Reply:
    """A Messages stream; each block is ``[content_block, delta, delta…]``."""
    events: list[dict] = [{"type": "message_start", "message": {
        "model": "claude-t", "usage": {"input_tokens": 50, "output_tokens": 1}}}]
    for index, (start, *deltas) in enumerate(blocks):
        events.append({"type": "content_block_start", "index": index, "content_block": start})
        events += [{"type": "content_block_delta", "index": index, "delta": d} for d in deltas]
        events.append({"type": "content_block_stop", "index": index})
    events += [{"type": "message_delta", "delta": {"stop_reason": stop},
                "usage": {"output_tokens": 12}}, {"type": "message_stop"}]
    return Reply(chunks=sse(events, named=True))

"""The real pinned Codex talks to the gateway: tool round trip and fault classification."""

from __future__ import annotations

import json

import pytest
from support.fake_upstream import Reply, chat_text_reply, chat_tool_reply
from support.gateway_harness import make_model, make_route
from support.real_codex import codex_binary, provider_config, run_turn, write_config

from mmo_kernel.plugin.manager import get_driver

pytestmark = pytest.mark.real_codex
KEY = "sk-real-codex-0123456789"


def test_real_codex_runs_a_tool_round_trip_through_the_gateway(serve, upstream, monkeypatch,
                                                               tmp_path, mmo_process_guard):
    codex_binary()
    monkeypatch.setenv("FAKE_CHAT_KEY", KEY)
    route = make_route("fake_chat", "openai_chat", upstream.url + "/v1",
                       credential_env="FAKE_CHAT_KEY")
    model = make_model("fake_chat")
    upstream.queue(chat_tool_reply([("call_echo", "exec_command",
                                     json.dumps({"cmd": "echo tool-said-hi", "login": False,
                                                 "yield_time_ms": 20000}))]),
                   chat_text_reply("The command printed tool-said-hi."))
    with serve([route], [model]) as gw:
        home = tmp_path / "codex-home"
        write_config(home, get_driver("route_drivers", "codex_custom").provider_config(
            route, model, gw.url))
        result = run_turn(home, tmp_path, "Run echo and report.",
                          env={"FAKE_CHAT_KEY": ""}, timeout=90)
        log = gw.log()
    assert result.status == "completed", (result.error, result.stderr[-2000:])
    [command] = result.items("commandExecution")
    assert "tool-said-hi" in command["aggregatedOutput"] and command["exitCode"] == 0
    assert result.agent_text() == "The command printed tool-said-hi."
    first, second = (seen.body for seen in upstream.seen)
    assert first["model"] == "upstream-m1" and first["messages"][0]["role"] == "system"
    assert "exec_command" in [t["function"]["name"] for t in first["tools"]]
    [tool_message] = [m for m in second["messages"] if m["role"] == "tool"]
    assert tool_message["tool_call_id"] == "call_echo"
    assert "tool-said-hi" in tool_message["content"]
    assert all(seen.headers["authorization"] == f"Bearer {KEY}" for seen in upstream.seen)
    assert [r["status"] for r in log] == [200, 200]
    usage = result.notifications("thread/tokenUsage/updated")[-1]["tokenUsage"]["total"]
    assert usage["totalTokens"] == 29 + 18


@pytest.mark.parametrize(("fault", "error_info", "message"), [
    ("rate_limit", "usageLimitExceeded", "usage limit"),
    ("server_error", "internalServerError", ""),
    ("auth_error", {"httpConnectionFailed": {"httpStatusCode": 401}}, "injected route fault"),
    ("timeout", {"httpConnectionFailed": {"httpStatusCode": 504}}, "injected route fault"),
    ("transport", {"httpConnectionFailed": {"httpStatusCode": 502}}, "injected route fault"),
])
def test_real_codex_classifies_injected_faults(serve, upstream, tmp_path, fault, error_info,
                                               message, mmo_process_guard):
    route = make_route("fake_chat", "openai_chat", upstream.url,
                       options={"request_max_retries": 0, "stream_max_retries": 0})
    model = make_model("fake_chat")
    with serve([route], [model]) as gw:
        home = tmp_path / "codex-home"
        write_config(home, get_driver("route_drivers", "codex_custom").provider_config(
            route, model, gw.url, fault=fault))
        result = run_turn(home, tmp_path, "hello", timeout=60)
    assert result.status == "failed"
    assert result.error["codexErrorInfo"] == error_info
    assert message.lower() in result.error["message"].lower()
    assert upstream.seen == []


UPSTREAM_ERRORS = {
    "context_length_exceeded": (400, {"message": "Your input exceeds the context window.",
                                      "type": "invalid_request_error", "param": "input",
                                      "code": "context_length_exceeded"}, "contextWindowExceeded"),
    "insufficient_quota": (429, {"message": "You exceeded your current quota.",
                                 "type": "insufficient_quota", "param": None,
                                 "code": "insufficient_quota"}, "usageLimitExceeded"),
}


@pytest.mark.parametrize("code", sorted(UPSTREAM_ERRORS))
def test_real_codex_classifies_upstream_error_codes_as_it_does_directly(
        serve, upstream, tmp_path, code, mmo_process_guard):
    status, error, error_info = UPSTREAM_ERRORS[code]

    def answer() -> Reply:
        return Reply(status, "application/json", [json.dumps({"error": error}).encode()])

    retries = {"request_max_retries": 1, "stream_max_retries": 1}
    upstream.queue(answer())
    direct_home = tmp_path / "direct-home"
    write_config(direct_home, provider_config("direct", upstream.url + "/v1", "upstream-m1",
                                              retries))
    direct = run_turn(direct_home, tmp_path, "hello", timeout=60)

    route = make_route("fake_chat", "openai_chat", upstream.url, options=retries)
    model = make_model("fake_chat")
    upstream.queue(answer())
    with serve([route], [model]) as gw:
        home = tmp_path / "codex-home"
        write_config(home, get_driver("route_drivers", "codex_custom").provider_config(
            route, model, gw.url))
        through = run_turn(home, tmp_path, "hello", timeout=60)
    assert direct.status == through.status == "failed"
    assert direct.error["codexErrorInfo"] == through.error["codexErrorInfo"] == error_info
    assert through.error["message"] == direct.error["message"]
    assert len(upstream.seen) == 2  # neither Codex retried: both failures are terminal

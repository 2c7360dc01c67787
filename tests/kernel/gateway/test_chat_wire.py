"""openai_chat routes: Responses requests become Chat Completions and back."""

from __future__ import annotations

import json

from support.fake_upstream import Reply, chat_text_reply, chat_tool_reply
from support.gateway_harness import make_model, make_route

SECRET = "sk-chat-secret-0123456789"
HEADER_SECRET = "hdr-secret-987654321"


def codex_body(model_id: str, input_items: list, tools: list | None = None, **extra) -> dict:
    return {"model": model_id, "stream": True, "input": input_items, "tools": tools or [],
            "tool_choice": "auto", "parallel_tool_calls": True, "store": False, **extra}


def user(text: str) -> dict:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def test_text_stream_is_translated_to_exact_responses_events(serve, upstream, monkeypatch):
    monkeypatch.setenv("CHAT_KEY", SECRET)
    route = make_route("chat_r", "openai_chat", upstream.url + "/v1", credential_env="CHAT_KEY")
    model = make_model("chat_r")
    upstream.queue(chat_text_reply("Hello world", usage=(12, 5)))
    with serve([route], [model]) as gw:
        res = gw.responses("chat_r", codex_body(model.id, [
            {"type": "message", "role": "developer",
             "content": [{"type": "input_text", "text": "Be brief."}]},
            user("hi")]))
    assert res.status == 200 and res.headers["content-type"] == "text/event-stream"
    frames = res.frames()
    assert [f["type"] for f in frames] == [
        "response.created", "response.in_progress", "response.output_item.added",
        "response.content_part.added", "response.output_text.delta",
        "response.output_text.delta", "response.output_text.done", "response.content_part.done",
        "response.output_item.done", "response.completed"]
    assert "".join(f["delta"] for f in frames if f["type"].endswith("delta")) == "Hello world"
    assert frames[8]["item"]["content"][0]["text"] == "Hello world"
    assert frames[-1]["response"]["usage"]["total_tokens"] == 17
    sent = upstream.seen[0]
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {SECRET}"
    assert sent.body["model"] == "upstream-m1" and sent.body["stream"] is True
    assert sent.body["stream_options"] == {"include_usage": True}
    assert sent.body["messages"] == [{"role": "system", "content": "Be brief."},
                                     {"role": "user", "content": "hi"}]
    [record] = gw.log()
    assert (record["route"], record["model"], record["status"]) == ("chat_r", model.id, 200)
    assert record["usage"]["input_tokens"] == 12 and record["latency_ms"] >= 0


def test_parallel_tool_calls_round_trip(serve, upstream, monkeypatch):
    monkeypatch.setenv("CHAT_KEY", SECRET)
    route = make_route("chat_r", "openai_chat", upstream.url + "/v1", credential_env="CHAT_KEY")
    model = make_model("chat_r")
    tools = [{"type": "function", "name": "exec_command", "parameters": {"type": "object"},
              "strict": False},
             {"type": "namespace", "name": "mcp__echo", "tools": [
                 {"type": "function", "name": "echo", "description": "Echo",
                  "parameters": {"type": "object"}}]}]
    upstream.queue(chat_tool_reply([("call_1", "exec_command", '{"cmd":"ls"}'),
                                    ("call_2", "mcp__echo__echo", '{"text":"ping"}')]))
    with serve([route], [model]) as gw:
        first = gw.responses("chat_r", codex_body(model.id, [user("go")], tools))
        calls = [f["item"] for f in first.frames() if f["type"] == "response.output_item.done"]
        assert [(c["type"], c["name"], c.get("namespace"), c["call_id"], c["arguments"])
                for c in calls] == [
            ("function_call", "exec_command", None, "call_1", '{"cmd":"ls"}'),
            ("function_call", "echo", "mcp__echo", "call_2", '{"text":"ping"}')]
        assert upstream.seen[0].body["tools"][1]["function"]["name"] == "mcp__echo__echo"
        assert upstream.seen[0].body["parallel_tool_calls"] is True
        upstream.queue(chat_text_reply("done"))
        history = [user("go"), *[{k: v for k, v in c.items() if k not in ("id", "status")}
                                 for c in calls],
                   {"type": "function_call_output", "call_id": "call_1", "output": "a.txt"},
                   {"type": "function_call_output", "call_id": "call_2",
                    "output": [{"type": "input_text", "text": "ECHO:ping"}]}]
        second = gw.responses("chat_r", codex_body(model.id, history, tools))
    assert second.frames()[-1]["type"] == "response.completed"
    messages = upstream.seen[1].body["messages"]
    assert messages[1] == {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "exec_command", "arguments": '{"cmd":"ls"}'}},
        {"id": "call_2", "type": "function",
         "function": {"name": "mcp__echo__echo", "arguments": '{"text":"ping"}'}}]}
    assert messages[2:] == [{"role": "tool", "tool_call_id": "call_1", "content": "a.txt"},
                            {"role": "tool", "tool_call_id": "call_2", "content": "ECHO:ping"}]


def test_codex_specific_inputs_never_break_strict_upstreams(serve, upstream, monkeypatch):
    monkeypatch.setenv("CHAT_KEY", SECRET)
    route = make_route("chat_r", "openai_chat", upstream.url + "/v1", credential_env="CHAT_KEY")
    model = make_model("chat_r")
    tools = [{"type": "custom", "name": "apply_patch", "description": "Patch files",
              "format": {"type": "grammar", "syntax": "lark", "definition": "start: x"}}]
    patch = "*** Begin Patch\n*** Add File: a\n+x\n*** End Patch"
    upstream.queue(chat_tool_reply([("call_p", "apply_patch", json.dumps({"input": patch}))]))
    items = [
        {"type": "function_call_output", "name": "goal_objective", "namespace": "agent",
         "output": "Ship the feature"},
        user("start"),
        {"type": "function_call", "name": "exec_command", "arguments": "{}", "call_id": "lost"},
        {"type": "reasoning", "summary": [], "encrypted_content": "opaque"},
    ]
    with serve([route], [model]) as gw:
        res = gw.responses("chat_r", codex_body(model.id, items, tools))
    [call] = [f["item"] for f in res.frames() if f["type"] == "response.output_item.done"]
    assert call == {"id": call["id"], "type": "custom_tool_call", "status": "completed",
                    "name": "apply_patch", "input": patch, "call_id": "call_p"}
    body = upstream.seen[0].body
    assert body["messages"][0] == {"role": "user", "content": "[goal_objective] Ship the feature"}
    assert body["messages"][-1] == {"role": "tool", "tool_call_id": "lost",
                                    "content": "(no output recorded)"}
    tool = body["tools"][0]["function"]
    assert tool["name"] == "apply_patch" and tool["parameters"]["required"] == ["input"]
    assert "start: x" in tool["description"]


def test_images_follow_route_modalities(serve, upstream, monkeypatch):
    monkeypatch.setenv("CHAT_KEY", SECRET)
    image = {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo="}
    message = {"type": "message", "role": "user",
               "content": [{"type": "input_text", "text": "look"}, image]}
    seeing = make_route("seeing", "openai_chat", upstream.url, credential_env="CHAT_KEY",
                        transport_modalities=["text", "image"])
    blind = make_route("blind", "openai_chat", upstream.url, credential_env="CHAT_KEY")
    models = [make_model("seeing", modalities=["text", "image"]), make_model("blind")]
    upstream.queue(chat_text_reply("a"), chat_text_reply("b"))
    with serve([seeing, blind], models) as gw:
        gw.responses("seeing", codex_body("seeing__m1", [message]))
        gw.responses("blind", codex_body("blind__m1", [message]))
    assert upstream.seen[0].body["messages"][0]["content"] == [
        {"type": "text", "text": "look"},
        {"type": "image_url", "image_url": {"url": image["image_url"]}}]
    assert upstream.seen[1].body["messages"][0]["content"] == (
        "look\n[image omitted: this route does not accept images]")


def test_openrouter_provider_routing_sent_and_metadata_logged(serve, upstream, monkeypatch):
    from mmo_kernel.config.catalog import ProviderRouting

    monkeypatch.setenv("CHAT_KEY", SECRET)
    route = make_route("router", "openai_chat", upstream.url + "/api/v1", credential_env="CHAT_KEY")
    model = make_model("router", provider_routing=ProviderRouting(only=["deepinfra"],
                                                                  allow_fallbacks=False))
    routing = {"serving_provider_slug": "deepinfra", "serving_endpoint_tag": "deepinfra/fp8",
               "attempt": 1, "retry_count": 0, "fallback_index": 0}
    upstream.queue(chat_text_reply("ok", provider="DeepInfra", routing=routing))
    with serve([route], [model]) as gw:
        gw.responses("router", codex_body(model.id, [user("hi")]))
        [record] = gw.log()
    assert upstream.seen[0].body["provider"] == {"only": ["deepinfra"], "allow_fallbacks": False}
    assert record["provider_metadata"] == {"provider": "DeepInfra", "routing": routing}


def test_env_http_headers_reach_upstream_and_secrets_are_never_logged(serve, upstream,
                                                                       monkeypatch):
    monkeypatch.setenv("CHAT_KEY", SECRET)
    route = make_route("hdr", "openai_chat", upstream.url, credential_env="CHAT_KEY",
                       env_http_headers={"X-Secret": "HDR_SECRET"})
    model = make_model("hdr")
    leak = json.dumps({"error": {"message": f"bad key {SECRET} / {HEADER_SECRET}"}}).encode()
    upstream.queue(chat_text_reply("one"), Reply(500, "application/json", [leak]))
    with serve([route], [model]) as gw:
        ok = gw.responses("hdr", codex_body(model.id, [user("a")]), **{"X-Secret": HEADER_SECRET})
        failed = gw.responses("hdr", codex_body(model.id, [user("b")]),
                              **{"X-Secret": HEADER_SECRET})
        log_text = gw.log_path.read_text()
    assert ok.status == 200 and failed.status == 500
    assert upstream.seen[0].headers["x-secret"] == HEADER_SECRET
    assert SECRET not in log_text and HEADER_SECRET not in log_text
    assert "[redacted]" in log_text


def test_header_value_falls_back_to_credentials_env(serve, upstream, monkeypatch, mmo_env):
    monkeypatch.setenv("CHAT_KEY", SECRET)
    monkeypatch.delenv("HDR_SECRET", raising=False)
    creds = mmo_env.config_dir / "credentials.env"
    creds.write_text(f"HDR_SECRET={HEADER_SECRET}\n")
    creds.chmod(0o600)
    route = make_route("hdr", "openai_chat", upstream.url, credential_env="CHAT_KEY",
                       env_http_headers={"X-Secret": "HDR_SECRET"})
    upstream.queue(chat_text_reply("one"))
    with serve([route], [make_model("hdr")]) as gw:
        assert gw.responses("hdr", codex_body("hdr__m1", [user("a")])).status == 200
    assert upstream.seen[0].headers["x-secret"] == HEADER_SECRET


def test_upstream_errors_map_to_statuses_codex_classifies(serve, upstream, monkeypatch):
    monkeypatch.setenv("CHAT_KEY", SECRET)
    route = make_route("chat_r", "openai_chat", upstream.url, credential_env="CHAT_KEY")
    model = make_model("chat_r")
    cases = [(429, 429, "rate_limit_error"), (401, 401, "authentication_error"),
             (403, 401, "authentication_error"), (422, 400, "invalid_request_error"),
             (503, 503, "server_error")]
    for upstream_status, _, _ in cases:
        upstream.queue(Reply(upstream_status, "application/json",
                             [b'{"error":{"message":"upstream says no"}}']))
    with serve([route], [model]) as gw:
        results = [gw.responses("chat_r", codex_body(model.id, [user("x")])) for _ in cases]
    for (_, expected, kind), res in zip(cases, results, strict=True):
        assert res.status == expected
        assert res.json()["error"]["type"] == kind
        assert res.json()["error"]["message"] == "upstream says no"


def test_mid_stream_upstream_error_becomes_response_failed(serve, upstream, monkeypatch):
    monkeypatch.setenv("CHAT_KEY", SECRET)
    route = make_route("chat_r", "openai_chat", upstream.url, credential_env="CHAT_KEY")
    upstream.queue(Reply(chunks=[
        b'data: {"choices":[{"index":0,"delta":{"content":"par"}}]}\n\n',
        b'data: {"error":{"message":"provider overloaded"}}\n\n']))
    with serve([route], [make_model("chat_r")]) as gw:
        res = gw.responses("chat_r", codex_body("chat_r__m1", [user("x")]))
    last = res.frames()[-1]
    assert last["type"] == "response.failed"
    assert last["response"]["error"] == {"code": "server_error", "message": "provider overloaded"}

"""anthropic_messages translation and openai_responses pass-through."""

from __future__ import annotations

import json

from support.fake_upstream import Reply, sse
from support.gateway_harness import make_model, make_route

KEY = "anthropic-key-0123456789"


def user(text: str) -> dict:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def anthropic_tool_stream() -> Reply:
    events = [
        {"type": "message_start", "message": {"model": "claude-x", "usage": {
            "input_tokens": 30, "cache_read_input_tokens": 4, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "text_delta", "text": "Let me"}},
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "text_delta", "text": " look."}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {
            "type": "tool_use", "id": "toolu_1", "name": "mcp__fs__read", "input": {}}},
        {"type": "content_block_delta", "index": 1, "delta": {
            "type": "input_json_delta", "partial_json": '{"path":'}},
        {"type": "content_block_delta", "index": 1, "delta": {
            "type": "input_json_delta", "partial_json": '"a.txt"}'}},
        {"type": "content_block_stop", "index": 1},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"},
         "usage": {"output_tokens": 9}},
        {"type": "message_stop"},
    ]
    return Reply(chunks=sse(events, named=True))


def test_anthropic_stream_and_request_translation(serve, upstream, monkeypatch):
    monkeypatch.setenv("ANTH_KEY", KEY)
    route = make_route("anth", "anthropic_messages", upstream.url + "/v1",
                       credential_env="ANTH_KEY", transport_modalities=["text", "image"],
                       preserves_tool_media=True,
                       tool_result_modalities=["text", "image"])
    model = make_model("anth", modalities=["text", "image"])
    tools = [{"type": "namespace", "name": "mcp__fs", "tools": [
        {"type": "function", "name": "read", "description": "Read",
         "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}]}]
    upstream.queue(anthropic_tool_stream())
    history = [
        {"type": "message", "role": "developer",
         "content": [{"type": "input_text", "text": "Sys"}]},
        user("first"),
        {"type": "function_call", "name": "read", "namespace": "mcp__fs",
         "arguments": '{"path":"b"}', "call_id": "toolu_0"},
        {"type": "function_call_output", "call_id": "toolu_0", "output": [
            {"type": "input_text", "text": "content"},
            {"type": "input_image", "image_url": "data:image/png;base64,AAAA"}]},
    ]
    with serve([route], [model]) as gw:
        res = gw.responses("anth", {"model": model.id, "input": history, "tools": tools,
                                    "parallel_tool_calls": True, "stream": True})
        [record] = gw.log()
    frames = res.frames()
    assert [f["type"] for f in frames] == [
        "response.created", "response.in_progress", "response.output_item.added",
        "response.content_part.added", "response.output_text.delta",
        "response.output_text.delta", "response.output_text.done", "response.content_part.done",
        "response.output_item.done", "response.output_item.added",
        "response.function_call_arguments.delta", "response.function_call_arguments.done",
        "response.output_item.done", "response.completed"]
    call = frames[12]["item"]
    assert (call["name"], call["namespace"], call["arguments"], call["call_id"]) == (
        "read", "mcp__fs", '{"path":"a.txt"}', "toolu_1")
    assert frames[-1]["response"]["usage"]["input_tokens"] == 34
    assert frames[-1]["response"]["usage"]["input_tokens_details"]["cached_tokens"] == 4
    assert frames[-1]["response"]["usage"]["output_tokens"] == 9
    sent = upstream.seen[0]
    assert sent.path == "/v1/messages"
    assert sent.headers["x-api-key"] == KEY and sent.headers["anthropic-version"] == "2023-06-01"
    body = sent.body
    assert body["system"] == "Sys" and body["max_tokens"] == 8192 and body["stream"] is True
    assert body["tools"] == [{"name": "mcp__fs__read", "description": "Read", "input_schema":
                              tools[0]["tools"][0]["parameters"]}]
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "first"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_0",
                                           "name": "mcp__fs__read", "input": {"path": "b"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_0", "content": [
            {"type": "text", "text": "content"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": "AAAA"}}]}]}]
    assert record["finish_reason"] == "tool_use" and record["upstream_model"] == "claude-x"


def test_anthropic_error_event_and_truncated_stream_fail_the_response(serve, upstream, monkeypatch):
    monkeypatch.setenv("ANTH_KEY", KEY)
    route = make_route("anth", "anthropic_messages", upstream.url, credential_env="ANTH_KEY")
    upstream.queue(
        Reply(chunks=sse([{"type": "message_start", "message": {"usage": {"input_tokens": 1}}},
                          {"type": "error", "error": {"type": "overloaded_error",
                                                     "message": "Overloaded"}}], named=True)),
        Reply(chunks=sse([{"type": "message_start", "message": {"usage": {"input_tokens": 1}}}],
                         named=True)))
    with serve([route], [make_model("anth")]) as gw:
        overloaded = gw.responses("anth", {"model": "anth__m1", "input": [user("x")],
                                           "stream": True})
        truncated = gw.responses("anth", {"model": "anth__m1", "input": [user("x")],
                                          "stream": True})
    assert overloaded.frames()[-1]["response"]["error"] == {"code": "server_error",
                                                            "message": "Overloaded"}
    assert "before message_stop" in truncated.frames()[-1]["response"]["error"]["message"]


def test_responses_pass_through_keeps_bytes_and_rewrites_model(serve, upstream, monkeypatch):
    monkeypatch.setenv("OAI_KEY", "sk-oai-0123456789")
    route = make_route("oai", "openai_responses", upstream.url + "/v1", credential_env="OAI_KEY")
    model = make_model("oai")
    events = [{"type": "response.created", "response": {"id": "r1"}},
              {"type": "response.output_text.delta", "delta": "hey"},
              {"type": "response.completed", "response": {"id": "r1", "model": "gpt-up", "usage": {
                  "input_tokens": 3, "output_tokens": 2, "total_tokens": 5}}}]
    chunks = sse(events, named=True)
    upstream.queue(Reply(chunks=chunks))
    body = {"model": model.id, "input": [user("hi")], "stream": True, "store": False,
            "include": ["reasoning.encrypted_content"], "prompt_cache_key": "t1"}
    with serve([route], [model]) as gw:
        res = gw.responses("oai", body)
        [record] = gw.log()
    assert res.body == b"".join(chunks)
    sent = upstream.seen[0]
    assert sent.path == "/v1/responses"
    assert sent.headers["authorization"] == "Bearer sk-oai-0123456789"
    assert sent.body == {**body, "model": "upstream-m1"}
    assert record["usage"]["total_tokens"] == 5 and record["upstream_model"] == "gpt-up"


def test_json_non_streaming_chat_answer_is_still_streamed_to_codex(serve, upstream, monkeypatch):
    monkeypatch.setenv("CHAT_KEY", "sk-0123456789")
    route = make_route("chat_r", "openai_chat", upstream.url, credential_env="CHAT_KEY")
    upstream.queue(Reply(200, "application/json", [json.dumps({
        "choices": [{"message": {"content": "whole"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 2, "completion_tokens": 1}}).encode()]))
    with serve([route], [make_model("chat_r")]) as gw:
        res = gw.responses("chat_r", {"model": "chat_r__m1", "input": [user("x")],
                                      "stream": True})
    frames = res.frames()
    assert frames[-2]["item"]["content"][0]["text"] == "whole"
    assert frames[-1]["response"]["usage"]["total_tokens"] == 3

"""openai_chat reasoning: streamed reasoning deltas become Responses reasoning items and go back."""

from __future__ import annotations

import base64
import json

from support.fake_upstream import Reply, chat_reasoning_reply, chat_text_reply, chat_tool_reply, sse
from support.gateway_harness import make_model, make_route

KEY = "sk-chat-reasoning-0123456789"


def user(text: str) -> dict:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def body(model_id: str, items: list, **extra) -> dict:
    return {"model": model_id, "stream": True, "input": items, "tools": [], "store": False,
            "include": ["reasoning.encrypted_content"], **extra}


def token(encrypted: str) -> dict:
    """The documented replay token format: base64 of compact JSON."""
    return json.loads(base64.b64decode(encrypted))


def echoed(item: dict) -> dict:
    """A reasoning item as Codex sends it back in ``input`` (seen from Codex 0.169)."""
    return {"type": "reasoning", "id": item["id"], "summary": item["summary"], "content": None,
            "encrypted_content": item["encrypted_content"]}


def chat_route(upstream, monkeypatch, route_id: str = "chat_r"):
    monkeypatch.setenv("CHAT_KEY", KEY)
    return make_route(route_id, "openai_chat", upstream.url + "/v1", credential_env="CHAT_KEY")


def test_reasoning_content_streams_as_a_reasoning_item_before_the_message(serve, upstream,
                                                                         monkeypatch):
    route = chat_route(upstream, monkeypatch)
    model = make_model("chat_r")
    chunks = [{"choices": [{"index": 0, "delta": {"role": "assistant", "content": None,
                                                  "reasoning_content": part}}]}
              for part in ("Let me ", "think.")]
    chunks += [{"choices": [{"index": 0, "delta": {"content": part, "reasoning_content": None}}]}
               for part in ("Hello", " world")]
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                   "usage": {"prompt_tokens": 12, "completion_tokens": 30,
                             "completion_tokens_details": {"reasoning_tokens": 21}}})
    upstream.queue(Reply(chunks=sse(chunks) + [b"data: [DONE]\n\n"]))
    with serve([route], [model]) as gw:
        frames = gw.responses("chat_r", body(model.id, [user("hi")])).frames()
        [record] = gw.log()
    assert [(f["type"], f.get("output_index")) for f in frames] == [
        ("response.created", None),
        ("response.in_progress", None),
        ("response.output_item.added", 0),
        ("response.reasoning_summary_part.added", 0),
        ("response.reasoning_summary_text.delta", 0),
        ("response.reasoning_summary_text.delta", 0),
        ("response.reasoning_summary_text.done", 0),
        ("response.reasoning_summary_part.done", 0),
        ("response.output_item.done", 0),
        ("response.output_item.added", 1),
        ("response.content_part.added", 1),
        ("response.output_text.delta", 1),
        ("response.output_text.delta", 1),
        ("response.output_text.done", 1),
        ("response.content_part.done", 1),
        ("response.output_item.done", 1),
        ("response.completed", None)]
    assert [f["sequence_number"] for f in frames] == list(range(len(frames)))
    rs_id = frames[2]["item"]["id"]
    assert rs_id.startswith("rs_")
    assert frames[2]["item"] == {"id": rs_id, "type": "reasoning", "summary": []}
    where = {"item_id": rs_id, "output_index": 0, "summary_index": 0}
    assert frames[3] == {"type": "response.reasoning_summary_part.added", "sequence_number": 3,
                         **where, "part": {"type": "summary_text", "text": ""}}
    assert [f["delta"] for f in frames[4:6]] == ["Let me ", "think."]
    assert all(f.items() >= where.items() for f in frames[4:8])
    assert frames[6]["text"] == "Let me think."
    assert frames[7]["part"] == {"type": "summary_text", "text": "Let me think."}
    item = frames[8]["item"]
    assert item == {"id": rs_id, "type": "reasoning",
                    "summary": [{"type": "summary_text", "text": "Let me think."}],
                    "encrypted_content": item["encrypted_content"]}
    assert token(item["encrypted_content"]) == {
        "v": 1, "route": "chat_r", "wire": "chat", "field": "reasoning_content",
        "text": "Let me think.", "details": []}
    assert frames[15]["item"]["content"][0]["text"] == "Hello world"
    completed = frames[-1]["response"]
    assert [i["type"] for i in completed["output"]] == ["reasoning", "message"]
    assert completed["output"][0] == item
    assert completed["usage"]["output_tokens_details"] == {"reasoning_tokens": 21}
    assert completed["usage"]["total_tokens"] == 42
    assert record["usage"]["output_tokens_details"] == {"reasoning_tokens": 21}


def test_reasoning_content_goes_back_on_the_tool_loop(serve, upstream, monkeypatch):
    """DeepSeek's thinking mode rejects a tool loop whose reasoning_content is missing."""
    route = chat_route(upstream, monkeypatch)
    model = make_model("chat_r")
    tools = [{"type": "function", "name": "exec_command", "parameters": {"type": "object"}}]
    upstream.queue(chat_reasoning_reply(["Need ", "ls."],
                                        chat_tool_reply([("call_1", "exec_command", "{}")])),
                   chat_text_reply("two files"))
    with serve([route], [model]) as gw:
        first = gw.responses("chat_r", body(model.id, [user("list")], tools=tools)).frames()
        reasoning, call = [f["item"] for f in first if f["type"] == "response.output_item.done"]
        assert (reasoning["type"], call["type"]) == ("reasoning", "function_call")
        history = [user("list"), echoed(reasoning),
                   {k: v for k, v in call.items() if k != "status"},
                   {"type": "function_call_output", "call_id": "call_1", "output": "a b"}]
        second = gw.responses("chat_r", body(model.id, history, tools=tools))
    assert second.frames()[-1]["type"] == "response.completed"
    assert upstream.seen[1].body["messages"] == [
        {"role": "user", "content": "list"},
        {"role": "assistant", "content": None, "reasoning_content": "Need ls.", "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "exec_command", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "a b"}]


def test_openrouter_reasoning_and_details_round_trip(serve, upstream, monkeypatch):
    route = chat_route(upstream, monkeypatch, "router")
    model = make_model("router")
    fragments = [
        {"reasoning": "Plan", "reasoning_details": [
            {"type": "reasoning.text", "text": "Plan", "format": "anthropic-claude-v1",
             "index": 0}]},
        {"reasoning": " it.", "reasoning_details": [
            {"type": "reasoning.text", "text": " it.", "format": "anthropic-claude-v1",
             "index": 0}]},
        {"reasoning": None, "reasoning_details": [
            {"type": "reasoning.text", "signature": "sig-or", "format": "anthropic-claude-v1",
             "index": 0}]},
    ]
    chunks = [{"choices": [{"index": 0, "delta": {"role": "assistant", "content": "", **f}}]}
              for f in fragments]
    upstream.queue(Reply(chunks=sse(chunks) + chat_text_reply("Done.").chunks),
                   chat_text_reply("again"))
    with serve([route], [model]) as gw:
        frames = gw.responses("router", body(model.id, [user("go")])).frames()
        items = [f["item"] for f in frames if f["type"] == "response.output_item.done"]
        gw.responses("router", body(model.id, [user("go"), echoed(items[0]),
                                                {"type": "message", "role": "assistant",
                                                 "content": [{"type": "output_text",
                                                              "text": "Done."}]},
                                                user("more")]))
    assert [i["type"] for i in items] == ["reasoning", "message"]
    assert items[0]["summary"] == [{"type": "summary_text", "text": "Plan it."}]
    details = [{"type": "reasoning.text", "text": "Plan it.", "format": "anthropic-claude-v1",
                "index": 0, "signature": "sig-or"}]
    assert token(items[0]["encrypted_content"]) == {
        "v": 1, "route": "router", "wire": "chat", "field": "reasoning", "text": "Plan it.",
        "details": details}
    assert upstream.seen[1].body["messages"][1] == {
        "role": "assistant", "content": "Done.", "reasoning_details": details}


def test_reasoning_field_without_details_goes_back_in_that_field(serve, upstream, monkeypatch):
    route = chat_route(upstream, monkeypatch, "router")
    model = make_model("router")
    upstream.queue(chat_reasoning_reply(["Short."], chat_text_reply("ok"), field="reasoning"),
                   chat_text_reply("again"))
    with serve([route], [model]) as gw:
        frames = gw.responses("router", body(model.id, [user("go")])).frames()
        [reasoning, message] = [f["item"] for f in frames
                                if f["type"] == "response.output_item.done"]
        gw.responses("router", body(model.id, [
            user("go"), echoed(reasoning),
            {"type": "message", "role": "assistant",
             "content": [{"type": "output_text", "text": "ok"}]}, user("more")]))
    assert reasoning["summary"][0]["text"] == "Short." and message["type"] == "message"
    assert upstream.seen[1].body["messages"][1] == {"role": "assistant", "content": "ok",
                                                    "reasoning": "Short."}


def test_reasoning_after_text_opens_a_new_item_in_order(serve, upstream, monkeypatch):
    route = chat_route(upstream, monkeypatch)
    model = make_model("chat_r")
    deltas = [{"reasoning_content": "a"}, {"content": "one"}, {"reasoning_content": "b"},
              {"content": "two"}]
    chunks = [{"choices": [{"index": 0, "delta": d}]} for d in deltas]
    upstream.queue(Reply(chunks=sse(chunks) + [b"data: [DONE]\n\n"]))
    with serve([route], [model]) as gw:
        frames = gw.responses("chat_r", body(model.id, [user("x")])).frames()
    done = [(f["output_index"], f["item"]["type"]) for f in frames
            if f["type"] == "response.output_item.done"]
    assert done == [(0, "reasoning"), (1, "message"), (2, "reasoning"), (3, "message")]
    added = [f["output_index"] for f in frames if f["type"] == "response.output_item.added"]
    assert added == [0, 1, 2, 3]
    output = frames[-1]["response"]["output"]
    assert [token(i["encrypted_content"])["text"] for i in output if i["type"] == "reasoning"] == [
        "a", "b"]
    assert [f["sequence_number"] for f in frames] == list(range(len(frames)))


def test_non_streamed_json_answer_carries_message_reasoning(serve, upstream, monkeypatch):
    route = chat_route(upstream, monkeypatch)
    upstream.queue(Reply(200, "application/json", [json.dumps({
        "choices": [{"message": {"role": "assistant", "content": "whole",
                                 "reasoning_content": "because"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 2, "completion_tokens": 5,
                  "completion_tokens_details": {"reasoning_tokens": 3}}}).encode()]))
    with serve([route], [make_model("chat_r")]) as gw:
        frames = gw.responses("chat_r", body("chat_r__m1", [user("x")])).frames()
    output = frames[-1]["response"]["output"]
    assert [i["type"] for i in output] == ["reasoning", "message"]
    assert output[0]["summary"] == [{"type": "summary_text", "text": "because"}]
    assert frames[-1]["response"]["usage"]["output_tokens_details"]["reasoning_tokens"] == 3


def test_foreign_or_garbage_reasoning_items_are_dropped(serve, upstream, monkeypatch):
    route = chat_route(upstream, monkeypatch)
    model = make_model("chat_r")
    other_route = base64.b64encode(json.dumps({
        "v": 1, "route": "elsewhere", "wire": "chat", "field": "reasoning_content",
        "text": "foreign", "details": []}).encode()).decode()
    wrong_version = base64.b64encode(json.dumps({
        "v": 2, "route": "chat_r", "wire": "chat", "field": "reasoning_content",
        "text": "future", "details": []}).encode()).decode()
    garbage = ["opaque", "%%%not-base64%%%", base64.b64encode(b"\xff\xfe").decode(),
               base64.b64encode(b"[1, 2]").decode(), other_route, wrong_version]
    items = [user("x")]
    for raw in garbage:
        items += [{"type": "reasoning", "summary": [], "encrypted_content": raw},
                  {"type": "message", "role": "assistant",
                   "content": [{"type": "output_text", "text": "t"}]}]
    items += [{"type": "reasoning", "summary": [{"type": "summary_text", "text": "s"}]},
              user("y")]
    upstream.queue(chat_text_reply("fine"))
    with serve([route], [model]) as gw:
        res = gw.responses("chat_r", body(model.id, items))
    assert res.status == 200 and res.frames()[-1]["type"] == "response.completed"
    messages = upstream.seen[0].body["messages"]
    assert messages[1:] == [{"role": "assistant", "content": "t"}] * len(garbage) + [
        {"role": "user", "content": "y"}]

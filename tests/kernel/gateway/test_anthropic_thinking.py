"""anthropic_messages extended thinking: requested by effort, streamed as reasoning, replayed."""

from __future__ import annotations

import base64
import json

from support.fake_upstream import Reply, sse
from support.gateway_harness import make_model, make_route

KEY = "anthropic-key-thinking-0123456789"
LEVELS = ["minimal", "low", "medium", "high", "xhigh", "max"]
TOOLS = [{"type": "function", "name": "read", "description": "Read",
          "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}]


def user(text: str) -> dict:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def body(model_id: str, items: list, effort: str | None = "high", **extra) -> dict:
    reasoning = {"effort": effort, "summary": "auto"} if effort else {"summary": "auto"}
    return {"model": model_id, "stream": True, "input": items, "tools": TOOLS, "store": False,
            "parallel_tool_calls": True, "reasoning": reasoning,
            "include": ["reasoning.encrypted_content"], **extra}


def token(encrypted: str) -> dict:
    return json.loads(base64.b64decode(encrypted))


def make_token(doc: dict) -> str:
    return base64.b64encode(json.dumps(doc).encode()).decode()


def echoed(item: dict) -> dict:
    """A reasoning item as Codex sends it back in ``input`` (seen from Codex 0.169)."""
    return {"type": "reasoning", "id": item["id"], "summary": item["summary"], "content": None,
            "encrypted_content": item["encrypted_content"]}


def stream(*blocks: list[dict], stop: str = "end_turn") -> Reply:
    """A Messages stream: ``message_start``, each block's events (indexed), the end."""
    events: list[dict] = [{"type": "message_start", "message": {
        "model": "claude-t", "usage": {"input_tokens": 40, "output_tokens": 1}}}]
    for index, block_events in enumerate(blocks):
        events += [dict(e, index=index) for e in block_events]
    events += [{"type": "message_delta", "delta": {"stop_reason": stop},
                "usage": {"output_tokens": 90}}, {"type": "message_stop"}]
    return Reply(chunks=sse(events, named=True))


def thinking(parts: list[str], signature: str | None) -> list[dict]:
    events = [{"type": "content_block_start",
               "content_block": {"type": "thinking", "thinking": "", "signature": ""}}]
    events += [{"type": "content_block_delta", "delta": {"type": "thinking_delta", "thinking": p}}
               for p in parts]
    if signature is not None:
        events.append({"type": "content_block_delta",
                       "delta": {"type": "signature_delta", "signature": signature}})
    return events + [{"type": "content_block_stop"}]


def redacted(data: str) -> list[dict]:
    return [{"type": "content_block_start",
             "content_block": {"type": "redacted_thinking", "data": data}},
            {"type": "content_block_stop"}]


def text(value: str) -> list[dict]:
    return [{"type": "content_block_start", "content_block": {"type": "text", "text": ""}},
            {"type": "content_block_delta", "delta": {"type": "text_delta", "text": value}},
            {"type": "content_block_stop"}]


def tool_use(tool_id: str, name: str, arguments: str) -> list[dict]:
    return [{"type": "content_block_start",
             "content_block": {"type": "tool_use", "id": tool_id, "name": name, "input": {}}},
            {"type": "content_block_delta",
             "delta": {"type": "input_json_delta", "partial_json": arguments}},
            {"type": "content_block_stop"}]


def anthropic_route(upstream, monkeypatch, route_id: str = "anth"):
    monkeypatch.setenv("ANTH_KEY", KEY)
    return make_route(route_id, "anthropic_messages", upstream.url + "/v1",
                      credential_env="ANTH_KEY")


def done_items(frames: list[dict]) -> list[dict]:
    return [f["item"] for f in frames if f["type"] == "response.output_item.done"]


def test_thinking_streams_as_reasoning_and_its_signature_survives_the_tool_loop(
        serve, upstream, monkeypatch):
    route = anthropic_route(upstream, monkeypatch)
    model = make_model("anth", reasoning_levels=["low", "high"], default_reasoning="high")
    upstream.queue(
        stream(thinking(["I should ", "read a.txt."], "sig-1"), text("Let me look."),
               tool_use("toolu_1", "read", '{"path":"a.txt"}'), stop="tool_use"),
        stream(text("It says hi.")))
    with serve([route], [model]) as gw:
        frames = gw.responses("anth", body(model.id, [user("read a")])).frames()
        reasoning, message, call = done_items(frames)
        history = [user("read a"), echoed(reasoning),
                   {"type": "message", "role": "assistant",
                    "content": [{"type": "output_text", "text": "Let me look."}]},
                   {k: v for k, v in call.items() if k != "status"},
                   {"type": "function_call_output", "call_id": "toolu_1", "output": "hi"}]
        second = gw.responses("anth", body(model.id, history)).frames()
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
        ("response.output_text.done", 1),
        ("response.content_part.done", 1),
        ("response.output_item.done", 1),
        ("response.output_item.added", 2),
        ("response.function_call_arguments.delta", 2),
        ("response.function_call_arguments.done", 2),
        ("response.output_item.done", 2),
        ("response.completed", None)]
    assert [f["sequence_number"] for f in frames] == list(range(len(frames)))
    rs_id = frames[2]["item"]["id"]
    assert frames[2]["item"] == {"id": rs_id, "type": "reasoning", "summary": []}
    assert [f["delta"] for f in frames[4:6]] == ["I should ", "read a.txt."]
    assert all(f["item_id"] == rs_id and f["summary_index"] == 0 for f in frames[3:8])
    assert frames[6]["text"] == "I should read a.txt."
    assert reasoning == {"id": rs_id, "type": "reasoning",
                         "summary": [{"type": "summary_text", "text": "I should read a.txt."}],
                         "encrypted_content": reasoning["encrypted_content"]}
    assert token(reasoning["encrypted_content"]) == {
        "v": 1, "route": "anth", "wire": "anthropic",
        "block": {"type": "thinking", "thinking": "I should read a.txt.", "signature": "sig-1"}}
    assert (message["type"], call["type"], call["call_id"]) == ("message", "function_call",
                                                                "toolu_1")
    usage = frames[-1]["response"]["usage"]
    assert (usage["output_tokens"], usage["output_tokens_details"]) == (90,
                                                                         {"reasoning_tokens": 0})
    assert frames[-1]["response"]["output"] == [reasoning, message, call]
    assert second[-1]["type"] == "response.completed"
    first_sent, second_sent = (seen.body for seen in upstream.seen)
    assert first_sent["thinking"] == {"type": "enabled", "budget_tokens": 16384}
    assert first_sent["max_tokens"] == 8192 + 16384 and "temperature" not in first_sent
    assert second_sent["thinking"] == {"type": "enabled", "budget_tokens": 16384}
    assert second_sent["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "read a"}]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "I should read a.txt.", "signature": "sig-1"},
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "a.txt"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                      "content": [{"type": "text", "text": "hi"}]}]}]


def test_redacted_thinking_round_trips_before_the_thinking_that_followed_it(
        serve, upstream, monkeypatch):
    route = anthropic_route(upstream, monkeypatch)
    model = make_model("anth", reasoning_levels=["medium"], default_reasoning="medium")
    upstream.queue(stream(redacted("ENCRYPTED-BY-ANTHROPIC"), thinking(["More."], "sig-2"),
                          tool_use("toolu_9", "read", '{"path":"b"}'), stop="tool_use"),
                   stream(text("ok")))
    with serve([route], [model]) as gw:
        frames = gw.responses("anth", body(model.id, [user("go")], effort="medium")).frames()
        hidden, shown, call = done_items(frames)
        history = [user("go"), echoed(hidden), echoed(shown),
                   {k: v for k, v in call.items() if k != "status"},
                   {"type": "function_call_output", "call_id": "toolu_9", "output": "B"}]
        gw.responses("anth", body(model.id, history, effort="medium"))
    assert [(f["type"], f.get("output_index")) for f in frames[:4]] == [
        ("response.created", None), ("response.in_progress", None),
        ("response.output_item.added", 0), ("response.output_item.done", 0)]
    assert frames[2]["item"] == {"id": hidden["id"], "type": "reasoning", "summary": []}
    assert hidden == {"id": hidden["id"], "type": "reasoning", "summary": [],
                      "encrypted_content": hidden["encrypted_content"]}
    assert token(hidden["encrypted_content"])["block"] == {
        "type": "redacted_thinking", "data": "ENCRYPTED-BY-ANTHROPIC"}
    assert shown["summary"] == [{"type": "summary_text", "text": "More."}]
    assert [f["output_index"] for f in frames if f["type"] == "response.output_item.done"] == [
        0, 1, 2]
    assert upstream.seen[0].body["thinking"] == {"type": "enabled", "budget_tokens": 8192}
    assert upstream.seen[1].body["messages"][1]["content"] == [
        {"type": "redacted_thinking", "data": "ENCRYPTED-BY-ANTHROPIC"},
        {"type": "thinking", "thinking": "More.", "signature": "sig-2"},
        {"type": "tool_use", "id": "toolu_9", "name": "read", "input": {"path": "b"}}]


def test_effort_maps_to_a_thinking_budget_only_for_reasoning_models(serve, upstream,
                                                                    monkeypatch):
    route = anthropic_route(upstream, monkeypatch)
    thinker = make_model("anth", "thinker", reasoning_levels=LEVELS, default_reasoning="medium")
    some = make_model("anth", "some", reasoning_levels=["high"], default_reasoning="high")
    plain = make_model("anth", "plain")
    cases = [(thinker, level, None) for level in LEVELS] + [
        (thinker, None, None), (thinker, "high", 1000), (plain, "high", None),
        (some, "low", None)]
    upstream.queue(*[stream(text("ok")) for _ in cases])
    with serve([route], [thinker, some, plain]) as gw:
        for model, effort, cap in cases:
            extra = {"max_output_tokens": cap} if cap else {}
            res = gw.responses("anth", body(model.id, [user("x")], effort=effort, **extra))
            assert res.frames()[-1]["type"] == "response.completed"
    sent = [(s.body.get("thinking"), s.body["max_tokens"], "temperature" in s.body)
            for s in upstream.seen]
    budgets = [1024, 4096, 8192, 16384, 32768, 49152]
    assert sent == [({"type": "enabled", "budget_tokens": b}, 8192 + b, False) for b in budgets] + [
        (None, 8192, False), ({"type": "enabled", "budget_tokens": 16384}, 1000 + 16384, False),
        (None, 8192, False), (None, 8192, False)]


def test_unusable_encrypted_content_is_dropped_and_the_loop_goes_without_thinking(
        serve, upstream, monkeypatch):
    route = anthropic_route(upstream, monkeypatch)
    model = make_model("anth", reasoning_levels=["high"], default_reasoning="high")
    block = {"type": "thinking", "thinking": "t", "signature": "s"}
    unusable = [
        "not base64 at all!", base64.b64encode(b"{not json").decode(),
        make_token({"v": 1, "route": "other", "wire": "anthropic", "block": block}),
        make_token({"v": 1, "route": "anth", "wire": "chat", "field": "reasoning",
                    "text": "t", "details": []}),
        make_token({"v": 1, "route": "anth", "wire": "anthropic",
                    "block": {"type": "thinking", "thinking": "t"}}),
        make_token({"v": 1, "route": "anth", "wire": "anthropic",
                    "block": {"type": "tool_use", "id": "x"}}),
        make_token({"v": 1, "route": "anth", "wire": "anthropic", "block": block, "x": 1}),
    ]
    history = [user("go")] + [{"type": "reasoning", "summary": [], "encrypted_content": raw}
                              for raw in unusable] + [
        {"type": "function_call", "name": "read", "arguments": "{}", "call_id": "toolu_1"},
        {"type": "function_call_output", "call_id": "toolu_1", "output": "r"}]
    upstream.queue(stream(text("fine")), stream(text("fine")))
    with serve([route], [model]) as gw:
        looping = gw.responses("anth", body(model.id, history))
        answered = {"type": "message", "role": "assistant",
                    "content": [{"type": "output_text", "text": "done"}]}
        fresh = gw.responses("anth", body(model.id, [*history, answered, user("next")]))
    assert looping.status == 200 and looping.frames()[-1]["type"] == "response.completed"
    assert fresh.status == 200
    first, second = (s.body for s in upstream.seen)
    assert first["messages"][1] == {"role": "assistant", "content": [
        {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {}}]}
    assert "thinking" not in first and first["max_tokens"] == 8192
    assert second["thinking"] == {"type": "enabled", "budget_tokens": 16384}


def test_thinking_without_signature_gets_no_replay_token(serve, upstream, monkeypatch):
    route = anthropic_route(upstream, monkeypatch)
    upstream.queue(stream(thinking(["unsigned"], None), text("answer")))
    with serve([route], [make_model("anth")]) as gw:
        frames = gw.responses("anth", body("anth__m1", [user("x")], effort=None)).frames()
    reasoning, message = done_items(frames)
    assert reasoning == {"id": reasoning["id"], "type": "reasoning",
                         "summary": [{"type": "summary_text", "text": "unsigned"}]}
    assert message["content"][0]["text"] == "answer"


def test_non_streamed_message_with_thinking_is_replayed_as_reasoning(serve, upstream,
                                                                     monkeypatch):
    route = anthropic_route(upstream, monkeypatch)
    message = {"model": "claude-t", "stop_reason": "end_turn",
               "usage": {"input_tokens": 3, "output_tokens": 20},
               "content": [{"type": "thinking", "thinking": "hmm", "signature": "sig-j"},
                           {"type": "redacted_thinking", "data": "R"},
                           {"type": "text", "text": "whole"}]}
    upstream.queue(Reply(200, "application/json", [json.dumps(message).encode()]))
    with serve([route], [make_model("anth")]) as gw:
        frames = gw.responses("anth", body("anth__m1", [user("x")], effort=None)).frames()
    shown, hidden, text_item = frames[-1]["response"]["output"]
    assert token(shown["encrypted_content"])["block"] == message["content"][0]
    assert shown["summary"] == [{"type": "summary_text", "text": "hmm"}]
    assert token(hidden["encrypted_content"])["block"] == message["content"][1]
    assert text_item["content"][0]["text"] == "whole"
    assert frames[-1]["type"] == "response.completed"


def test_thinking_stays_on_while_the_turn_it_started_loops_through_tools(serve, upstream,
                                                                        monkeypatch):
    """Without interleaved thinking Claude thinks once per turn: later steps have none."""
    route = anthropic_route(upstream, monkeypatch)
    model = make_model("anth", reasoning_levels=["low"], default_reasoning="low")
    signed = make_token({"v": 1, "route": "anth", "wire": "anthropic", "block": {
        "type": "thinking", "thinking": "plan", "signature": "sig-p"}})
    loop = [user("go"), {"type": "reasoning", "summary": [], "encrypted_content": signed},
            {"type": "function_call", "name": "read", "arguments": "{}", "call_id": "toolu_1"},
            {"type": "function_call_output", "call_id": "toolu_1", "output": "one"},
            {"type": "function_call", "name": "read", "arguments": "{}", "call_id": "toolu_2"},
            {"type": "function_call_output", "call_id": "toolu_2", "output": "two"}]
    upstream.queue(stream(text("done")))
    with serve([route], [model]) as gw:
        assert gw.responses("anth", body(model.id, loop, effort="low")).status == 200
    sent = upstream.seen[0].body
    assert sent["thinking"] == {"type": "enabled", "budget_tokens": 4096}
    assert [[b["type"] for b in m["content"]] for m in sent["messages"]] == [
        ["text"], ["thinking", "tool_use"], ["tool_result"], ["tool_use"], ["tool_result"]]

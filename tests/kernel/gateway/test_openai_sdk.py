"""The official ``openai`` SDK as a client of the real gateway process (spec 08).

Each test talks to the shared gateway that ``ensure_gateway`` starts, through a
catalog fragment whose routes reach a fake upstream on loopback, with the SDK's
own calls: ``responses.create`` (streamed or not) and the ``responses.stream``
helper, which checks the event stream strictly (content parts before text,
one response identity, argument deltas).
"""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest
from support.fake_upstream import Reply, chat_text_reply, chat_tool_reply, sse

SCRIPTED_MODEL = "local_scripted__scripted"
TOOL = {"type": "function", "name": "lookup", "description": "Look a word up.",
        "parameters": {"type": "object", "properties": {"word": {"type": "string"}},
                       "required": ["word"], "additionalProperties": False}}


def user_input(text: str) -> list[dict[str, Any]]:
    return [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}]


def anthropic_reply(text: str, call: tuple[str, str, str] | None = None) -> Reply:
    """A streamed Messages answer: ``text``, then a ``tool_use`` block when ``call`` is given."""
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {"model": "claude-up", "usage": {
            "input_tokens": 12, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "text_delta", "text": text[:3]}},
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "text_delta", "text": text[3:]}},
        {"type": "content_block_stop", "index": 0}]
    if call is not None:
        call_id, name, arguments = call
        events += [
            {"type": "content_block_start", "index": 1, "content_block": {
                "type": "tool_use", "id": call_id, "name": name, "input": {}}},
            {"type": "content_block_delta", "index": 1,
             "delta": {"type": "input_json_delta", "partial_json": arguments}},
            {"type": "content_block_stop", "index": 1}]
    events += [{"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                "usage": {"output_tokens": 6}},
               {"type": "message_stop"}]
    return Reply(chunks=sse(events, named=True))


def responses_reply(text: str) -> Reply:
    """A Responses upstream streaming one message, as the OpenAI API does."""
    item = {"id": "msg_up", "type": "message", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}
    base = {"id": "resp_up", "object": "response", "created_at": 1, "model": "upstream-m1",
            "tools": [], "tool_choice": "auto", "parallel_tool_calls": True}
    part = {"type": "output_text", "text": "", "annotations": []}
    events = [
        {"type": "response.created", "response": {**base, "status": "in_progress", "output": []}},
        {"type": "response.output_item.added", "output_index": 0,
         "item": {**item, "status": "in_progress", "content": []}},
        {"type": "response.content_part.added", "item_id": "msg_up", "output_index": 0,
         "content_index": 0, "part": part},
        {"type": "response.output_text.delta", "item_id": "msg_up", "output_index": 0,
         "content_index": 0, "delta": text, "logprobs": []},
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        {"type": "response.completed", "response": {
            **base, "status": "completed", "output": [item],
            "usage": {"input_tokens": 11, "output_tokens": 7, "total_tokens": 18}}}]
    events = [{**event, "sequence_number": n} for n, event in enumerate(events)]
    return Reply(chunks=sse(events, named=True))


def chat_text_then_call(text: str, call: tuple[str, str, str]) -> Reply:
    """A streamed chat completion: reasoning, ``text`` in two deltas, then one tool call."""
    call_id, name, arguments = call
    chunks: list[dict[str, Any]] = [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "content": None,
                                            "reasoning_content": "Thinking it over."}}]},
        {"choices": [{"index": 0, "delta": {"content": text[:4]}}]},
        {"choices": [{"index": 0, "delta": {"content": text[4:]}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [{
            "index": 0, "id": call_id, "type": "function",
            "function": {"name": name, "arguments": arguments[:5]}}]}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [{
            "index": 0, "function": {"arguments": arguments[5:]}}]}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}],
         "usage": {"prompt_tokens": 20, "completion_tokens": 9}}]
    return Reply(chunks=sse(chunks) + [b"data: [DONE]\n\n"])


# ------------------------------------------------------ stream: false (item 4) --

NON_STREAMED = {
    "openai_chat": ("sdk_chat", lambda: chat_text_reply("Hello there"), "Hello there", 18),
    "anthropic_messages": ("sdk_anthropic", lambda: anthropic_reply("Hello there"),
                           "Hello there", 18),
    "openai_responses": ("sdk_responses", lambda: responses_reply("Hello there"),
                         "Hello there", 18),
}


@pytest.mark.parametrize("wire", sorted(NON_STREAMED))
def test_a_non_streamed_call_is_answered_with_a_response_object(gateway_process, upstream, wire):
    route, reply, text, total = NON_STREAMED[wire]
    upstream.queue(reply())
    raw = gateway_process.openai(route).responses.with_raw_response.create(
        model=f"{route}__m1", input="Say hello")
    response = raw.parse()
    assert raw.headers["content-type"] == "application/json"
    assert response.object == "response" and response.status == "completed"
    assert response.output_text == text
    assert response.usage is not None and response.usage.total_tokens == total
    assert upstream.seen[0].body["stream"] is True  # the upstream hop still streams
    [record] = gateway_process.log()
    assert record["status"] == 200 and record["usage"]["total_tokens"] == total


def test_a_non_streamed_call_of_the_scripted_model_and_a_tool_call(gateway_process, upstream):
    scripted = gateway_process.openai("local_scripted").responses.create(
        model=SCRIPTED_MODEL, input=user_input("Say hello"))
    assert scripted.output_text == "local_scripted reply to: Say hello"

    upstream.queue(chat_tool_reply([("call_7", "lookup", '{"word":"gateway"}')]))
    response = gateway_process.openai("sdk_chat").responses.create(
        model="sdk_chat__m1", input="Look it up", tools=[TOOL])
    [call] = response.output
    assert call.type == "function_call" and call.name == "lookup"
    assert call.call_id == "call_7" and json.loads(call.arguments) == {"word": "gateway"}
    assert [tool.name for tool in response.tools] == ["lookup"]


def test_a_non_streamed_call_whose_stream_fails_is_an_http_error(gateway_process, upstream):
    upstream.queue(Reply(chunks=[
        b'data: {"choices":[{"index":0,"delta":{"content":"par"}}]}\n\n',
        b'data: {"error":{"message":"provider overloaded"}}\n\n']))
    with pytest.raises(openai.InternalServerError) as failed:
        gateway_process.openai("sdk_chat").responses.create(model="sdk_chat__m1", input="x")
    assert failed.value.body["message"] == "provider overloaded"
    assert failed.value.code == "server_error"
    [record] = gateway_process.log()
    assert record["status"] == 500 and record["error"] == "provider overloaded"


# ------------------------------------------- the responses.stream helper (item 5) --

EVENT_TYPES = {"response.created", "response.in_progress", "response.output_item.added",
               "response.content_part.added", "response.output_text.delta",
               "response.output_text.done", "response.content_part.done",
               "response.output_item.done", "response.completed"}
CALL_EVENT_TYPES = {"response.function_call_arguments.delta",
                    "response.function_call_arguments.done"}
CALL = ("call_9", "lookup", '{"word":"stream"}')
STREAMED = {
    "openai_chat": ("sdk_chat", "sdk_chat__m1", lambda: chat_text_then_call("Checking now.", CALL),
                    "Checking now.", True),
    "anthropic_messages": ("sdk_anthropic", "sdk_anthropic__m1",
                           lambda: anthropic_reply("Checking now.", CALL), "Checking now.", True),
    "scripted": ("local_scripted", SCRIPTED_MODEL, None,
                 "local_scripted reply to: Say hello", False),
}


@pytest.mark.parametrize("wire", sorted(STREAMED))
def test_the_stream_helper_accumulates_text_and_tool_calls(gateway_process, upstream, wire):
    route, model, reply, text, calls = STREAMED[wire]
    if reply is not None:
        upstream.queue(reply())
    client = gateway_process.openai(route)
    with client.responses.stream(model=model, input=user_input("Say hello"), tools=[TOOL],
                                 tool_choice="auto", parallel_tool_calls=False) as stream:
        events = list(stream)
        final = stream.get_final_response()
    kinds = {event.type for event in events}
    assert EVENT_TYPES <= kinds
    assert CALL_EVENT_TYPES <= kinds if calls else not CALL_EVENT_TYPES & kinds
    assert [event.sequence_number for event in events] == list(range(len(events)))
    assert events[0].type == "response.created" and events[1].type == "response.in_progress"
    for lifecycle in (events[0], events[1], events[-1]):
        response = lifecycle.response
        assert response.id == final.id
        assert [tool.name for tool in response.tools] == ["lookup"]
        assert response.tool_choice == "auto" and response.parallel_tool_calls is False
    deltas = [event for event in events if event.type == "response.output_text.delta"]
    assert all(event.logprobs == [] for event in deltas) and deltas[-1].snapshot == text
    [done] = [event for event in events if event.type == "response.output_text.done"]
    assert done.text == text
    assert final.status == "completed" and final.output_text == text
    if calls:
        [call] = [item for item in final.output if item.type == "function_call"]
        assert (call.call_id, call.name, call.arguments) == CALL
        [args_done] = [e for e in events if e.type == "response.function_call_arguments.done"]
        assert args_done.arguments == CALL[2] and args_done.item_id == call.id


def test_a_streamed_reasoning_item_keeps_its_summary(gateway_process, upstream):
    upstream.queue(chat_text_then_call("Checking now.", CALL))
    with gateway_process.openai("sdk_chat").responses.stream(
            model="sdk_chat__m1", input="Say hello", tools=[TOOL]) as stream:
        final = stream.get_final_response()
    reasoning, message, call = final.output
    assert reasoning.type == "reasoning"
    assert [part.text for part in reasoning.summary] == ["Thinking it over."]
    assert message.type == "message" and call.type == "function_call"


# ------------------------------------------------- upstream error codes (item 6) --

CONTEXT_BODY = {"error": {"message": "Your input exceeds the context window of this model.",
                          "type": "invalid_request_error", "param": "input",
                          "code": "context_length_exceeded"}}
QUOTA_BODY = {"error": {"message": "You exceeded your current quota.",
                        "type": "insufficient_quota", "param": None, "code": "insufficient_quota"}}


@pytest.mark.parametrize("route", ["sdk_chat", "sdk_responses"])
def test_upstream_error_codes_reach_the_client(gateway_process, upstream, route):
    upstream.queue(Reply(400, "application/json", [json.dumps(CONTEXT_BODY).encode()]),
                   Reply(429, "application/json", [json.dumps(QUOTA_BODY).encode()]))
    client = gateway_process.openai(route)
    with pytest.raises(openai.BadRequestError) as context:
        client.responses.create(model=f"{route}__m1", input="a very long input")
    with pytest.raises(openai.RateLimitError) as quota:
        client.responses.create(model=f"{route}__m1", input="again", stream=True)
    assert context.value.code == "context_length_exceeded"
    assert context.value.body["message"] == CONTEXT_BODY["error"]["message"]
    assert quota.value.code == "insufficient_quota"
    assert quota.value.body["message"] == QUOTA_BODY["error"]["message"]
    assert [r["status"] for r in gateway_process.log()] == [400, 429]


def test_a_mid_stream_error_code_survives_into_response_failed(gateway_process, upstream):
    upstream.queue(Reply(chunks=[
        b'data: {"choices":[{"index":0,"delta":{"content":"par"}}]}\n\n',
        b'data: {"error":{"code":"context_length_exceeded","message":"prompt too long"}}\n\n']))
    stream = gateway_process.openai("sdk_chat").responses.create(
        model="sdk_chat__m1", input="x", stream=True)
    last = list(stream)[-1]
    assert last.type == "response.failed"
    assert (last.response.error.code, last.response.error.message) == (
        "context_length_exceeded", "prompt too long")


# --------------------------------------------------------- strict tools (item 9) --

def test_strict_function_tools_stay_strict_on_the_chat_wire(gateway_process, upstream):
    upstream.queue(chat_text_reply("ok"))
    loose = {**TOOL, "name": "loose", "strict": False}
    gateway_process.openai("sdk_chat").responses.create(
        model="sdk_chat__m1", input="x", tools=[{**TOOL, "strict": True}, loose])
    strict_sent, loose_sent = (tool["function"] for tool in upstream.seen[0].body["tools"])
    assert strict_sent["name"] == "lookup" and strict_sent["strict"] is True
    assert strict_sent["parameters"] == TOOL["parameters"]
    assert loose_sent["name"] == "loose" and "strict" not in loose_sent


def test_an_anthropic_prompt_too_long_is_a_context_length_error(gateway_process, upstream):
    message = "prompt is too long: 210000 tokens > 200000 maximum"
    body = {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
    upstream.queue(Reply(400, "application/json", [json.dumps(body).encode()]))
    with pytest.raises(openai.BadRequestError) as context:
        gateway_process.openai("sdk_anthropic").responses.create(model="sdk_anthropic__m1",
                                                                 input="x", stream=True)
    assert context.value.code == "context_length_exceeded"
    assert context.value.body["message"] == body["error"]["message"]

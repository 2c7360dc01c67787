"""The Responses SSE builder emits the frames and shapes Codex's parser needs."""

from __future__ import annotations

import json

import pytest

from mmo_kernel.gateway.errors import GatewayError, usage_limited
from mmo_kernel.gateway.responses_stream import ResponsesStream, usage_block


def parse_frames(raw: bytes) -> list[dict]:
    frames = []
    for block in raw.decode().split("\n\n"):
        if not block:
            continue
        kind_line, data_line = block.split("\n")
        assert kind_line.startswith("event: ") and data_line.startswith("data: ")
        data = json.loads(data_line[len("data: "):])
        assert data["type"] == kind_line[len("event: "):]
        frames.append(data)
    return frames


def test_text_then_tool_call_then_completed_with_usage():
    stream = ResponsesStream("route__model")
    raw = (
        stream.created()
        + stream.text_delta("Hel")
        + stream.text_delta("lo")
        + stream.function_call("echo", '{"x":1}', call_id="call_1", namespace="mcp__echo")
        + stream.completed(usage_block(10, 5, cached_tokens=2))
    )
    frames = parse_frames(raw)
    assert [f["type"] for f in frames] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [f["sequence_number"] for f in frames] == list(range(14))
    assert frames[0]["response"] == frames[1]["response"]
    assert frames[0]["response"]["status"] == "in_progress"
    assert frames[3]["part"] == {"type": "output_text", "text": "", "annotations": []}
    assert all(f["logprobs"] == [] for f in frames[4:7])
    assert frames[6]["text"] == "Hello" and frames[7]["part"]["text"] == "Hello"
    message = frames[8]["item"]
    assert message["content"] == [{"type": "output_text", "text": "Hello", "annotations": []}]
    assert {f["item_id"] for f in frames[3:8]} == {message["id"]}
    assert frames[9]["item"]["arguments"] == "" and frames[9]["item"]["status"] == "in_progress"
    assert frames[10]["delta"] == '{"x":1}' and frames[11]["arguments"] == '{"x":1}'
    call = frames[12]["item"]
    assert (call["type"], call["name"], call["namespace"], call["call_id"]) == (
        "function_call", "echo", "mcp__echo", "call_1")
    assert frames[11]["item_id"] == call["id"] and frames[11]["name"] == "echo"
    done = frames[-1]["response"]
    assert done["id"] == stream.response_id and done["status"] == "completed"
    assert done["usage"]["total_tokens"] == 15
    assert done["usage"]["input_tokens_details"] == {"cached_tokens": 2}
    assert [item["type"] for item in done["output"]] == ["message", "function_call"]


def test_custom_tool_call_and_failed_stream():
    stream = ResponsesStream("m")
    frames = parse_frames(
        stream.created() + stream.custom_tool_call("apply_patch", "*** Begin Patch", "c9")
        + stream.failed("boom", code="server_error")
    )
    assert [f["type"] for f in frames[2:6]] == [
        "response.output_item.added", "response.custom_tool_call_input.delta",
        "response.custom_tool_call_input.done", "response.output_item.done"]
    assert frames[5]["item"] == {
        "id": frames[5]["item"]["id"], "type": "custom_tool_call", "status": "completed",
        "name": "apply_patch", "input": "*** Begin Patch", "call_id": "c9"}
    assert frames[2]["item"] == {**frames[5]["item"], "status": "in_progress", "input": ""}
    assert frames[3]["delta"] == frames[4]["input"] == "*** Begin Patch"
    assert frames[-1]["response"]["error"] == {"code": "server_error", "message": "boom"}
    assert stream.finished


def test_every_response_object_echoes_the_request_tools():
    tools = [{"type": "function", "name": "echo", "parameters": {"type": "object"}}]
    stream = ResponsesStream("m", request={"tools": tools, "tool_choice": "required",
                                           "parallel_tool_calls": False, "input": "x"})
    frames = parse_frames(stream.created() + stream.completed())
    for frame in (frames[0], frames[1], frames[-1]):
        echoed = {k: frame["response"][k] for k in ("tools", "tool_choice", "parallel_tool_calls")}
        assert echoed == {"tools": tools, "tool_choice": "required", "parallel_tool_calls": False}
    bare = parse_frames(ResponsesStream("m").created())[0]["response"]
    assert (bare["tools"], bare["tool_choice"], bare["parallel_tool_calls"]) == ([], "auto", True)


def test_gateway_error_rejects_non_error_status_and_carries_body():
    with pytest.raises(ValueError, match="4xx or 5xx"):
        GatewayError(200, "fine")
    err = usage_limited("quota gone")
    assert err.status == 429 and err.body["error"]["type"] == "usage_limit_reached"
    assert json.loads(err.body_bytes())["error"]["message"] == "quota gone"

"""What the scripted model answers: one output item plus usage, and its SSE bytes.

The model is a pure function from the request body to a ``ModelReply``;
this module turns a reply into the Responses events Codex parses, through
the gateway's shared builder (no second SSE encoder).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from mmo_kernel.gateway import ResponsesStream, usage_block


class FunctionCall(BaseModel):
    model_config = ConfigDict(frozen=True)

    type: Literal["function_call"] = "function_call"
    name: str
    arguments: str
    call_id: str
    namespace: str | None = None


class CustomToolCall(BaseModel):
    model_config = ConfigDict(frozen=True)

    type: Literal["custom_tool_call"] = "custom_tool_call"
    name: str
    input: str
    call_id: str


class Message(BaseModel):
    model_config = ConfigDict(frozen=True)

    type: Literal["message"] = "message"
    text: str


OutputItem = FunctionCall | CustomToolCall | Message


class Usage(BaseModel):
    model_config = ConfigDict(frozen=True)

    input_tokens: int
    output_tokens: int

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


class ModelReply(BaseModel):
    """The scripted model's whole answer to one request."""

    model_config = ConfigDict(frozen=True)

    output: list[OutputItem]
    usage: Usage


def count_tokens(chars: int) -> int:
    """Deterministic stand-in for a tokenizer: one token per 4 characters, at least 1."""
    return max(1, math.ceil(chars / 4))


def input_chars(body_input: list[dict[str, Any]]) -> int:
    return len(json.dumps(body_input, ensure_ascii=False, sort_keys=True, separators=(",", ":")))


def output_chars(item: OutputItem) -> int:
    if isinstance(item, Message):
        return len(item.text)
    if isinstance(item, CustomToolCall):
        return len(item.name) + len(item.input)
    return len(item.name) + len(item.arguments)


def make_reply(body_input: list[dict[str, Any]], output: list[OutputItem]) -> ModelReply:
    usage = Usage(
        input_tokens=count_tokens(input_chars(body_input)),
        output_tokens=count_tokens(sum(output_chars(i) for i in output)),
    )
    return ModelReply(output=output, usage=usage)


def reply_events(reply: ModelReply, model: str,
                 request: Mapping[str, Any] | None = None) -> Iterator[bytes]:
    """SSE chunks of one reply: created, each item, completed with usage.

    ``request`` is the Responses request: its tools, tool choice and
    parallel-calls flag are repeated on the response, as the Responses API does.
    """
    stream = ResponsesStream(model, request=request)
    yield stream.created()
    for item in reply.output:
        if isinstance(item, Message):
            yield stream.message(item.text)
        elif isinstance(item, CustomToolCall):
            yield stream.custom_tool_call(item.name, item.input, call_id=item.call_id)
        else:
            yield stream.function_call(
                item.name, item.arguments, call_id=item.call_id, namespace=item.namespace
            )
    yield stream.completed(usage_block(reply.usage.input_tokens, reply.usage.output_tokens))

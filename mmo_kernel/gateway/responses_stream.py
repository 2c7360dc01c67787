"""Build the OpenAI Responses streaming events that Codex and the ``openai`` SDK parse.

Codex's SSE reader (codex-rs ``codex-api/src/sse/responses.rs``) acts on
``response.created`` (needs a ``response`` object), ``response.output_item.added``
/ ``.done`` (a full ``ResponseItem``), ``response.output_text.delta``,
``response.failed`` (``response.error`` with ``code``/``message``) and
``response.completed`` (``response.id`` is required; ``usage`` needs
``input_tokens``, ``output_tokens`` and ``total_tokens``). A stream that ends
without ``response.completed`` is a disconnect to Codex, so every stream this
builder produces ends with exactly one ``completed`` or ``failed`` event.

Other clients check more: the SDK's ``responses.stream()`` helper appends
text to the content part a ``response.content_part.added`` opened and
arguments to the call a ``response.output_item.added`` opened, and keeps one
response identity. So the full Responses sequence is emitted, as the OpenAI
API emits it: ``created``, ``in_progress``; per message ``output_item.added``,
``content_part.added``, ``output_text.delta``... (with ``logprobs``),
``output_text.done``, ``content_part.done``, ``output_item.done``; per call
``output_item.added`` (empty arguments), ``function_call_arguments.delta`` /
``.done`` (``custom_tool_call_input`` for freeform tools), ``output_item.done``;
and the request's ``tools``, ``tool_choice`` and ``parallel_tool_calls`` on
every ``response`` object.

Route drivers (and the translators) feed it upstream deltas and yield the
bytes it returns.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from typing import Any


def sse_event(kind: str, data: dict[str, Any]) -> bytes:
    """One SSE frame: ``event: <type>\\ndata: <json>\\n\\n``."""
    payload = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    return f"event: {kind}\ndata: {payload}\n\n".encode()


def usage_block(
    input_tokens: int,
    output_tokens: int,
    cached_tokens: int = 0,
    reasoning_tokens: int = 0,
) -> dict[str, Any]:
    """Responses ``usage``; ``total_tokens`` is what Codex charges to a goal budget."""
    return {
        "input_tokens": int(input_tokens),
        "input_tokens_details": {"cached_tokens": int(cached_tokens)},
        "output_tokens": int(output_tokens),
        "output_tokens_details": {"reasoning_tokens": int(reasoning_tokens)},
        "total_tokens": int(input_tokens) + int(output_tokens),
    }


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


ECHOED_DEFAULTS: dict[str, Any] = {"tools": [], "tool_choice": "auto",
                                   "parallel_tool_calls": True}
"""Request fields every ``response`` object repeats (the Responses API's defaults)."""


def request_echo(request: Mapping[str, Any] | None) -> dict[str, Any]:
    """The request fields a ``response`` object carries back, defaults filled in."""
    request = request or {}
    return {key: request[key] if request.get(key) is not None else default
            for key, default in ECHOED_DEFAULTS.items()}


class ResponsesStream:
    """Stateful emitter of one response's events; every method returns SSE bytes.

    Text deltas open an assistant message on demand; a tool call closes the
    open message first, so items come out in the order the model produced
    them. ``output`` keeps the finished items for the final ``response``;
    ``request`` (the Responses request body) supplies the echoed fields.
    """

    def __init__(self, model: str, response_id: str | None = None,
                 request: Mapping[str, Any] | None = None) -> None:
        self.model = model
        self.response_id = response_id or new_id("resp")
        self.created_at = int(time.time())
        self.output: list[dict[str, Any]] = []
        self.finished = False
        self.echo = request_echo(request)
        self._sequence = 0
        self._message: dict[str, Any] | None = None
        self._text: list[str] = []

    # ------------------------------------------------------------ helpers --

    def _event(self, kind: str, **fields: Any) -> bytes:
        data = {"type": kind, "sequence_number": self._sequence, **fields}
        self._sequence += 1
        return sse_event(kind, data)

    def _response(self, status: str, **fields: Any) -> dict[str, Any]:
        return {
            "id": self.response_id,
            "object": "response",
            "created_at": self.created_at,
            "model": self.model,
            "status": status,
            "output": list(self.output) if status != "in_progress" else [],
            "error": None,
            "incomplete_details": None,
            **self.echo,
            **fields,
        }

    def _call(self, item: dict[str, Any], field: str, kind: str) -> bytes:
        """A finished tool call: opened empty, its ``field`` streamed in one delta, closed."""
        index = len(self.output)
        value = item[field]
        ids = {"item_id": item["id"], "output_index": index}
        out = self._event("response.output_item.added", output_index=index,
                          item={**item, "status": "in_progress", field: ""})
        if value:
            out += self._event(f"response.{kind}.delta", **ids, delta=value)
        done = {"name": item["name"]} if kind == "function_call_arguments" else {}
        out += self._event(f"response.{kind}.done", **ids, **done, **{field: value})
        self.output.append(item)
        return out + self._event("response.output_item.done", output_index=index, item=item)

    # ------------------------------------------------------------- events --

    def created(self) -> bytes:
        """The first events of every stream: ``response.created`` and ``response.in_progress``."""
        response = self._response("in_progress")
        return (self._event("response.created", response=response)
                + self._event("response.in_progress", response=response))

    def text_delta(self, delta: str) -> bytes:
        """Stream assistant text; opens a message item (and its text part) when none is open."""
        if not delta:
            return b""
        out = b""
        index = len(self.output)
        if self._message is None:
            self._message = {
                "id": new_id("msg"),
                "type": "message",
                "role": "assistant",
                "status": "in_progress",
                "content": [],
            }
            self._text = []
            out += self._event("response.output_item.added", output_index=index,
                               item=self._message)
            out += self._event("response.content_part.added", item_id=self._message["id"],
                               output_index=index, content_index=0,
                               part={"type": "output_text", "text": "", "annotations": []})
        self._text.append(delta)
        return out + self._event(
            "response.output_text.delta",
            item_id=self._message["id"],
            output_index=index,
            content_index=0,
            delta=delta,
            logprobs=[],
        )

    def end_message(self) -> bytes:
        """Close the open message (no-op when none is open)."""
        if self._message is None:
            return b""
        text = "".join(self._text)
        part = {"type": "output_text", "text": text, "annotations": []}
        item = {**self._message, "status": "completed", "content": [part]}
        self._message = None
        index = len(self.output)
        ids = {"item_id": item["id"], "output_index": index, "content_index": 0}
        out = self._event("response.output_text.done", **ids, text=text, logprobs=[])
        out += self._event("response.content_part.done", **ids, part=part)
        self.output.append(item)
        return out + self._event("response.output_item.done", output_index=index, item=item)

    def message(self, text: str) -> bytes:
        """A whole assistant message in one go."""
        return self.end_message() + self.text_delta(text) + self.end_message()

    def function_call(
        self, name: str, arguments: str, call_id: str | None = None, namespace: str | None = None
    ) -> bytes:
        """A finished function call; ``namespace`` for MCP/dynamic namespaced tools."""
        item: dict[str, Any] = {
            "id": new_id("fc"),
            "type": "function_call",
            "status": "completed",
            "name": name,
            "arguments": arguments,
            "call_id": call_id or new_id("call"),
        }
        if namespace:
            item["namespace"] = namespace
        return self.end_message() + self._call(item, "arguments", "function_call_arguments")

    def custom_tool_call(self, name: str, input_text: str, call_id: str | None = None) -> bytes:
        """A freeform tool call (e.g. ``apply_patch``)."""
        item = {
            "id": new_id("ctc"),
            "type": "custom_tool_call",
            "status": "completed",
            "name": name,
            "input": input_text,
            "call_id": call_id or new_id("call"),
        }
        return self.end_message() + self._call(item, "input", "custom_tool_call_input")

    def completed(self, usage: dict[str, Any] | None = None) -> bytes:
        """End the stream successfully; ``usage`` from :func:`usage_block`."""
        out = self.end_message()
        self.finished = True
        fields = {"usage": usage} if usage is not None else {}
        response = self._response("completed", **fields)
        return out + self._event("response.completed", response=response)

    def failed(self, message: str, code: str = "server_error") -> bytes:
        """End the stream with ``response.failed``; Codex maps ``code`` to a failure kind.

        ``context_length_exceeded``, ``insufficient_quota`` and
        ``usage_not_included`` are terminal in Codex; any other code is retried.
        """
        out = self.end_message()
        self.finished = True
        error = {"code": code, "message": message}
        return out + self._event("response.failed", response=self._response("failed", error=error))


__all__ = ["ECHOED_DEFAULTS", "ResponsesStream", "new_id", "request_echo", "sse_event",
           "usage_block"]

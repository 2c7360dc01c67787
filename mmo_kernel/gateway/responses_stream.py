"""Build the OpenAI Responses streaming events that Codex parses.

Codex's SSE reader (codex-rs ``codex-api/src/sse/responses.rs``) acts on
``response.created`` (needs a ``response`` object), ``response.output_item.added``
/ ``.done`` (a full ``ResponseItem``), ``response.output_text.delta``,
``response.failed`` (``response.error`` with ``code``/``message``) and
``response.completed`` (``response.id`` is required; ``usage`` needs
``input_tokens``, ``output_tokens`` and ``total_tokens``). A stream that ends
without ``response.completed`` is a disconnect to Codex, so every stream this
builder produces ends with exactly one ``completed`` or ``failed`` event.

Route drivers (and the translators) feed it upstream deltas and yield the
bytes it returns.
"""

from __future__ import annotations

import json
import time
import uuid
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


class ResponsesStream:
    """Stateful emitter of one response's events; every method returns SSE bytes.

    Text deltas open an assistant message on demand; a tool call closes the
    open message first, so items come out in the order the model produced
    them. ``output`` keeps the finished items for the final ``response``.
    """

    def __init__(self, model: str, response_id: str | None = None) -> None:
        self.model = model
        self.response_id = response_id or new_id("resp")
        self.created_at = int(time.time())
        self.output: list[dict[str, Any]] = []
        self.finished = False
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
            **fields,
        }

    def _add_item(self, item: dict[str, Any]) -> bytes:
        index = len(self.output)
        self.output.append(item)
        added = self._event("response.output_item.added", output_index=index, item=item)
        return added + self._event(
            "response.output_item.done", output_index=index, item=item
        )

    # ------------------------------------------------------------- events --

    def created(self) -> bytes:
        """The first event of every stream."""
        return self._event("response.created", response=self._response("in_progress"))

    def text_delta(self, delta: str) -> bytes:
        """Stream assistant text; opens a message item when none is open."""
        if not delta:
            return b""
        out = b""
        if self._message is None:
            self._message = {
                "id": new_id("msg"),
                "type": "message",
                "role": "assistant",
                "status": "in_progress",
                "content": [],
            }
            self._text = []
            out += self._event(
                "response.output_item.added", output_index=len(self.output), item=self._message
            )
        self._text.append(delta)
        return out + self._event(
            "response.output_text.delta",
            item_id=self._message["id"],
            output_index=len(self.output),
            content_index=0,
            delta=delta,
        )

    def end_message(self) -> bytes:
        """Close the open message (no-op when none is open)."""
        if self._message is None:
            return b""
        item = {
            **self._message,
            "status": "completed",
            "content": [{"type": "output_text", "text": "".join(self._text), "annotations": []}],
        }
        self._message = None
        index = len(self.output)
        self.output.append(item)
        return self._event("response.output_item.done", output_index=index, item=item)

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
        return self.end_message() + self._add_item(item)

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
        return self.end_message() + self._add_item(item)

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


__all__ = ["ResponsesStream", "new_id", "sse_event", "usage_block"]

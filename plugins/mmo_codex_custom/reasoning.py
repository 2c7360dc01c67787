"""Reasoning items for the translated wires: the Responses events and the replay token.

Chat Completions reasoning deltas and Anthropic thinking blocks become
Responses ``reasoning`` items, streamed as the Responses API streams them
(``output_item.added`` → ``reasoning_summary_part.added`` →
``reasoning_summary_text.delta``… → ``.done`` events → ``output_item.done``).

What an upstream needs back to continue a tool loop (Anthropic's signed
thinking blocks, DeepSeek's ``reasoning_content``) travels in the item's
``encrypted_content``, which Codex stores and sends back in ``input``. That
string is a *replay token*: base64 of compact JSON
``{"v": 1, "route": <route id>, "wire": "anthropic" | "chat", ...}``. A token
is only ever replayed to the route that made it, and anything that does not
decode to a valid token is ignored, never an error.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from mmo_kernel.gateway import ResponsesStream, new_id


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class ThinkingBlock(_Strict):
    """An Anthropic ``thinking`` block; the signature must come back unchanged."""

    type: Literal["thinking"]
    thinking: str
    signature: str


class RedactedThinkingBlock(_Strict):
    """An Anthropic ``redacted_thinking`` block (encrypted by Anthropic)."""

    type: Literal["redacted_thinking"]
    data: str


class AnthropicToken(_Strict):
    v: Literal[1] = 1
    route: str
    wire: Literal["anthropic"] = "anthropic"
    block: Annotated[ThinkingBlock | RedactedThinkingBlock, Field(discriminator="type")]


ReasoningField = Literal["reasoning_content", "reasoning"]
REASONING_FIELDS: tuple[ReasoningField, ...] = ("reasoning_content", "reasoning")
"""Chat reasoning fields: DeepSeek / Z.AI / Moonshot style first, then OpenRouter's."""


class ChatToken(_Strict):
    """Chat reasoning in the field the upstream used, to be sent back in that field."""

    v: Literal[1] = 1
    route: str
    wire: Literal["chat"] = "chat"
    field: ReasoningField
    text: str
    details: list[dict[str, Any]] = Field(default_factory=list)
    """OpenRouter ``reasoning_details``, merged from the streamed fragments."""


ReplayToken = Annotated[AnthropicToken | ChatToken, Field(discriminator="wire")]
_TOKEN: TypeAdapter[AnthropicToken | ChatToken] = TypeAdapter(ReplayToken)


def seal(token: AnthropicToken | ChatToken) -> str:
    """The ``encrypted_content`` string for ``token``."""
    return base64.b64encode(token.model_dump_json().encode()).decode("ascii")


def unseal(raw: str, route: str) -> AnthropicToken | ChatToken | None:
    """The token in ``raw`` if it is one of ours and was made on ``route``; else ``None``."""
    try:
        decoded = base64.b64decode(raw.encode("ascii"), validate=True)
        token = _TOKEN.validate_python(json.loads(decoded))
    except (UnicodeError, binascii.Error, ValueError, ValidationError):
        return None
    return token if token.route == route else None


class ReasoningStream(ResponsesStream):
    """A :class:`ResponsesStream` that also streams ``reasoning`` items.

    At most one of a message and a reasoning item is open: starting either
    closes the other, so items keep the order the model produced them and
    ``output_index`` stays the position in ``output``.
    """

    def __init__(self, model: str, response_id: str | None = None,
                 request: Mapping[str, Any] | None = None) -> None:
        super().__init__(model, response_id, request)
        self._reasoning_id: str | None = None
        self._reasoning: list[str] = []

    @property
    def reasoning_open(self) -> bool:
        return self._reasoning_id is not None

    def reasoning_delta(self, delta: str) -> bytes:
        """Stream reasoning text; opens a reasoning item (and its summary part) on demand."""
        if not delta:
            return b""
        out = b""
        if self._reasoning_id is None:
            out = ResponsesStream.end_message(self) + self._open_reasoning()
            out += self._summary_event("response.reasoning_summary_part.added",
                                       part={"type": "summary_text", "text": ""})
        self._reasoning.append(delta)
        return out + self._summary_event("response.reasoning_summary_text.delta", delta=delta)

    def end_reasoning(self, encrypted_content: str | None = None) -> bytes:
        """Close the open reasoning item, carrying ``encrypted_content`` when given.

        With no item open, ``encrypted_content`` alone makes a whole item
        without summary (an Anthropic ``redacted_thinking`` block); with
        neither, nothing happens.
        """
        if self._reasoning_id is None:
            if encrypted_content is None:
                return b""
            return ResponsesStream.end_message(self) + self._open_reasoning() + self._close(
                [], encrypted_content)
        text = "".join(self._reasoning)
        part = {"type": "summary_text", "text": text}
        out = self._summary_event("response.reasoning_summary_text.done", text=text)
        out += self._summary_event("response.reasoning_summary_part.done", part=part)
        return out + self._close([part], encrypted_content)

    def text_delta(self, delta: str) -> bytes:
        return (self.end_reasoning() if delta else b"") + super().text_delta(delta)

    def end_message(self) -> bytes:
        return self.end_reasoning() + super().end_message()

    def _open_reasoning(self) -> bytes:
        self._reasoning_id = new_id("rs")
        self._reasoning = []
        item = {"id": self._reasoning_id, "type": "reasoning", "summary": []}
        return self._event("response.output_item.added", output_index=len(self.output), item=item)

    def _summary_event(self, kind: str, **fields: Any) -> bytes:
        return self._event(kind, item_id=self._reasoning_id, output_index=len(self.output),
                           summary_index=0, **fields)

    def _close(self, summary: list[dict[str, Any]], encrypted_content: str | None) -> bytes:
        item: dict[str, Any] = {"id": self._reasoning_id, "type": "reasoning", "summary": summary}
        if encrypted_content is not None:
            item["encrypted_content"] = encrypted_content
        self._reasoning_id = None
        index = len(self.output)
        self.output.append(item)
        return self._event("response.output_item.done", output_index=index, item=item)


__all__ = ["REASONING_FIELDS", "AnthropicToken", "ChatToken", "ReasoningField", "ReasoningStream",
           "RedactedThinkingBlock", "ThinkingBlock", "seal", "unseal"]

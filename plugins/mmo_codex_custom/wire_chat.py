"""``openai_chat``: Responses requests as Chat Completions, chat streams as Responses events."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from typing import Any

from mmo_kernel.gateway.notes import LogNote
from mmo_kernel.gateway.responses_stream import ResponsesStream, usage_block
from mmo_kernel.gateway.sse import SseDecoder

from .conversation import Conversation, Part, Turn, codex_call

ROUTING_KEYS = ("provider", "routing", "openrouter_metadata")


def _content(parts: list[Part]) -> str | list[dict[str, Any]]:
    if all(p.kind == "text" for p in parts):
        return "\n".join(p.text for p in parts)
    return [{"type": "text", "text": p.text} if p.kind == "text"
            else {"type": "image_url", "image_url": {"url": p.url}} for p in parts]


def _messages(conv: Conversation) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    if conv.system:
        messages.append({"role": "system", "content": conv.system})
    pending_media: list[Part] = []
    for turn in conv.turns:
        if turn.role != "tool" and pending_media:
            messages.append({"role": "user", "content": _content(pending_media)})
            pending_media = []
        messages.append(_message(turn, pending_media))
    if pending_media:
        messages.append({"role": "user", "content": _content(pending_media)})
    return messages


def _message(turn: Turn, pending_media: list[Part]) -> dict[str, Any]:
    if turn.role == "tool":
        # Chat tool messages carry text only: images follow as a user message.
        texts = [p for p in turn.parts if p.kind == "text"]
        images = [p for p in turn.parts if p.kind == "image"]
        if images:
            pending_media.extend([Part("text", f"Images returned by tool call {turn.call_id}:")]
                                 + images)
        return {"role": "tool", "tool_call_id": turn.call_id,
                "content": "\n".join(p.text for p in texts)}
    if turn.role == "assistant":
        message: dict[str, Any] = {"role": "assistant",
                                   "content": "\n".join(p.text for p in turn.parts) or None}
        if turn.calls:
            message["tool_calls"] = [
                {"id": c.call_id, "type": "function",
                 "function": {"name": c.name, "arguments": c.arguments}} for c in turn.calls]
        return message
    return {"role": turn.role, "content": _content(turn.parts)}


def chat_request(conv: Conversation, model: Any, stream: bool = True) -> dict[str, Any]:
    """The Chat Completions body for one Responses request."""
    payload: dict[str, Any] = {"model": model.upstream_id, "messages": _messages(conv),
                               "stream": stream}
    if stream:
        payload["stream_options"] = {"include_usage": True}
    if conv.tools:
        payload["tools"] = [{"type": "function", "function": {
            "name": t.name, "description": t.description, "parameters": t.parameters}}
            for t in conv.tools]
        payload["tool_choice"] = "auto"
        payload["parallel_tool_calls"] = conv.parallel_tool_calls
    if conv.output_schema is not None:
        fmt = conv.output_schema
        payload["response_format"] = {"type": "json_schema", "json_schema": {
            "name": fmt.get("name", "output"), "schema": fmt.get("schema", {}),
            "strict": bool(fmt.get("strict", False))}}
    if conv.effort and conv.effort in model.reasoning_levels:
        payload["reasoning_effort"] = conv.effort
    if conv.max_output_tokens:
        payload["max_tokens"] = conv.max_output_tokens
    if model.provider_routing is not None:
        payload["provider"] = {"only": list(model.provider_routing.only),
                               "allow_fallbacks": model.provider_routing.allow_fallbacks}
        if not model.provider_routing.only:
            del payload["provider"]["only"]
    return payload


class ChatStreamTranslator:
    """Turns Chat Completions chunks into Responses events, one chunk at a time."""

    def __init__(self, conv: Conversation, model_id: str) -> None:
        self.conv = conv
        self.out = ResponsesStream(model_id)
        self.calls: dict[int, dict[str, str]] = {}
        self.usage: dict[str, Any] | None = None
        self.finish_reason: str | None = None
        self.metadata: dict[str, Any] = {}
        self.upstream_model: str | None = None
        self.error: str | None = None

    def start(self) -> bytes:
        return self.out.created()

    def chunk(self, doc: dict[str, Any]) -> bytes:
        for key in ROUTING_KEYS:
            if doc.get(key):
                self.metadata[key] = doc[key]
        if isinstance(doc.get("model"), str):
            self.upstream_model = doc["model"]
        if isinstance(doc.get("error"), dict):
            self.error = str(doc["error"].get("message") or doc["error"])
            return b""
        if isinstance(doc.get("usage"), dict):
            self.usage = _usage(doc["usage"])
        out = b""
        for choice in doc.get("choices") or []:
            delta = choice.get("delta") or choice.get("message") or {}
            if isinstance(delta.get("content"), str):
                out += self.out.text_delta(delta["content"])
            for index, call in enumerate(delta.get("tool_calls") or []):
                slot = self.calls.setdefault(int(call.get("index", index)),
                                             {"id": "", "name": "", "arguments": ""})
                slot["id"] = call.get("id") or slot["id"]
                function = call.get("function") or {}
                slot["name"] += function.get("name") or ""
                slot["arguments"] += function.get("arguments") or ""
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
        return out

    def finish(self) -> bytes:
        if self.error is not None:
            return self.out.failed(self.error, "server_error")
        out = self.out.end_message()
        for index in sorted(self.calls):
            slot = self.calls[index]
            name, namespace, payload, custom = codex_call(self.conv.tool_names, slot["name"],
                                                          slot["arguments"])
            call_id = slot["id"] or f"call_{index}"
            out += (self.out.custom_tool_call(name, payload, call_id) if custom
                    else self.out.function_call(name, payload, call_id, namespace))
        return out + self.out.completed(self.usage)

    def note(self) -> LogNote:
        return LogNote(usage=self.usage, provider_metadata=self.metadata or None,
                       upstream_model=self.upstream_model, finish_reason=self.finish_reason)


def _usage(raw: dict[str, Any]) -> dict[str, Any]:
    cached = (raw.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    reasoning = (raw.get("completion_tokens_details") or {}).get("reasoning_tokens") or 0
    return usage_block(raw.get("prompt_tokens") or 0, raw.get("completion_tokens") or 0,
                       cached, reasoning)


def _sse_docs(decoder: SseDecoder, raw: bytes) -> Iterator[dict[str, Any]]:
    """The JSON objects of the whole frames in ``raw`` (``[DONE]`` and junk skipped)."""
    for frame in decoder.feed(raw):
        if frame.data.strip() == "[DONE]" or not frame.data:
            continue
        try:
            doc = json.loads(frame.data)
        except ValueError:
            continue
        if isinstance(doc, dict):
            yield doc


def _whole(tr: ChatStreamTranslator, raw: bytes) -> bytes:
    """A non-streamed chat completion, translated in one go."""
    doc = json.loads(raw or b"{}")
    return tr.chunk(doc if isinstance(doc, dict) else {})


def translate_chat_stream(conv: Conversation, model_id: str, chunks: Iterator[bytes],
                          content_type: str) -> Iterator[Any]:
    """Responses SSE bytes (and a final LogNote) from an upstream chat response."""
    tr = ChatStreamTranslator(conv, model_id)
    yield tr.start()
    if "event-stream" not in content_type:
        yield _whole(tr, b"".join(chunks))
    else:
        decoder = SseDecoder()
        for raw in chunks:
            out = b"".join(tr.chunk(doc) for doc in _sse_docs(decoder, raw))
            if out:
                yield out
    yield tr.note()
    yield tr.finish()


async def translate_chat_stream_async(conv: Conversation, model_id: str,
                                      chunks: AsyncIterator[bytes],
                                      content_type: str) -> AsyncGenerator[Any, None]:
    """The same translation for the gateway's async path."""
    tr = ChatStreamTranslator(conv, model_id)
    yield tr.start()
    if "event-stream" not in content_type:
        yield _whole(tr, b"".join([raw async for raw in chunks]))
    else:
        decoder = SseDecoder()
        async for raw in chunks:
            out = b"".join(tr.chunk(doc) for doc in _sse_docs(decoder, raw))
            if out:
                yield out
    yield tr.note()
    yield tr.finish()

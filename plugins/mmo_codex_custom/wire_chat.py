"""``openai_chat``: Responses requests as Chat Completions, chat streams as Responses events.

Reasoning deltas (``reasoning_content``: DeepSeek, Z.AI, Moonshot;
``reasoning`` / ``reasoning_details``: OpenRouter) become a Responses
``reasoning`` item. Its replay token remembers the field, so the reasoning
goes back on the assistant message in the upstream's own field: DeepSeek's
thinking mode rejects a tool loop whose ``reasoning_content`` is missing,
and OpenRouter documents sending ``reasoning_details`` back.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator, Iterator, Mapping
from typing import Any

from mmo_kernel.gateway import GatewayError, LogNote, SseDecoder, usage_block

from .conversation import Conversation, Part, ToolSpec, Turn, codex_call
from .reasoning import REASONING_FIELDS, ChatToken, ReasoningField, ReasoningStream, seal, unseal

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
        messages.append(_message(turn, pending_media, conv.route))
    if pending_media:
        messages.append({"role": "user", "content": _content(pending_media)})
    return messages


def _message(turn: Turn, pending_media: list[Part], route: str) -> dict[str, Any]:
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
        message.update(_replayed_reasoning(turn.reasoning, route))
        if turn.calls:
            message["tool_calls"] = [
                {"id": c.call_id, "type": "function",
                 "function": {"name": c.name, "arguments": c.arguments}} for c in turn.calls]
        return message
    return {"role": turn.role, "content": _content(turn.parts)}


def _replayed_reasoning(raw_tokens: list[str], route: str) -> dict[str, Any]:
    """The reasoning fields to send back on an assistant message (see the module docstring)."""
    tokens = [t for t in (unseal(raw, route) for raw in raw_tokens) if isinstance(t, ChatToken)]
    if not tokens:
        return {}
    details = [d for t in tokens for d in t.details]
    if details:
        return {"reasoning_details": details}
    return {tokens[0].field: "".join(t.text for t in tokens)}


def _function(tool: ToolSpec) -> dict[str, Any]:
    """A chat ``function`` tool; ``strict`` only when Codex asked for it (not every upstream
    knows the key, and ``false`` is the default everywhere)."""
    function: dict[str, Any] = {"name": tool.name, "description": tool.description,
                                "parameters": tool.parameters}
    if tool.strict:
        function["strict"] = True
    return function


def chat_request(conv: Conversation, model: Any, stream: bool = True) -> dict[str, Any]:
    """The Chat Completions body for one Responses request."""
    payload: dict[str, Any] = {"model": model.upstream_id, "messages": _messages(conv),
                               "stream": stream}
    if stream:
        payload["stream_options"] = {"include_usage": True}
    if conv.tools:
        payload["tools"] = [{"type": "function", "function": _function(t)} for t in conv.tools]
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


class ChatReasoning:
    """The open reasoning item of a chat stream: its text, source field and details."""

    def __init__(self, route: str) -> None:
        self.route = route
        self.field: ReasoningField | None = None
        self.text: list[str] = []
        self.details: list[dict[str, Any]] = []

    def feed(self, delta: dict[str, Any]) -> str:
        """Record one delta's reasoning; returns the text to stream.

        OpenRouter sends ``reasoning`` and the same text in ``reasoning_details``:
        the string field wins, the details only speak when it is absent.
        """
        details = delta.get("reasoning_details")
        if isinstance(details, list) and details:
            _merge_details(self.details, details)
            self.field = self.field or "reasoning"
        for name in REASONING_FIELDS:
            value = delta.get(name)
            if isinstance(value, str) and value:
                self.field = self.field or name
                self.text.append(value)
                return value
        text = _details_text(details) if isinstance(details, list) else ""
        self.text.append(text)
        return text

    def token(self) -> str | None:
        """The replay token of what was fed, then start over; None when nothing was."""
        field, self.field = self.field, None
        text, self.text = "".join(self.text), []
        details, self.details = self.details, []
        if field is None:
            return None
        return seal(ChatToken(route=self.route, field=field, text=text, details=details))


def _merge_details(details: list[dict[str, Any]], fragments: list[Any]) -> None:
    """Merge streamed ``reasoning_details`` fragments: same ``index`` and ``type`` concatenate."""
    for fragment in fragments:
        if not isinstance(fragment, dict):
            continue
        target = next((d for d in details if "index" in fragment
                       and d.get("index") == fragment["index"]
                       and d.get("type") == fragment.get("type")), None)
        if target is None:
            details.append(dict(fragment))
            continue
        for key, value in fragment.items():
            if key in ("text", "summary", "data") and isinstance(value, str) and isinstance(
                    target.get(key), str):
                target[key] += value
            elif value is not None:
                target[key] = value


def _details_text(details: list[Any]) -> str:
    """The readable text of ``reasoning_details`` fragments (encrypted ones have none)."""
    texts = [d.get("text") if d.get("type") == "reasoning.text" else d.get("summary")
             for d in details if isinstance(d, dict)]
    return "".join(t for t in texts if isinstance(t, str))


class ChatStreamTranslator:
    """Turns Chat Completions chunks into Responses events, one chunk at a time."""

    def __init__(self, conv: Conversation, model_id: str,
                 request: Mapping[str, Any] | None = None) -> None:
        self.conv = conv
        self.out = ReasoningStream(model_id, request=request)
        self.reasoning = ChatReasoning(conv.route)
        self.calls: dict[int, dict[str, str]] = {}
        self.usage: dict[str, Any] | None = None
        self.finish_reason: str | None = None
        self.metadata: dict[str, Any] = {}
        self.upstream_model: str | None = None
        self.error: tuple[str, str] | None = None
        """``(message, code)`` of an upstream error; the stream then fails with them."""

    def start(self) -> bytes:
        return self.out.created()

    def chunk(self, doc: dict[str, Any]) -> bytes:
        for key in ROUTING_KEYS:
            if doc.get(key):
                self.metadata[key] = doc[key]
        if isinstance(doc.get("model"), str):
            self.upstream_model = doc["model"]
        if isinstance(doc.get("error"), dict):
            error = doc["error"]
            code = error.get("code")
            self.error = (str(error.get("message") or error),
                          code if isinstance(code, str) and code else "server_error")
            return b""
        if isinstance(doc.get("usage"), dict):
            self.usage = _usage(doc["usage"])
        out = b""
        for choice in doc.get("choices") or []:
            delta = choice.get("delta") or choice.get("message") or {}
            out += self.out.reasoning_delta(self.reasoning.feed(delta))
            if isinstance(delta.get("content"), str) and delta["content"]:
                out += self._end_reasoning() + self.out.text_delta(delta["content"])
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
            return self.out.failed(*self.error)
        out = self._end_reasoning() + self.out.end_message()
        for index in sorted(self.calls):
            slot = self.calls[index]
            name, namespace, payload, custom = codex_call(self.conv.tool_names, slot["name"],
                                                          slot["arguments"])
            call_id = slot["id"] or f"call_{index}"
            out += (self.out.custom_tool_call(name, payload, call_id) if custom
                    else self.out.function_call(name, payload, call_id, namespace))
        return out + self.out.completed(self.usage)

    def broke(self, err: GatewayError) -> None:
        """The upstream failed mid-stream: end this same response with ``response.failed``."""
        self.error = (err.message, err.code or "server_error")

    def _end_reasoning(self) -> bytes:
        token = self.reasoning.token()
        return self.out.end_reasoning(token) if token else b""

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
                          content_type: str, request: Mapping[str, Any] | None = None
                          ) -> Iterator[Any]:
    """Responses SSE bytes (and a final LogNote) from an upstream chat response."""
    tr = ChatStreamTranslator(conv, model_id, request)
    yield tr.start()
    try:
        if "event-stream" not in content_type:
            yield _whole(tr, b"".join(chunks))
        else:
            decoder = SseDecoder()
            for raw in chunks:
                out = b"".join(tr.chunk(doc) for doc in _sse_docs(decoder, raw))
                if out:
                    yield out
    except GatewayError as err:
        tr.broke(err)
    yield tr.note()
    yield tr.finish()


async def translate_chat_stream_async(conv: Conversation, model_id: str,
                                      chunks: AsyncIterator[bytes], content_type: str,
                                      request: Mapping[str, Any] | None = None
                                      ) -> AsyncGenerator[Any, None]:
    """The same translation for the gateway's async path."""
    tr = ChatStreamTranslator(conv, model_id, request)
    yield tr.start()
    try:
        if "event-stream" not in content_type:
            yield _whole(tr, b"".join([raw async for raw in chunks]))
        else:
            decoder = SseDecoder()
            async for raw in chunks:
                out = b"".join(tr.chunk(doc) for doc in _sse_docs(decoder, raw))
                if out:
                    yield out
    except GatewayError as err:
        tr.broke(err)
    yield tr.note()
    yield tr.finish()

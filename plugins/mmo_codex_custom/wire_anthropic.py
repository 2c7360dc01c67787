"""``anthropic_messages``: Responses requests as Messages API calls, and back.

Messages require alternating user/assistant turns, tool results as the first
blocks of the user turn after the ``tool_use``, a single ``system`` string and
``max_tokens``; this module builds exactly that from the neutral conversation.

Extended thinking is requested when Codex sends an effort that is one of the
model's ``reasoning_levels`` (budget: :data:`THINKING_BUDGETS`). Thinking and
redacted-thinking blocks come back to Codex as reasoning items whose replay
token holds the block, and are rebuilt unchanged, signature included, at the
start of their assistant message: Anthropic rejects a tool loop without them.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncGenerator, AsyncIterator, Iterator, Mapping
from typing import Any

from mmo_kernel.gateway import GatewayError, LogNote, SseDecoder, error_body, usage_block

from .conversation import Conversation, Part, codex_call
from .reasoning import (
    AnthropicToken,
    ReasoningStream,
    RedactedThinkingBlock,
    ThinkingBlock,
    seal,
    unseal,
)

_DATA_URL = re.compile(r"^data:(?P<type>image/[A-Za-z0-9.+-]+);base64,(?P<data>.*)$", re.S)
_ID_OK = re.compile(r"[^A-Za-z0-9_-]")
RETRYABLE_ERRORS = {"overloaded_error": "server_error", "api_error": "server_error",
                    "rate_limit_error": "rate_limit_exceeded"}
THINKING_BUDGETS = {"minimal": 1024, "low": 4096, "medium": 8192, "high": 16384,
                    "xhigh": 32768, "max": 49152}
"""``budget_tokens`` per Codex effort; ``max_tokens`` grows by the budget (docs/gateway.md)."""
THINKING_TYPES = ("thinking", "redacted_thinking")
PROMPT_TOO_LONG = "prompt is too long"
"""How Anthropic words a context-window overflow (a 400 ``invalid_request_error``, no code)."""


def classify_error(err: GatewayError) -> GatewayError:
    """Give Anthropic's context-window 400 the ``context_length_exceeded`` code Codex knows."""
    if err.status == 400 and err.code is None and PROMPT_TOO_LONG in err.message.lower():
        return GatewayError(400, error_body(err.message, "invalid_request_error",
                                            "context_length_exceeded"))
    return err


def _tool_id(call_id: str) -> str:
    return _ID_OK.sub("_", call_id) or "call"


def _blocks(parts: list[Part]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for part in parts:
        if part.kind == "text":
            if part.text:
                blocks.append({"type": "text", "text": part.text})
            continue
        match = _DATA_URL.match(part.url)
        source = ({"type": "base64", "media_type": match["type"], "data": match["data"]}
                  if match else {"type": "url", "url": part.url})
        blocks.append({"type": "image", "source": source})
    return blocks


def _messages(conv: Conversation) -> tuple[str, list[dict[str, Any]]]:
    system = [conv.system] if conv.system else []
    messages: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]],
            thinking: list[dict[str, Any]] | None = None) -> None:
        """Append ``blocks`` to the last message of ``role`` (or a new one), thinking first."""
        if not blocks:
            return
        if messages and messages[-1]["role"] == role:
            content = messages[-1]["content"]
            at = next((i for i, b in enumerate(content) if b["type"] not in THINKING_TYPES),
                      len(content))
            content[at:at] = thinking or []
            content.extend(blocks)
        else:
            messages.append({"role": role, "content": [*(thinking or []), *blocks]})

    for turn in conv.turns:
        if turn.role == "system":
            # Messages has one system prompt; later instructions ride as user text.
            add("user", [{"type": "text", "text": "\n".join(p.text for p in turn.parts)}])
        elif turn.role == "tool":
            content = _blocks(turn.parts) or [{"type": "text", "text": "(empty)"}]
            add("user", [{"type": "tool_result", "tool_use_id": _tool_id(turn.call_id),
                          "content": content}])
        elif turn.role == "assistant":
            blocks = _blocks(turn.parts)
            for call in turn.calls:
                try:
                    arguments = json.loads(call.arguments or "{}")
                except ValueError:
                    arguments = {"input": call.arguments}
                blocks.append({"type": "tool_use", "id": _tool_id(call.call_id), "name": call.name,
                               "input": arguments if isinstance(arguments, dict)
                               else {"value": arguments}})
            add("assistant", blocks, _thinking_blocks(turn.reasoning, conv.route))
        else:
            add("user", _blocks(turn.parts))
    if not messages or messages[0]["role"] != "user":
        messages.insert(0, {"role": "user", "content": [{"type": "text", "text": "(start)"}]})
    return "\n\n".join(system), messages


def _thinking_blocks(raw_tokens: list[str], route: str) -> list[dict[str, Any]]:
    """The thinking blocks rebuilt from replay tokens made on ``route``; others are dropped."""
    tokens = [unseal(raw, route) for raw in raw_tokens]
    return [t.block.model_dump() for t in tokens if isinstance(t, AnthropicToken)]


def _thinking_budget(conv: Conversation, model: Any, messages: list[dict[str, Any]]) -> int | None:
    """``budget_tokens`` for this request, or None when thinking is not requested."""
    if not conv.effort or conv.effort not in model.reasoning_levels:
        return None
    if _unthought_tool_loop(messages):
        return None
    return THINKING_BUDGETS.get(conv.effort)


def _unthought_tool_loop(messages: list[dict[str, Any]]) -> bool:
    """True while a tool loop runs in an assistant turn that did not start with thinking.

    The turn is everything after the last user message without tool results.
    Anthropic rejects thinking there (a turn begun without thinking, or replay
    tokens that did not survive), so that request goes without thinking.
    """
    def has_results(message: dict[str, Any]) -> bool:
        return any(b["type"] == "tool_result" for b in message["content"])

    if messages[-1]["role"] != "user" or not has_results(messages[-1]):
        return False
    start: dict[str, Any] | None = None
    for message in reversed(messages):
        if message["role"] == "assistant":
            start = message
        elif not has_results(message):
            break
    return start is None or start["content"][0]["type"] not in THINKING_TYPES


def anthropic_request(conv: Conversation, model: Any, default_max_tokens: int) -> dict[str, Any]:
    system, messages = _messages(conv)
    payload: dict[str, Any] = {"model": model.upstream_id, "messages": messages,
                               "max_tokens": conv.max_output_tokens or default_max_tokens,
                               "stream": True}
    budget = _thinking_budget(conv, model, messages)
    if budget is not None:
        # budget_tokens must stay below max_tokens: the answer keeps its own room.
        payload["thinking"] = {"type": "enabled", "budget_tokens": budget}
        payload["max_tokens"] += budget
    if system:
        payload["system"] = system
    if conv.tools:
        payload["tools"] = [{"name": t.name, "description": t.description,
                             "input_schema": t.parameters} for t in conv.tools]
        payload["tool_choice"] = {"type": "auto",
                                  "disable_parallel_tool_use": not conv.parallel_tool_calls}
    return payload


class AnthropicStreamTranslator:
    """Messages stream events -> Responses events, in content-block order."""

    def __init__(self, conv: Conversation, model_id: str,
                 request: Mapping[str, Any] | None = None) -> None:
        self.conv = conv
        self.out = ReasoningStream(model_id, request=request)
        self.blocks: dict[int, dict[str, Any]] = {}
        self.input_tokens = self.cached = self.output_tokens = 0
        self.stop_reason: str | None = None
        self.error: tuple[str, str] | None = None
        self.upstream_model: str | None = None
        self.done = False

    def event(self, doc: dict[str, Any]) -> bytes:
        kind = doc.get("type")
        if kind == "message_start":
            message = doc.get("message") or {}
            self.upstream_model = message.get("model")
            self._usage(message.get("usage") or {})
        elif kind == "content_block_start":
            return self._start_block(int(doc.get("index", 0)), doc.get("content_block") or {})
        elif kind == "content_block_delta":
            return self._delta(int(doc.get("index", 0)), doc.get("delta") or {})
        elif kind == "content_block_stop":
            return self._stop_block(int(doc.get("index", 0)))
        elif kind == "message_delta":
            self.stop_reason = (doc.get("delta") or {}).get("stop_reason") or self.stop_reason
            self._usage(doc.get("usage") or {})
        elif kind == "message_stop":
            self.done = True
        elif kind == "error":
            error = doc.get("error") or {}
            self.error = (str(error.get("message") or "upstream error"),
                          RETRYABLE_ERRORS.get(error.get("type"), "server_error"))
        return b""

    def _usage(self, usage: dict[str, Any]) -> None:
        if "input_tokens" in usage:
            self.input_tokens = int(usage.get("input_tokens") or 0) + int(
                usage.get("cache_creation_input_tokens") or 0) + int(
                usage.get("cache_read_input_tokens") or 0)
            self.cached = int(usage.get("cache_read_input_tokens") or 0)
        if "output_tokens" in usage:
            self.output_tokens = int(usage.get("output_tokens") or 0)

    def _start_block(self, index: int, content_block: dict[str, Any]) -> bytes:
        block = self.blocks[index] = dict(content_block, partial_json="")
        if block.get("type") == "thinking":
            return self.out.reasoning_delta(str(block.get("thinking") or ""))
        return b""

    def _delta(self, index: int, delta: dict[str, Any]) -> bytes:
        block = self.blocks.setdefault(index, {"type": "text", "partial_json": ""})
        kind = delta.get("type")
        if kind == "text_delta":
            return self.out.text_delta(delta.get("text", ""))
        if kind == "input_json_delta":
            block["partial_json"] += delta.get("partial_json", "")
        elif kind == "thinking_delta":
            block["thinking"] = str(block.get("thinking") or "") + delta.get("thinking", "")
            return self.out.reasoning_delta(delta.get("thinking", ""))
        elif kind == "signature_delta":
            block["signature"] = str(block.get("signature") or "") + delta.get("signature", "")
        return b""

    def _stop_block(self, index: int) -> bytes:
        block = self.blocks.pop(index, {})
        if block.get("type") in THINKING_TYPES:
            return self._end_thinking(block)
        if block.get("type") != "tool_use":
            return b""
        arguments = block["partial_json"] or json.dumps(block.get("input") or {})
        name, namespace, payload, custom = codex_call(self.conv.tool_names, block.get("name", ""),
                                                      arguments)
        call_id = block.get("id") or f"toolu_{index}"
        if custom:
            return self.out.custom_tool_call(name, payload, call_id)
        return self.out.function_call(name, payload, call_id, namespace)

    def _end_thinking(self, block: dict[str, Any]) -> bytes:
        """Close the block's reasoning item; its token only when Anthropic would accept it back."""
        rebuilt: ThinkingBlock | RedactedThinkingBlock | None = None
        if block["type"] == "thinking" and block.get("signature"):
            rebuilt = ThinkingBlock(type="thinking", thinking=str(block.get("thinking") or ""),
                                    signature=str(block["signature"]))
        elif block["type"] == "redacted_thinking" and block.get("data"):
            rebuilt = RedactedThinkingBlock(type="redacted_thinking", data=str(block["data"]))
        if rebuilt is None:
            return self.out.end_reasoning()
        return self.out.end_reasoning(seal(AnthropicToken(route=self.conv.route, block=rebuilt)))

    def broke(self, err: GatewayError) -> None:
        """The upstream failed mid-stream: end this same response with ``response.failed``."""
        self.error = (err.message, err.code or "server_error")

    def usage(self) -> dict[str, Any]:
        return usage_block(self.input_tokens, self.output_tokens, self.cached)

    def finish(self) -> bytes:
        if self.error is not None:
            return self.out.failed(*self.error)
        if not self.done:
            return self.out.failed("upstream stream ended before message_stop", "server_error")
        return self.out.completed(self.usage())


def _sse_docs(decoder: SseDecoder, raw: bytes) -> Iterator[dict[str, Any]]:
    """The JSON objects of the whole frames in ``raw``."""
    for frame in decoder.feed(raw):
        try:
            doc = json.loads(frame.data)
        except ValueError:
            continue
        if isinstance(doc, dict):
            yield doc


def _note(tr: AnthropicStreamTranslator) -> LogNote:
    return LogNote(usage=tr.usage(), upstream_model=tr.upstream_model, finish_reason=tr.stop_reason)


def translate_anthropic_stream(conv: Conversation, model_id: str, chunks: Iterator[bytes],
                               content_type: str, request: Mapping[str, Any] | None = None
                               ) -> Iterator[Any]:
    tr = AnthropicStreamTranslator(conv, model_id, request)
    yield tr.out.created()
    try:
        if "event-stream" not in content_type:
            yield from _whole_message(tr, json.loads(b"".join(chunks) or b"{}"))
        else:
            decoder = SseDecoder()
            for raw in chunks:
                out = b"".join(tr.event(doc) for doc in _sse_docs(decoder, raw))
                if out:
                    yield out
    except GatewayError as err:
        tr.broke(err)
    yield _note(tr)
    yield tr.finish()


async def translate_anthropic_stream_async(conv: Conversation, model_id: str,
                                           chunks: AsyncIterator[bytes], content_type: str,
                                           request: Mapping[str, Any] | None = None
                                           ) -> AsyncGenerator[Any, None]:
    """The same translation for the gateway's async path."""
    tr = AnthropicStreamTranslator(conv, model_id, request)
    yield tr.out.created()
    try:
        if "event-stream" not in content_type:
            raw = b"".join([piece async for piece in chunks])
            for out in _whole_message(tr, json.loads(raw or b"{}")):
                yield out
        else:
            decoder = SseDecoder()
            async for piece in chunks:
                out = b"".join(tr.event(doc) for doc in _sse_docs(decoder, piece))
                if out:
                    yield out
    except GatewayError as err:
        tr.broke(err)
    yield _note(tr)
    yield tr.finish()


def _whole_message(tr: AnthropicStreamTranslator, message: Any) -> Iterator[bytes]:
    """A non-streamed Messages answer, replayed as stream events."""
    if not isinstance(message, dict):
        return
    tr.event({"type": "message_start", "message": message})
    for index, block in enumerate(message.get("content") or []):
        if block.get("type") == "text":
            yield tr.out.text_delta(block.get("text", ""))
        elif block.get("type") in ("tool_use", *THINKING_TYPES):
            yield tr._start_block(index, block) + tr._stop_block(index)
    tr.event({"type": "message_delta", "delta": {"stop_reason": message.get("stop_reason")},
              "usage": message.get("usage") or {}})
    tr.done = True

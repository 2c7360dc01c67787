"""What an agent is doing, folded from its app-server event log (``events.jsonl``).

The host records every JSON-RPC message it exchanges with the agent's
app-server, one line each. Only a few notifications matter to a viewer (turns,
tool items, token totals, the last agent message), so a line's method is read
from its first bytes and only those lines are parsed: output deltas and thread
reads, which make up most of the bytes, are skipped unparsed.
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime
from itertools import islice
from typing import Any

FOLDED = frozenset({"turn/started", "turn/completed", "item/started", "item/completed",
                    "thread/tokenUsage/updated"})
_RECEIVED = b'"direction":"received","message":{"method":"'
_MARKERS = tuple(_RECEIVED + method.encode() + b'"' for method in sorted(FOLDED))
"""The bytes that start a folded notification, searched for in a whole chunk: most lines
(output deltas) are then never looked at one by one."""
METHOD_BYTES = 160
"""The method is read from a line's first bytes: a deeper match is inside the payload, and
so is any but the first ``_RECEIVED`` of a line."""
SPANS_KEPT = 200
"""Timeline spans kept per agent (the newest); older ones fall off the view."""
MESSAGE_CHARS = 400
LABEL_CHARS = 120


def epoch(stamp: Any) -> float | None:
    try:
        return datetime.fromisoformat(stamp).timestamp()
    except (TypeError, ValueError):
        return None


def _tokens(value: Any) -> int:
    """A token total as a count (0 for anything that is not a whole number)."""
    return value if type(value) is int else int(value) if type(value) is float else 0


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def item_label(item: dict[str, Any]) -> tuple[str, str] | None:
    """``(kind, label)`` of a tool-like item worth a timeline span, else None."""
    kind = item.get("type")
    if kind == "commandExecution":
        command = item.get("command")
        if isinstance(command, list):
            command = " ".join(str(part) for part in command)
        return "command", "$ " + _clip(str(command or ""), LABEL_CHARS)
    if kind == "mcpToolCall":
        return "tool", f"{item.get('server', '?')}.{item.get('tool', '?')}"
    if kind == "dynamicToolCall":
        return "tool", str(item.get("tool") or item.get("name") or "tool")
    if kind == "fileChange":
        changes = item.get("changes")
        count = len(changes) if isinstance(changes, list) else 0
        return "edit", f"edit {count} file{'s' if count != 1 else ''}"
    if kind == "webSearch":
        return "search", "search " + _clip(str(item.get("query") or ""), LABEL_CHARS)
    return None


@dataclass(slots=True)
class Span:
    """One stretch of work on the timeline: a turn or a tool call."""

    kind: str
    label: str
    start: float
    end: float | None = None
    status: str | None = None
    shown: dict[str, Any] | None = field(default=None, repr=False, compare=False)
    """``as_dict`` kept once the span is closed (it never changes again)."""

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "label": self.label, "start": self.start, "end": self.end,
                "status": self.status}


@dataclass
class AgentActivity:
    """The running fold of one agent's events; ``feed`` it the new lines of its log."""

    turns: int = 0
    turn_started: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    last_message: str | None = None
    last_event: float | None = None
    lines_parsed: int = 0
    open_items: dict[str, Span] = field(default_factory=dict)
    spans: deque[Span] = field(default_factory=lambda: deque(maxlen=SPANS_KEPT))
    _turn_span: Span | None = None

    def feed(self, lines: list[bytes]) -> None:
        """Fold these lines of the log (in order; their newlines may be kept)."""
        self.feed_chunk(b"\n".join(lines))

    def feed_chunk(self, data: bytes) -> None:
        """Fold a run of complete lines. The folded lines are found by searching for each
        folded method's bytes: the output deltas between them are never split out."""
        if not data:
            return
        find, limit = data.find, METHOD_BYTES
        hits = []
        for marker in _MARKERS:
            at = find(marker)
            while at >= 0:
                start = data.rfind(b"\n", 0, at) + 1
                end = find(b"\n", at)
                end = len(data) if end < 0 else end
                if at - start + len(marker) <= limit and find(_RECEIVED, start, at) < 0:
                    hits.append((start, end, at + len(_RECEIVED), at + len(marker) - 1))
                at = find(marker, end)
        hits.sort()
        for start, end, name, quote in hits:
            try:
                entry = json.loads(data[start:end].decode())
            except ValueError:
                continue  # a torn line is skipped, as every reader of these logs does
            if isinstance(entry, dict):
                self._fold(data[name:quote].decode(), entry)

    def _fold(self, method: str, entry: dict[str, Any]) -> None:
        self.lines_parsed += 1
        stamp = epoch(entry.get("recorded_at"))
        if stamp is not None:
            self.last_event = stamp
        message = entry.get("message")
        params = (message.get("params") if isinstance(message, dict) else None) or {}
        if isinstance(params, dict):
            self._apply(method, params, stamp if stamp is not None else 0.0)

    def _apply(self, method: str, params: dict[str, Any], at: float) -> None:
        if method == "turn/started":
            self.turns += 1
            self.turn_started = at
            self._turn_span = Span("turn", f"turn {self.turns}", at)
            self.spans.append(self._turn_span)
        elif method == "turn/completed":
            turn = params.get("turn") if isinstance(params.get("turn"), dict) else {}
            if self._turn_span is not None:
                self._turn_span.end, self._turn_span.status = at, str(turn.get("status") or "")
            self._turn_span, self.turn_started = None, None
            for span in self.open_items.values():
                span.end, span.status = at, span.status or "interrupted"
            self.open_items.clear()
        elif method in ("item/started", "item/completed"):
            self._item(method, params.get("item"), at)
        elif method == "thread/tokenUsage/updated":
            usage = params.get("tokenUsage") if isinstance(params.get("tokenUsage"), dict) else {}
            total = usage.get("total") if isinstance(usage.get("total"), dict) else None
            if total is not None:
                self.input_tokens = _tokens(total.get("inputTokens"))
                self.output_tokens = _tokens(total.get("outputTokens"))

    def _item(self, method: str, item: Any, at: float) -> None:
        if not isinstance(item, dict):
            return
        item_id = str(item.get("id") or "")
        if item.get("type") == "agentMessage" and method == "item/completed":
            text = item.get("text")
            if isinstance(text, str) and text.strip():
                self.last_message = _clip(text, MESSAGE_CHARS)
            return
        labelled = item_label(item)
        if labelled is None:
            return
        if method == "item/started":
            span = Span(labelled[0], labelled[1], at)
            self.open_items[item_id] = span
            self.spans.append(span)
            return
        span = self.open_items.pop(item_id, None)
        if span is None:  # started before the part of the log we read
            span = Span(labelled[0], labelled[1], at)
            self.spans.append(span)
        span.end, span.status = at, str(item.get("status") or "completed")

    def timeline(self, newest: int) -> list[dict[str, Any]]:
        """The ``newest`` spans as dicts; a closed span's dict is built once and shared by
        every snapshot after (50 agents x 40 spans a second were a seventh of a refresh)."""
        spans = self.spans
        skip = len(spans) - newest
        out = []
        for span in islice(spans, skip, None) if skip > 0 else spans:
            shown = span.shown
            if shown is None:
                shown = span.as_dict()
                if span.end is not None:
                    span.shown = shown
            out.append(shown)
        return out

    def doing(self) -> dict[str, Any] | None:
        """What the agent does now: its newest open tool call, else its open turn."""
        if self.open_items:
            span = list(self.open_items.values())[-1]
            return {"kind": span.kind, "label": span.label, "since": span.start}
        if self.turn_started is not None:
            return {"kind": "turn", "label": f"thinking · turn {self.turns}",
                    "since": self.turn_started}
        return None

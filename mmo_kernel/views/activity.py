"""What an agent is doing, folded from its app-server event log (``events.jsonl``).

The host records every JSON-RPC message it exchanges with the agent's
app-server, one line each. Only a few notifications matter to a viewer (turns,
tool items, token totals, the last agent message), so a line's method is read
from its first bytes and only those lines are parsed: output deltas and thread
reads, which make up most of the bytes, are skipped unparsed.
"""

from __future__ import annotations

import json
import re
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

_METHOD = re.compile(rb'"direction":"received","message":\{"method":"([^"]+)"')
FOLDED = frozenset({"turn/started", "turn/completed", "item/started", "item/completed",
                    "thread/tokenUsage/updated"})
SPANS_KEPT = 200
"""Timeline spans kept per agent (the newest); older ones fall off the view."""
MESSAGE_CHARS = 400
LABEL_CHARS = 120


def epoch(stamp: Any) -> float | None:
    try:
        return datetime.fromisoformat(stamp).timestamp()
    except (TypeError, ValueError):
        return None


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


@dataclass
class Span:
    """One stretch of work on the timeline: a turn or a tool call."""

    kind: str
    label: str
    start: float
    end: float | None = None
    status: str | None = None

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
        for line in lines:
            found = _METHOD.search(line, 0, 160)
            if found is None:
                continue
            method = found.group(1).decode()
            if method not in FOLDED:
                continue
            try:
                entry = json.loads(line)
            except ValueError:
                continue  # a torn line is skipped, as every reader of these logs does
            self.lines_parsed += 1
            at = epoch(entry.get("recorded_at"))
            if at is not None:
                self.last_event = at
            params = (entry.get("message") or {}).get("params") or {}
            if isinstance(params, dict):
                self._apply(method, params, at if at is not None else 0.0)

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
                self.input_tokens = int(total.get("inputTokens") or 0)
                self.output_tokens = int(total.get("outputTokens") or 0)

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

    def doing(self) -> dict[str, Any] | None:
        """What the agent does now: its newest open tool call, else its open turn."""
        if self.open_items:
            span = list(self.open_items.values())[-1]
            return {"kind": span.kind, "label": span.label, "since": span.start}
        if self.turn_started is not None:
            return {"kind": "turn", "label": f"thinking · turn {self.turns}",
                    "since": self.turn_started}
        return None

"""Per-route gateway figures over a sliding window, from ``gateway/requests.jsonl``."""

from __future__ import annotations

import json
import statistics
from collections import deque
from typing import NamedTuple

from pydantic import BaseModel, ValidationError

from mmo_kernel.gateway.request_log import RequestRow, log_path
from mmo_kernel.views.activity import epoch
from mmo_kernel.views.tail import LogTail

WINDOW_SECONDS = 300.0


class _Seen(NamedTuple):
    at: float
    route: str
    failed: bool
    fault: bool
    ttfb_ms: float | None
    latency_ms: float | None
    input_tokens: int
    output_tokens: int
    session_id: str | None


class RouteFigures(BaseModel):
    """One route's requests in the window (latencies in ms; None when there were none)."""

    route: str
    requests: int
    errors: int
    faults: int
    ttfb_p50_ms: float | None
    latency_p50_ms: float | None
    latency_p95_ms: float | None
    input_tokens: int
    output_tokens: int


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return round(values[0], 3)
    return round(statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1], 3)


def _seen(row: RequestRow) -> _Seen | None:
    at = epoch((row.at or "").replace("Z", "+00:00"))
    if at is None or not row.route:
        return None
    usage = row.usage or {}
    return _Seen(at, row.route, row.status is None or row.status >= 400 or bool(row.error),
                 bool(row.fault), row.ttfb_ms, row.latency_ms,
                 int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0),
                 row.session_id)


class RouteWindow:
    """The gateway log folded into per-route figures for the last ``window`` seconds."""

    def __init__(self, window: float = WINDOW_SECONDS) -> None:
        self.window = window
        self._tail = LogTail(log_path())
        self._rows: deque[_Seen] = deque()
        self._since = 0.0

    @property
    def bytes_read(self) -> int:
        return self._tail.bytes_read

    def refresh(self, now: float) -> None:
        lines = self._tail.read()
        if self._tail.restarted:
            self._rows.clear()
        for line in lines:
            try:
                seen = _seen(RequestRow.model_validate(json.loads(line)))
            except (ValueError, ValidationError):
                continue  # a torn or foreign line is not a request
            if seen is not None:
                self._rows.append(seen)
        self._since = now - self.window
        while self._rows and self._rows[0].at < self._since:  # rows come roughly in time order
            self._rows.popleft()

    def figures(self, session_id: str | None = None) -> list[RouteFigures]:
        """Figures per route, busiest first; only ``session_id``'s requests when given."""
        by_route: dict[str, list[_Seen]] = {}
        for seen in self._rows:
            if seen.at < self._since:
                continue  # a long request's row lands after newer ones: still out of the window
            if session_id is None or seen.session_id == session_id:
                by_route.setdefault(seen.route, []).append(seen)
        out = [_figures(route, rows) for route, rows in by_route.items()]
        return sorted(out, key=lambda f: (-f.requests, f.route))


def _figures(route: str, rows: list[_Seen]) -> RouteFigures:
    ttfb = [r.ttfb_ms for r in rows if r.ttfb_ms is not None]
    latency = [r.latency_ms for r in rows if r.latency_ms is not None]
    return RouteFigures(
        route=route, requests=len(rows), errors=sum(r.failed for r in rows),
        faults=sum(r.fault for r in rows), ttfb_p50_ms=_percentile(ttfb, 50),
        latency_p50_ms=_percentile(latency, 50), latency_p95_ms=_percentile(latency, 95),
        input_tokens=sum(r.input_tokens for r in rows),
        output_tokens=sum(r.output_tokens for r in rows))


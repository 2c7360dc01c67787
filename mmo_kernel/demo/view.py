"""The live view and the summary of `mmo demo`, at most 80 columns wide.

On a TTY a compact table is redrawn in place; otherwise one line is printed
per change, so logs and pipes stay readable.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from typing import Any, TextIO

WIDTH = 80
COLUMNS = (("agent", 27), ("route", 14), ("status", 10), ("elapsed", 7), ("tokens", 7))


def fit(text: str, width: int = WIDTH) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _elapsed(record: dict[str, Any], now: datetime) -> str:
    start, end = record.get("started_at"), record.get("finished_at")
    if not start:
        return "-"
    begin = datetime.fromisoformat(start)
    seconds = ((datetime.fromisoformat(end) if end else now) - begin).total_seconds()
    return f"{max(0.0, seconds):.1f}s"


def _tokens(usage: Any) -> str:
    total = (usage or {}).get("total_tokens") if isinstance(usage, dict) else None
    if not total:
        return "-"
    return f"{total / 1000:.1f}k" if total >= 1000 else str(total)


def rows(session: dict[str, Any], jobs: list[dict[str, Any]], route: str) -> list[tuple[str, ...]]:
    """One row for the root, then one per worker (oldest first)."""
    now = datetime.now().astimezone()
    root = (f"root {session.get('root_agent', '')}", route, str(session.get("status", "")),
            _elapsed(session, now), _tokens(session.get("root_usage")))
    workers = [(f"  {j.get('agent', '')}", route, str(j.get("status", "")),
                _elapsed(j, now), _tokens(j.get("usage")))
               for j in sorted(jobs, key=lambda j: j.get("created_at") or "")]
    return [root, *workers]


def format_row(row: tuple[str, ...]) -> str:
    cells = [fit(value, width).ljust(width) for value, (_, width) in zip(row, COLUMNS, strict=True)]
    return fit(" ".join(cells).rstrip())


def header() -> str:
    return format_row(tuple(name for name, _ in COLUMNS))


class LiveView:
    """Feeds on (session, jobs) snapshots; redraws on a TTY, prints changes otherwise."""

    def __init__(self, out: TextIO, route: str, tty: bool) -> None:
        self.out, self.route, self.tty = out, route, tty
        self.drawn = 0
        self.seen: dict[str, str] = {}
        self.started = time.monotonic()

    def update(self, session: dict[str, Any], jobs: list[dict[str, Any]]) -> None:
        table = rows(session, jobs, self.route)
        if self.tty:
            self._redraw([header(), *(format_row(r) for r in table)])
        else:
            self._changes(table)

    def _redraw(self, lines: list[str]) -> None:
        if self.drawn:
            self.out.write(f"\x1b[{self.drawn}F")
        for line in lines:
            self.out.write("\x1b[2K" + line + "\n")
        self.out.flush()
        self.drawn = len(lines)

    def _changes(self, table: list[tuple[str, ...]]) -> None:
        stamp = f"[{time.monotonic() - self.started:5.1f}s]"
        for index, (agent, _route, status, _elapsed, tokens) in enumerate(table):
            key = f"{index}:{agent}"
            if self.seen.get(key) != status:
                self.seen[key] = status
                who = agent.strip()
                self.out.write(fit(f"{stamp} {who}: {status} (tokens {tokens})") + "\n")
        self.out.flush()


def poller(view: LiveView, list_jobs: Callable[[str], list[dict[str, Any]]],
           every: float = 0.5) -> Callable[[dict[str, Any]], None]:
    """An ``on_progress`` callback that refreshes the view at most every ``every`` seconds."""
    last = [0.0]

    def on_progress(session: dict[str, Any]) -> None:
        now = time.monotonic()
        if now - last[0] < every and session.get("status") == "running":
            return
        last[0] = now
        view.update(session, list_jobs(session["session_id"]))

    return on_progress


def summary(session: dict[str, Any], jobs: list[dict[str, Any]], route: str) -> list[str]:
    """The final table: every agent with its status, time, tokens and result state."""
    lines = [header() + " result", "-" * 78]
    records = [session, *sorted(jobs, key=lambda j: j.get("created_at") or "")]
    for row, job in zip(rows(session, jobs, route), records, strict=True):
        state = job.get("result_state") or job.get("result_kind") or ""
        lines.append(fit(format_row(row).ljust(69) + " " + str(state)))
    return lines

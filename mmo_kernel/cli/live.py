"""The live view of ``mmo run``: the root turn and the session's worker jobs as they change.

``run_root_exec`` calls the view with the session record about every 0.1 s.
On a terminal the view is a small table redrawn in place; anywhere else
(a pipe, a log file, CI) it prints one plain line per change, so a log holds
each status transition once and nothing else.
"""

from __future__ import annotations

import shutil
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TextIO

from mmo_kernel.cli.output import bold, duration, short, tokens

JOB_REFRESH_SECONDS = 0.5
"""Job records are re-read at most this often; the root record comes with every call."""


@dataclass(frozen=True)
class Row:
    """One line of the view: who, on which route, in which state, for how long."""

    key: str
    label: str
    agent: str
    route: str
    status: str
    detail: str
    elapsed: str
    tokens: str

    @property
    def change(self) -> tuple[str, str]:
        """What counts as a change worth a plain line (not the ticking clock)."""
        return self.status, self.detail


def _elapsed(start: Any, end: Any) -> str:
    try:
        began = datetime.fromisoformat(start)
    except (TypeError, ValueError):
        return ""
    try:
        stop = datetime.fromisoformat(end)
    except (TypeError, ValueError):
        stop = datetime.now(UTC)
    return duration((stop - began).total_seconds())


def _route_ids(snapshot_hash: Any) -> dict[str, str]:
    """agent -> route id the snapshot bound it to (empty when unreadable).

    The manifest names each agent's model key, ``<route>__<slug>``; route ids
    never contain ``__``, so the route is the part before it.
    """
    try:
        from mmo_kernel.profiles.snapshots import load_snapshot

        keys = load_snapshot(str(snapshot_hash))["manifest"].get("route_ids") or {}
        return {agent: str(key).split("__", 1)[0] for agent, key in keys.items()}
    except Exception:  # the view must never break a run
        return {}


def root_row(record: dict[str, Any], routes: dict[str, str]) -> Row:
    turn = record.get("active_root_turn_id") or record.get("root_last_turn_id") or ""
    detail = f"turn {turn}" if turn else ""
    if record.get("pending_requests"):
        detail = f"{len(record['pending_requests'])} request(s) awaiting operator input"
    agent = record.get("root_agent", "")
    return Row("root", "root", agent, routes.get(agent, ""), record.get("status", ""), detail,
               _elapsed(record.get("started_at") or record.get("created_at"),
                        record.get("finished_at")),
               tokens(record.get("root_usage")))


def job_row(job: dict[str, Any], routes: dict[str, str]) -> Row:
    agent = job.get("agent", "")
    detail = short(job.get("task_kind") or job.get("task") or "", 32)
    return Row(job["job_id"], job["job_id"], agent, routes.get(agent, ""), job.get("status", ""),
               detail, _elapsed(job.get("started_at") or job.get("created_at"),
                                job.get("finished_at")),
               tokens(job.get("usage")))


class LiveView:
    """Callable progress sink for ``run_root_exec(on_progress=...)``."""

    def __init__(self, stream: TextIO = sys.stderr, interactive: bool | None = None) -> None:
        self.stream = stream
        self.interactive = stream.isatty() if interactive is None else interactive
        self.started = time.monotonic()
        self.routes: dict[str, str] | None = None
        self.jobs: list[dict[str, Any]] = []
        self.jobs_read_at = 0.0
        self.seen: dict[str, tuple[str, str]] = {}
        self.drawn: list[str] = []
        self.session_id: str | None = None

    def __call__(self, record: dict[str, Any]) -> None:
        try:
            self.update(record)
        except Exception:  # progress display is best effort; the run goes on
            pass

    def update(self, record: dict[str, Any]) -> None:
        if self.session_id is None:
            self.session_id = record["session_id"]
            self.stream.write(f"session {self.session_id} ({record.get('profile_id', '')})\n")
        if self.routes is None:
            self.routes = _route_ids(record.get("snapshot_hash"))
        rows = [root_row(record, self.routes)] + [job_row(j, self.routes) for j in self._jobs()]
        if self.interactive:
            self._redraw(rows)
        else:
            self._log_changes(rows)
        self.stream.flush()

    def _jobs(self, force: bool = False) -> list[dict[str, Any]]:
        now = time.monotonic()
        if force or now - self.jobs_read_at >= JOB_REFRESH_SECONDS:
            from mmo_kernel.jobs.listing import list_jobs

            self.jobs = sorted(list_jobs(self.session_id), key=lambda j: j.get("created_at", ""))
            self.jobs_read_at = now
        return self.jobs

    def _log_changes(self, rows: list[Row]) -> None:
        stamp = duration(time.monotonic() - self.started)
        for row in rows:
            if self.seen.get(row.key) == row.change:
                continue
            self.seen[row.key] = row.change
            who = f"{row.agent} [{row.route}]" if row.route else row.agent
            extra = f" ({row.detail})" if row.detail else ""
            usage = f", {row.tokens}" if row.tokens else ""
            name = row.label if row.key == "root" else f"job {row.label}"
            self.stream.write(f"[{stamp:>6}] {name} {who}: {row.status}{extra}{usage}\n")

    def _redraw(self, rows: list[Row]) -> None:
        headers = ("", "agent", "route", "status", "elapsed", "tokens", "")
        cells = [(r.label, r.agent, r.route, r.status, r.elapsed, r.tokens, r.detail) for r in rows]
        widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(headers)]
        lines = ["  ".join(h.upper().ljust(w) for h, w in zip(headers, widths, strict=True))
                 .rstrip()]
        lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
                  for row in cells]
        width = shutil.get_terminal_size((120, 24)).columns - 1
        lines = [line[:width] for line in lines]  # a wrapped line would break the redraw
        if lines == self.drawn:
            return
        up = f"\033[{len(self.drawn)}F" if self.drawn else ""
        body = "\n".join([bold(lines[0], self.stream), *lines[1:]])
        self.stream.write(f"{up}\033[J{body}\n")
        self.drawn = lines

    def finish(self, record: dict[str, Any] | None) -> None:
        """Draw the final state once more (jobs re-read), so the last word is accurate."""
        if record is None or self.session_id is None:
            return
        try:
            self._jobs(force=True)
            self.update(record)
        except Exception:  # same as __call__: display only
            pass


"""The one read model a viewer keeps: ``Collector.refresh()`` returns a ``TeamSnapshot``.

Nothing here writes under the state dir. Per refresh it costs one ``lstat`` per
live session record and per finished one of the slice checked in turn
(``records.SessionBook``), a pure status read (``peek``: pid + start token) per live
agent, and the bytes appended to the live sessions' logs since the last
refresh. A record is parsed again only when its file identity changed; the
jobs of a session are learned from its audit log (``agent_started``), so the
thousands of past jobs are never opened.
"""

from __future__ import annotations

import json
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mmo_kernel.config.pricing import cost_number, model_cost
from mmo_kernel.jobs.peek import peek_job_record
from mmo_kernel.jobs.records import jobs_root, read_job_record
from mmo_kernel.profiles.costs import agent_models
from mmo_kernel.sessions.peek import peek_session_record
from mmo_kernel.sessions.records import sessions_root
from mmo_kernel.state import index
from mmo_kernel.state.paths import state_dir
from mmo_kernel.views.activity import AgentActivity, epoch
from mmo_kernel.views.model import AgentView, Doing, SessionView, TeamSnapshot
from mmo_kernel.views.records import Record, SessionBook, reread
from mmo_kernel.views.routes import WINDOW_SECONDS, RouteWindow
from mmo_kernel.views.tail import LogTail

AUDIT_KEPT = 50
"""Audit entries kept per live session (the newest)."""
TIMELINE_KEPT = 40
"""Timeline spans each agent carries in a snapshot (the newest)."""
READ_BUDGET_BYTES = 4 << 20
"""Most bytes one log contributes to one refresh: a huge log is caught up over several."""


@dataclass
class _Watched:
    """One agent's event log, tailed, and what it says so far."""

    tail: LogTail
    activity: AgentActivity = field(default_factory=AgentActivity)

    def read(self) -> None:
        chunk = self.tail.read_chunk(READ_BUDGET_BYTES)
        if self.tail.restarted:
            self.activity = AgentActivity()
        self.activity.feed_chunk(chunk)


@dataclass
class _LiveSession:
    directory: Path
    audit_tail: LogTail
    root: _Watched
    audit: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=AUDIT_KEPT))
    started: dict[str, dict[str, Any]] = field(default_factory=dict)
    """job id -> its ``agent_started`` audit entry, in start order."""
    workers: dict[str, _Watched] = field(default_factory=dict)
    jobs: dict[str, Record] = field(default_factory=dict)


def _utc(stamp: Any) -> float | None:
    return epoch(stamp) if isinstance(stamp, str) else None


def _elapsed(started: Any, finished: Any, now: float) -> float | None:
    begin = _utc(started)
    if begin is None:
        return None
    end = _utc(finished)
    return round((end if end is not None else now) - begin, 1)


def _count(value: Any) -> int | None:
    """A token count as the view's schema has it (a record's ``usage`` is free-form)."""
    return value if type(value) is int else None


class Collector:
    """The read model of one state dir, refreshed on demand (``mmo top``: every second).

    Snapshots are built with ``model_construct``: every value comes from a record already
    validated through its model or from the fold of its log, so validating them again
    each second would only cost time.
    """

    def __init__(self, window: float = WINDOW_SECONDS) -> None:
        self.state_dir = state_dir()
        self._sessions_root, self._jobs_root = str(sessions_root()), str(jobs_root())
        self._book = SessionBook()
        self._live: dict[str, _LiveSession] = {}
        self.routes = RouteWindow(window)

    def _job(self, live: _LiveSession, job_id: str) -> dict[str, Any] | None:
        """The job as a reconciling read would show it (``peek``), or None if unreadable."""
        ident = index.identity(f"{self._jobs_root}/{job_id}/metadata.json")
        kept = reread(live.jobs.get(job_id), ident, lambda: read_job_record(job_id))
        live.jobs[job_id] = kept
        return None if kept.record is None else peek_job_record(kept.record)

    # -------------------------------------------------------------- logs --

    def _live_session(self, session_id: str) -> _LiveSession:
        live = self._live.get(session_id)
        if live is None:
            directory = Path(self._sessions_root, session_id)
            live = _LiveSession(directory, LogTail(directory / "audit.jsonl"),
                                _Watched(LogTail(directory / "root-events.jsonl")))
            self._live[session_id] = live
        return live

    @staticmethod
    def _read_audit(live: _LiveSession) -> None:
        lines = live.audit_tail.read(READ_BUDGET_BYTES)
        if live.audit_tail.restarted:
            live.audit.clear()
        for line in lines:
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if not isinstance(entry, dict):
                continue
            live.audit.append(entry)
            job_id = entry.get("job_id")
            if entry.get("event") == "agent_started" and isinstance(job_id, str):
                live.started.setdefault(job_id, entry)

    # ----------------------------------------------------------- snapshot --

    def refresh(self, show_finished: int = 0) -> TeamSnapshot:
        """Every live session in full; the ``show_finished`` newest finished ones too."""
        started = time.perf_counter()
        now = time.time()
        book = self._book
        book.scan()
        self.routes.refresh(now)
        shown = book.live()
        shown.sort(key=lambda item: item[1].get("created_at") or "", reverse=True)
        picked = shown + book.newest_finished(show_finished)
        finished, tainted = dict(sorted(book.finished.items())), book.tainted
        for session_id in self._live.keys() - {sid for sid, _ in picked}:
            del self._live[session_id]
        views = []
        for session_id, _ in picked:
            record = book.strict(session_id)
            if record is not None:
                views.append(self._session_view(session_id, peek_session_record(record), now))
        agents = [agent for view in views for agent in view.agents]
        costs = [agent.cost_usd for agent in agents]
        return TeamSnapshot.model_construct(
            generated_at=datetime.now(UTC).isoformat(timespec="seconds"),
            state_dir=str(self.state_dir), sessions_total=len(book.records),
            sessions_live=len(shown), finished=finished, tainted=tainted,
            agents=dict(sorted(Counter(a.status for a in agents).items())),
            input_tokens=sum(a.input_tokens or 0 for a in agents),
            output_tokens=sum(a.output_tokens or 0 for a in agents),
            cost_usd=None if not costs or None in costs else round(sum(costs), 6),
            sessions=views, routes=self.routes.figures(),
            refresh_ms=round((time.perf_counter() - started) * 1000, 2),
            bytes_read=self._bytes_read())

    def _bytes_read(self) -> int:
        total = self.routes.bytes_read
        for live in self._live.values():
            total += live.audit_tail.bytes_read + live.root.tail.bytes_read
            total += sum(w.tail.bytes_read for w in live.workers.values())
        return total

    def _session_view(self, session_id: str, record: dict[str, Any], now: float) -> SessionView:
        live = self._live_session(session_id)
        self._read_audit(live)
        live.root.read()
        models = agent_models(record.get("snapshot_hash"))
        agents = [self._root_view(session_id, record, live.root, models, now)]
        for job_id, entry in live.started.items():
            job = self._job(live, job_id)
            if job is None:
                continue
            watched = live.workers.get(job_id)
            if watched is None:
                watched = live.workers[job_id] = _Watched(
                    LogTail(f"{self._jobs_root}/{job_id}/events.jsonl"))
            watched.read()  # one stat when nothing was appended
            agents.append(self._job_view(session_id, job, entry, watched, models, now))
        return SessionView.model_construct(
            session_id=session_id, profile_id=record.get("profile_id"), cwd=record.get("cwd"),
            status=record["status"], stored_status=record["stored_status"],
            session_kind=record.get("session_kind"),
            execution_mode=record.get("root_execution_mode"),
            goal_status=record.get("root_goal_status"), created_at=record.get("created_at"),
            tainted=bool(record.get("tainted")), agents=_tree(agents),
            audit=[dict(entry) for entry in live.audit], routes=self.routes.figures(session_id))

    @staticmethod
    def _tokens(activity: AgentActivity, usage: Any) -> tuple[int | None, int | None]:
        """The live thread total from the event log, else what the record says."""
        if activity.input_tokens is not None:
            return activity.input_tokens, activity.output_tokens
        usage = usage if isinstance(usage, dict) else {}
        return _count(usage.get("input_tokens")), _count(usage.get("output_tokens"))

    def _agent_fields(self, agent: str, watched: _Watched, usage: Any,
                      models: dict[str, Any]) -> dict[str, Any]:
        activity = watched.activity
        given, taken = self._tokens(activity, usage)
        model = models.get(agent)  # from the session's snapshot, looked up once per session
        cost = model_cost(model, {"input_tokens": given or 0, "output_tokens": taken or 0})
        doing = activity.doing()
        return {
            "route": model.route if model is not None else None,
            "model": model.id if model is not None else None,
            "turns": activity.turns, "input_tokens": given, "output_tokens": taken,
            "cost_usd": cost_number(cost),
            "doing": None if doing is None else Doing.model_construct(**doing),
            "last_message": activity.last_message,
            "timeline": activity.timeline(TIMELINE_KEPT),
        }

    def _root_view(self, session_id: str, record: dict[str, Any], watched: _Watched,
                   models: dict[str, Any], now: float) -> AgentView:
        agent = str(record.get("root_agent") or "root")
        return AgentView.model_construct(
            key="root", session_id=session_id, job_id=None, agent=agent, parent=None,
            status=record["status"], stored_status=record["stored_status"],
            mode=record.get("sandbox_mode"), write_scope=[],
            started_at=record.get("started_at"), finished_at=record.get("finished_at"),
            elapsed_seconds=_elapsed(record.get("started_at"), record.get("finished_at"), now),
            result_state=None, pending_requests=len(record.get("root_pending_requests") or []),
            error=record.get("error"),
            **self._agent_fields(agent, watched, record.get("root_usage"), models))

    def _job_view(self, session_id: str, job: dict[str, Any], entry: dict[str, Any],
                  watched: _Watched, models: dict[str, Any], now: float) -> AgentView:
        agent = str(job.get("agent") or entry.get("agent") or "?")
        caller = job.get("caller_job_id") or entry.get("caller_job_id")
        return AgentView.model_construct(
            key=job["job_id"], session_id=session_id, job_id=job["job_id"], agent=agent,
            parent=caller if isinstance(caller, str) else "root", status=job["status"],
            stored_status=job["stored_status"], mode=job.get("mode"),
            write_scope=[str(s) for s in job.get("write_scope") or []],
            started_at=job.get("started_at"), finished_at=job.get("finished_at"),
            elapsed_seconds=_elapsed(job.get("started_at"), job.get("finished_at"), now),
            result_state=job.get("result_state"),
            pending_requests=len(job.get("pending_requests") or []), error=job.get("error"),
            **self._agent_fields(agent, watched, job.get("usage"), models))


def _tree(agents: list[AgentView]) -> list[AgentView]:
    """Root first, then each worker right after its caller (depth-first, start order)."""
    children: dict[str, list[AgentView]] = {}
    keys = {a.key for a in agents}
    for agent in agents[1:]:
        parent = agent.parent if agent.parent in keys else "root"
        children.setdefault(parent or "root", []).append(agent)
    ordered: list[AgentView] = []

    def visit(agent: AgentView, depth: int) -> None:
        agent.depth = depth  # built for this snapshot only: set in place, no copy
        ordered.append(agent)
        for child in children.get(agent.key, []):
            visit(child, depth + 1)

    visit(agents[0], 0)
    return ordered

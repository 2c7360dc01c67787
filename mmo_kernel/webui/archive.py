"""The page of a finished session the live snapshot does not carry (it holds only the newest
finished ones): the same ``SessionView`` model, built once from the records and logs and
kept until the session's record or audit log changes (an accept or an integration appends
to the audit log, so the page follows it)."""

from __future__ import annotations

import json
import os
import stat
import threading
import time
from typing import Any

from mmo_kernel import api
from mmo_kernel.config.pricing import cost_number, model_cost
from mmo_kernel.profiles.costs import agent_models
from mmo_kernel.views.activity import AgentActivity, epoch
from mmo_kernel.views.model import AgentView, SessionView

AUDIT_KEPT = 50
TIMELINE_KEPT = 40
LOG_TAIL_BYTES = 4 << 20
"""The newest bytes of an event log read for a finished agent's timeline."""
AUDIT_TAIL_BYTES = 256 << 10
KEPT_VIEWS = 64


def tail_bytes(path: os.PathLike[str] | str, most: int) -> bytes:
    """The last ``most`` bytes of a regular file, not following a symlink; b"" when absent.

    Only whole lines are returned (a cut first line is dropped)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return b""
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            return b""
        start = max(0, info.st_size - most)
        handle.seek(start)
        data = handle.read(most)
    if start:
        data = data.split(b"\n", 1)[1] if b"\n" in data else b""
    return data


def _stamp(path: os.PathLike[str] | str) -> tuple[int, int, int] | None:
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return info.st_mtime_ns, info.st_size, info.st_ino


def audit_entries(session_id: str, kept: int = AUDIT_KEPT) -> list[dict[str, Any]]:
    """The newest ``kept`` entries of the session's audit log, oldest first."""
    out = []
    for line in tail_bytes(api.session_dir(session_id) / "audit.jsonl",
                           AUDIT_TAIL_BYTES).splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            out.append(entry)
    return out[-kept:]


def _activity(path: Any) -> AgentActivity:
    activity = AgentActivity()
    if isinstance(path, str) or isinstance(path, os.PathLike):
        activity.feed(tail_bytes(path, LOG_TAIL_BYTES).splitlines(keepends=True))
    return activity


def _elapsed(started: Any, finished: Any, now: float) -> float | None:
    begin = epoch(started) if isinstance(started, str) else None
    if begin is None:
        return None
    end = epoch(finished) if isinstance(finished, str) else None
    return round((end if end is not None else now) - begin, 1)


def _fields(agent: str, activity: AgentActivity, usage: Any, models: dict[str, Any]) -> dict:
    usage = usage if isinstance(usage, dict) else {}
    given = activity.input_tokens if activity.input_tokens is not None else \
        usage.get("input_tokens")
    taken = activity.output_tokens if activity.input_tokens is not None else \
        usage.get("output_tokens")
    model = models.get(agent)
    cost = model_cost(model, {"input_tokens": given or 0, "output_tokens": taken or 0})
    return {"route": model.route if model is not None else None,
            "model": model.id if model is not None else None,
            "turns": activity.turns, "input_tokens": given, "output_tokens": taken,
            "cost_usd": cost_number(cost), "last_message": activity.last_message,
            "timeline": [s.as_dict() for s in list(activity.spans)[-TIMELINE_KEPT:]]}


def build(session_id: str) -> SessionView:
    """The session's view from its records (a pure read of the session; jobs as listed)."""
    now = time.time()
    record = api.peek_session(session_id)
    models = agent_models(record.get("snapshot_hash"))
    root_name = str(record.get("root_agent") or "root")
    folder = api.session_dir(session_id)
    agents = [AgentView(
        key="root", session_id=session_id, agent=root_name, status=record["status"],
        stored_status=record["stored_status"], mode=record.get("sandbox_mode"),
        started_at=record.get("started_at"), finished_at=record.get("finished_at"),
        elapsed_seconds=_elapsed(record.get("started_at"), record.get("finished_at"), now),
        pending_requests=len(record.get("root_pending_requests") or []),
        error=record.get("error"),
        **_fields(root_name, _activity(folder / "root-events.jsonl"), record.get("root_usage"),
                  models))]
    jobs = [j for j in api.list_jobs(session_id, include_unreadable=True) if "agent" in j]
    jobs.sort(key=lambda j: j.get("created_at") or "")
    known = {j["job_id"] for j in jobs}
    for job in jobs:
        caller = job.get("caller_job_id")
        agents.append(AgentView(
            key=job["job_id"], session_id=session_id, job_id=job["job_id"],
            agent=str(job["agent"]), parent=caller if caller in known else "root",
            depth=1, status=job["status"], stored_status=job["status"], mode=job.get("mode"),
            write_scope=[str(s) for s in job.get("write_scope") or []],
            started_at=job.get("started_at"), finished_at=job.get("finished_at"),
            elapsed_seconds=_elapsed(job.get("started_at"), job.get("finished_at"), now),
            result_state=job.get("result_state"),
            pending_requests=len(job.get("pending_requests") or []), error=job.get("error"),
            **_fields(str(job["agent"]), _activity(job.get("events_path")), job.get("usage"),
                      models)))
    return SessionView(
        session_id=session_id, profile_id=record.get("profile_id"), cwd=record.get("cwd"),
        status=record["status"], stored_status=record["stored_status"],
        session_kind=record.get("session_kind"),
        execution_mode=record.get("root_execution_mode"),
        goal_status=record.get("root_goal_status"), created_at=record.get("created_at"),
        tainted=bool(record.get("tainted")), agents=_ordered(agents),
        audit=audit_entries(session_id))


def _ordered(agents: list[AgentView]) -> list[AgentView]:
    """Root first, each worker after its caller, with its depth."""
    children: dict[str, list[AgentView]] = {}
    for agent in agents[1:]:
        children.setdefault(agent.parent or "root", []).append(agent)
    out: list[AgentView] = []

    def visit(agent: AgentView, depth: int) -> None:
        out.append(agent.model_copy(update={"depth": depth}))
        for child in children.get(agent.key, []):
            visit(child, depth + 1)

    visit(agents[0], 0)
    return out


class Archive:
    """Built views of finished sessions, each rebuilt when its record or audit log changed."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._views: dict[str, tuple[Any, SessionView]] = {}

    def view(self, session_id: str) -> SessionView:
        folder = api.session_dir(session_id)
        key = (_stamp(folder / "session.json"), _stamp(folder / "audit.jsonl"))
        with self._lock:
            kept = self._views.get(session_id)
            if kept is not None and kept[0] == key:
                return kept[1]
        built = build(session_id)
        with self._lock:
            if len(self._views) >= KEPT_VIEWS:
                self._views.pop(next(iter(self._views)))
            self._views[session_id] = (key, built)
        return built


__all__ = ["Archive", "audit_entries", "build", "tail_bytes"]

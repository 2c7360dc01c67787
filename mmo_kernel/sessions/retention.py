"""``clean_state``: retention of terminal sessions and jobs (spec 03 "Retention").

Only terminal records are ever removed; a session that is not terminal is
kept however old it is, and a job is kept while its session is live. A
terminal job never outlives its session.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from mmo_kernel.sessions.records import (
    TERMINAL_SESSION_STATUSES,
    read_session_record,
    session_dir,
)
from mmo_kernel.state.files import read_json, runtime_lock, safe_path
from mmo_kernel.state.paths import state_dir
from mmo_kernel.state.processes import process_matches

STALE_COMPILE_SECONDS = 3600.0
"""A ``.compile-*`` staging dir this old was left by a compile that crashed."""

TERMINAL_JOB_STATUSES = frozenset({"completed", "completed_with_warnings", "failed", "cancelled",
                                   "stopped"})


def _older_than(stamp: Any, cutoff: datetime) -> bool:
    if not isinstance(stamp, str):
        return False
    try:
        return datetime.fromisoformat(stamp) < cutoff
    except ValueError:
        return False


def _session_state(session_id: Any) -> str:
    """``gone`` (no session directory), ``terminal``, or ``live``."""
    if not isinstance(session_id, str):
        return "gone"
    try:
        if not session_dir(session_id).exists():
            return "gone"
        return ("terminal" if read_session_record(session_id)["status"]
                in TERMINAL_SESSION_STATUSES else "live")
    except FileNotFoundError:
        return "gone"


def _remove(path: Path) -> None:
    for sub in path.rglob("*"):
        if sub.is_dir() and not sub.is_symlink():
            sub.chmod(0o700)
    shutil.rmtree(path)


def _expired_sessions(cutoff: datetime) -> list[dict[str, Any]]:
    root = safe_path(state_dir(), "sessions", what="sessions directory")
    found = []
    for entry in sorted(root.iterdir()) if root.is_dir() else []:
        try:
            record = read_session_record(entry.name)
        except (FileNotFoundError, ValueError, RuntimeError):
            continue  # never delete what cannot be read: it may be evidence
        if (record["status"] in TERMINAL_SESSION_STATUSES
                and _older_than(record.get("finished_at"), cutoff)
                and _older_than(record.get("last_active_at"), cutoff)):
            found.append({"session_id": entry.name, "status": record["status"],
                          "profile_id": record.get("profile_id"),
                          "finished_at": record.get("finished_at"), "path": str(entry)})
    return found


def _stale_compiles(cutoff: float) -> list[Path]:
    """Staging dirs of snapshot compiles that died before publishing (never a snapshot)."""
    root = safe_path(state_dir(), "snapshots", what="snapshots directory")
    if not root.is_dir():
        return []
    return [entry for entry in sorted(root.glob(".compile-*"))
            if entry.is_dir() and not entry.is_symlink() and entry.stat().st_mtime < cutoff]


def _job_reason(record: dict[str, Any], cutoff: datetime, leaving: set[str]) -> str | None:
    """Why a job goes (None: it stays). Only terminal jobs go, and jobs no one can ever
    continue: their session is gone and no process of theirs runs."""
    if record.get("status") not in TERMINAL_JOB_STATUSES:
        if _session_state(record.get("session_id")) == "gone" and not _runs(record):
            return "its session is gone and nothing runs it"
        return None
    if record.get("session_id") in leaving:
        return "its session is removed"
    state = _session_state(record.get("session_id"))
    if state == "gone":
        return "its session is gone"
    if state == "terminal" and _older_than(record.get("finished_at"), cutoff):
        return "expired"
    return None


def _runs(record: Mapping[str, Any]) -> bool:
    """Whether the job's host or agent server is still alive."""
    return any(process_matches(record.get(pid), record.get(token)) for pid, token in (
        ("runner_pid", "runner_start_token"), ("app_server_pid", "app_server_start_token")))


def _expired_jobs(cutoff: datetime, leaving: set[str]) -> list[dict[str, Any]]:
    root = safe_path(state_dir(), "jobs", what="jobs directory")
    found = []
    for entry in sorted(root.iterdir()) if root.is_dir() else []:
        try:
            record = read_json(entry / "metadata.json")
        except (FileNotFoundError, ValueError):
            continue
        reason = _job_reason(record, cutoff, leaving)
        if reason is not None:
            found.append({"job_id": entry.name, "session_id": record.get("session_id"),
                          "status": record.get("status"), "agent": record.get("agent"),
                          "finished_at": record.get("finished_at"), "reason": reason,
                          "path": str(entry), "record": record})
    return found


def _plan(job_days: float, session_days: float) -> dict[str, list[dict[str, Any]]]:
    if job_days < 0 or session_days < 0:
        raise ValueError("retention days must not be negative")
    now = datetime.now(UTC)
    sessions = _expired_sessions(now - timedelta(days=session_days))
    jobs = _expired_jobs(now - timedelta(days=job_days), {s["session_id"] for s in sessions})
    compiles = [str(p) for p in _stale_compiles(now.timestamp() - STALE_COMPILE_SECONDS)]
    return {"sessions": sessions, "jobs": jobs, "compiles": compiles}


def plan_clean(job_days: float, session_days: float) -> dict[str, list[dict[str, Any]]]:
    """What ``clean_state`` would remove now, without removing anything.

    ``{"sessions": [...], "jobs": [...], "compiles": [paths]}``; each job says
    why it goes (``expired``, ``its session is removed``, ``its session is gone``).
    """
    with runtime_lock():
        plan = _plan(job_days, session_days)
    for job in plan["jobs"]:
        del job["record"]
    return plan


def clean_state(job_days: float, session_days: float, *, job_cleanup: Any = None,
                only: Mapping[str, Iterable[Any]] | None = None) -> dict[str, int]:
    """Remove expired terminal jobs and sessions; returns ``{"jobs": n, "sessions": n}``.

    A terminal job whose session is gone (or goes now) is removed whatever its
    age: nothing could ever read it again. ``job_cleanup(record)`` releases what
    a job owns outside its directory (a writer's worktree) before the directory
    goes. ``only`` (a ``plan_clean`` result the operator confirmed) limits the
    removal to what it lists and still qualifies.
    """
    with runtime_lock():
        plan = _plan(job_days, session_days)
        if only is not None:
            allowed_jobs = {j["job_id"] for j in only.get("jobs", [])}
            allowed_sessions = {s["session_id"] for s in only.get("sessions", [])}
            plan["jobs"] = [j for j in plan["jobs"] if j["job_id"] in allowed_jobs]
            plan["sessions"] = [s for s in plan["sessions"]
                                if s["session_id"] in allowed_sessions]
        for job in plan["jobs"]:
            if job_cleanup is not None:
                job_cleanup(job["record"])
            _remove(Path(job["path"]))
        for session in plan["sessions"]:
            _remove(Path(session["path"]))
        for path in plan["compiles"]:
            _remove(Path(path))
    return {"jobs": len(plan["jobs"]), "sessions": len(plan["sessions"])}

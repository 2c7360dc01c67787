"""``clean_state``: retention of terminal sessions and jobs (spec 03 "Retention").

Only terminal records are ever removed; a session that is not terminal is
kept however old it is, and a job is kept while its session is live.
"""

from __future__ import annotations

import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from mmo_kernel.sessions.records import TERMINAL_SESSION_STATUSES, read_session_record
from mmo_kernel.state.files import read_json, runtime_lock, safe_path
from mmo_kernel.state.paths import state_dir

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


def _session_gone_or_terminal(session_id: Any) -> bool:
    if not isinstance(session_id, str):
        return True
    try:
        return read_session_record(session_id)["status"] in TERMINAL_SESSION_STATUSES
    except FileNotFoundError:
        return True


def _remove(path: Path) -> None:
    for sub in path.rglob("*"):
        if sub.is_dir() and not sub.is_symlink():
            sub.chmod(0o700)
    shutil.rmtree(path)


def _expired_sessions(cutoff: datetime) -> list[Path]:
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
            found.append(entry)
    return found


def _stale_compiles(cutoff: float) -> list[Path]:
    """Staging dirs of snapshot compiles that died before publishing (never a snapshot)."""
    root = safe_path(state_dir(), "snapshots", what="snapshots directory")
    if not root.is_dir():
        return []
    return [entry for entry in sorted(root.glob(".compile-*"))
            if entry.is_dir() and not entry.is_symlink() and entry.stat().st_mtime < cutoff]


def _expired_jobs(cutoff: datetime, cleanup: Any) -> list[Path]:
    root = safe_path(state_dir(), "jobs", what="jobs directory")
    found = []
    for entry in sorted(root.iterdir()) if root.is_dir() else []:
        try:
            record = read_json(entry / "metadata.json")
        except (FileNotFoundError, ValueError):
            continue
        if (record.get("status") in TERMINAL_JOB_STATUSES
                and _older_than(record.get("finished_at"), cutoff)
                and _session_gone_or_terminal(record.get("session_id"))):
            if cleanup is not None:
                cleanup(record)
            found.append(entry)
    return found


def clean_state(job_days: float, session_days: float, *, job_cleanup: Any = None
                ) -> dict[str, int]:
    """Remove expired terminal jobs and sessions; returns ``{"jobs": n, "sessions": n}``.

    ``job_cleanup(record)`` releases what a job owns outside its directory
    (a writer's worktree) before the directory goes.
    """
    if job_days < 0 or session_days < 0:
        raise ValueError("retention days must not be negative")
    now = datetime.now(UTC)
    with runtime_lock():
        jobs = _expired_jobs(now - timedelta(days=job_days), job_cleanup)
        for path in jobs:
            _remove(path)
        sessions = _expired_sessions(now - timedelta(days=session_days))
        for path in sessions:
            _remove(path)
        for path in _stale_compiles(now.timestamp() - STALE_COMPILE_SECONDS):
            _remove(path)
    return {"jobs": len(jobs), "sessions": len(sessions)}

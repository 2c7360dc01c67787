"""Job rows of the listing index, brought in line with the records first.

``refresh_jobs`` stats every ``metadata.json`` (a directory without one is no job
yet) and re-reads the records whose file identity changed; ``job_rows`` then
serves a filtered, newest-first selection from the index. Reconciliation is
``jobs.listing``'s.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Any

from mmo_kernel.jobs.index_rows import job_row, session_profile
from mmo_kernel.jobs.records import jobs_root, read_job_record
from mmo_kernel.state import index


def _scan() -> dict[str, index.Identity | None]:
    found, odd = index.scan(jobs_root(), "metadata.json")
    for entry in odd:
        if not os.path.exists(f"{entry.path}/metadata.json"):
            del found[entry.name]  # no record (yet): not a job
    return found


def raw_identity(job_id: str) -> dict[str, Any]:
    """What an unreadable record still says about its session and creation time."""
    from mmo_kernel.state.files import read_json

    try:
        raw = read_json(jobs_root() / job_id / "metadata.json")
    except (ValueError, RuntimeError, OSError):
        raw = None
    raw = raw if isinstance(raw, dict) else {}
    return {k: raw.get(k) if isinstance(raw.get(k), str) else d
            for k, d in (("session_id", None), ("created_at", ""))}


def _reader() -> index.ReadRow:
    profiles: dict[str, str | None] = {}

    def profile_of(session_id: str) -> str | None:
        if session_id not in profiles:
            profiles[session_id] = session_profile(session_id)
        return profiles[session_id]

    def read_row(job_id: str) -> dict[str, Any] | None:
        try:
            return job_row(read_job_record(job_id), profile_of)
        except FileNotFoundError as exc:
            if not os.path.lexists(jobs_root() / job_id):
                return None  # removed meanwhile
            return {**raw_identity(job_id), "error": str(exc), "error_kind": "missing"}
        except (ValueError, RuntimeError, OSError) as exc:
            return {**raw_identity(job_id), "error": str(exc), "error_kind": "invalid"}

    return read_row


def refresh_jobs(force: bool = False) -> index.RefreshStats:
    """Bring the job rows in line with the records on disk (see ``state.index``)."""
    return index.refresh("job", _scan(), _reader(), force=force)


def invalid_state(row: index.IndexRow) -> RuntimeError:
    """What a strict reader raises for an unreadable record (as ``iter_job_records``)."""
    return RuntimeError(f"invalid job state in {jobs_root() / row.id}: {row.error}")


def unreadable(row: index.IndexRow) -> dict[str, Any]:
    """The listing row of an unreadable record (``state.records.unreadable_row``)."""
    from mmo_kernel.state.records import unreadable_row

    exc: Exception = (FileNotFoundError(row.error) if row.error_kind == "missing"
                      else ValueError(row.error))
    return unreadable_row("job_id", row.id, jobs_root() / row.id / "metadata.json", exc,
                          session_id=row.session_id, created_at=row.created_at)


def job_rows(*, session_id: str | None = None, statuses: Collection[str] | None = None,
             agent: str | None = None, profile: str | None = None, since: str | None = None,
             errors: bool = False, reconcilable: bool = True,
             batch: int | None = None) -> Iterator[index.IndexRow]:
    """Indexed jobs, newest first, filtered in the index; rows that a reconciliation may
    still move are kept whatever their status (the caller filters them after
    reconciling). ``errors``: only the rows of unreadable records; ``batch``: fetch that
    many rows at a time (a limited listing), else all at once."""
    query = index.Query("job", session_id=session_id,
                        statuses=None if statuses is None else sorted(statuses), agent=agent,
                        profile_id=profile, since=since, errors=errors,
                        reconcilable=reconcilable)
    return index.iterate(query, batch)


def rebuild_index() -> dict[str, int]:
    """Remove the listing index and build it again from every session and job record
    (``mmo doctor --reindex``); returns ``{"sessions", "jobs", "unreadable"}`` counts."""
    from mmo_kernel.sessions.indexed import refresh_sessions

    def rebuild() -> dict[str, int]:
        sessions, _ = refresh_sessions(force=True)
        jobs = refresh_jobs(force=True)
        bad = sum(1 for kind in index.KINDS
                  for _ in index.iterate(index.Query(kind, errors=True)))
        return {"sessions": sessions.rows, "jobs": jobs.rows, "unreadable": bad}

    index.reset()
    return index.attempt(rebuild)


def record_path(job_id: str) -> Path:
    return jobs_root() / job_id / "metadata.json"


__all__ = ["invalid_state", "job_rows", "rebuild_index", "record_path", "refresh_jobs",
           "unreadable"]

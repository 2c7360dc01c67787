"""Pure reads of jobs: the status a reconciling read would report, with nothing written.

Why: ``load_job`` and ``list_jobs`` repair what they find (a job whose host died is
suspended on disk, its app-server killed, a partial result written, the listing
index refreshed), so a viewer refreshing every second would write all the time. These
reads take the same decision (``listing.job_verdict``: the recorded processes' pid and
start token, checked) and only report it: no record, partial result, audit line, lock
file or index row is created or changed, and no process is signalled.
"""

from __future__ import annotations

import os
from collections.abc import Collection
from typing import Any

from mmo_kernel.jobs.indexed import raw_identity, record_path
from mmo_kernel.jobs.listing import job_verdict, reconciled_record
from mmo_kernel.jobs.records import JOB_STATUSES, jobs_root, read_job_record
from mmo_kernel.state import index
from mmo_kernel.state.records import is_unreadable, unreadable_row


def peek_job_record(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` as a reconciling read would return it, plus ``reconcile_pending`` (True:
    the stored record is stale, the next reconciling read writes what this shows) and
    ``stored_status`` (the status on disk)."""
    verdict = job_verdict(record)
    shown = record if verdict is None else reconciled_record(record, verdict)
    return {**shown, "reconcile_pending": verdict is not None,
            "stored_status": record["status"]}


def peek_job(job_id: str) -> dict[str, Any]:
    """``load_job`` without its writes (see ``peek_job_record``); a missing, torn or invalid
    record raises exactly what ``load_job`` raises. An interrupted integration is not
    settled here: settling it changes the workspace, never the job record."""
    return peek_job_record(read_job_record(job_id))


def _job_ids() -> list[str]:
    """The directories under ``jobs/`` that hold a record file (the others are no job yet)."""
    root = jobs_root()
    try:
        names = os.listdir(root)
    except FileNotFoundError:
        return []
    return [n for n in names if n[0] != "." and os.path.lexists(root / n / "metadata.json")]


def _read(job_id: str, include_unreadable: bool) -> dict[str, Any] | None:
    """One listed job, peeked; an unreadable record is an ``unreadable`` row (or raises
    ``invalid job state``, as ``list_jobs``); None when it was removed meanwhile."""
    try:
        return peek_job_record(read_job_record(job_id))
    except FileNotFoundError as exc:
        if not os.path.lexists(jobs_root() / job_id):
            return None
        error: Exception = exc
    except (ValueError, RuntimeError, OSError) as exc:
        error = exc
    if not include_unreadable:
        raise RuntimeError(f"invalid job state in {jobs_root() / job_id}: {error}") from error
    return unreadable_row("job_id", job_id, record_path(job_id), error, **raw_identity(job_id))


def peek_jobs(session_id: str | None = None, include_unreadable: bool = False, *,
              status: str | Collection[str] | None = None) -> list[dict[str, Any]]:
    """``list_jobs`` without its writes: every job (of one session; whose peeked status is
    in ``status``), newest first, each as ``peek_job_record`` shows it.

    It reads the record files themselves, not the listing index (refreshing that is a
    write). Unreadable records as in ``list_jobs``: ``invalid job state`` raised, or with
    ``include_unreadable`` ``unreadable`` rows, kept by every filter but the session's.
    """
    wanted = index.statuses_arg(status, JOB_STATUSES, "job")
    rows = [row for row in (_read(job_id, include_unreadable) for job_id in _job_ids())
            if row is not None]
    if session_id is not None:
        rows = [row for row in rows if row.get("session_id") == session_id]
    if wanted is not None:
        rows = [row for row in rows if row["status"] in wanted or is_unreadable(row)]
    return sorted(rows, key=lambda r: (r.get("created_at") or "", r["job_id"]), reverse=True)


__all__ = ["peek_job", "peek_job_record", "peek_jobs"]

"""What the listing index (``mmo_kernel.state.index``) holds for a job.

A job's row: ids, agent, profile (its own, else its session's), cwd, status,
creation time, progress revision, result state and the host identity that
``reconcile_job`` looks at. ``reconcile`` is set for the rows a reconciling read
may still change, the only ones a listing reconciles. ``write_job_record``
publishes the row right after the record's atomic write.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from mmo_kernel.state import index

RECONCILED_JOB_STATUSES = frozenset({"queued", "running", "waiting", "detached"})
"""The statuses ``reconcile_job`` may move a job out of (never launched, runner lost);
the same set as ``jobs.records.ACTIVE_JOB_STATUSES``. A pending cold pause is the other case."""
HOST_FIELDS = ("runner_pid", "runner_start_token", "app_server_pid", "app_server_start_token",
               "cold_pause_pending")
SUMMARY_KEYS = ("job_id", "session_id", "agent", "profile_id", "cwd", "status", "created_at",
                "updated_at", "progress_revision", "result_state")
"""What a summary (``list_jobs(summary=True)``) holds: these record fields, ``updated_at``
being the record file's time; every key is present, None where the record has none. In
the order of ``state.index.IndexRow``'s first fields, so a summary is a zip."""
SUMMARY_FIELDS = tuple(k for k in SUMMARY_KEYS if k != "updated_at")

SessionProfile = Callable[[str], str | None]


def session_profile(session_id: str) -> str | None:
    """The profile of a job's session, for records that do not name their own."""
    from mmo_kernel.sessions.records import read_session_record

    try:
        return read_session_record(session_id)["profile_id"]
    except (FileNotFoundError, ValueError, RuntimeError, OSError):
        return None


def job_row(record: Mapping[str, Any],
            profile_of: SessionProfile = session_profile) -> dict[str, Any]:
    status = record.get("status")
    profile = record.get("profile_id")
    if not profile and isinstance(record.get("session_id"), str):
        profile = profile_of(record["session_id"])
    return {
        "session_id": record.get("session_id"), "agent": record.get("agent"),
        "profile_id": profile, "cwd": record.get("cwd"), "status": status,
        "created_at": record.get("created_at"),
        "progress_revision": record.get("progress_revision"),
        "result_state": record.get("result_state"),
        "reconcile": status in RECONCILED_JOB_STATUSES or bool(record.get("cold_pause_pending")),
        "host": {k: record[k] for k in HOST_FIELDS if record.get(k) is not None},
    }


def summary(row: index.IndexRow) -> dict[str, Any]:
    """The public summary of an indexed job (``SUMMARY_KEYS``)."""
    return dict(zip(SUMMARY_KEYS, row, strict=False))  # the first fields of the row


def record_summary(record: Mapping[str, Any], path: Path,
                   profile_of: SessionProfile = session_profile) -> dict[str, Any]:
    """The summary of a record just read (and maybe reconciled), with its file's time."""
    values = {k: record.get(k) for k in SUMMARY_FIELDS}
    if not values["profile_id"] and isinstance(record.get("session_id"), str):
        values["profile_id"] = profile_of(record["session_id"])
    values["updated_at"] = index.identity_time(index.identity(path))
    return {k: values[k] for k in SUMMARY_KEYS}


def publish_job(record: Mapping[str, Any], path: Path) -> None:
    """Publish the row of the job record just written to ``path`` (never raises)."""
    try:
        row = job_row(record)
    except Exception as exc:  # noqa: BLE001 - the record is written; the index catches up
        index.warn("listing index row of job %s not built (%s)", record.get("job_id"), exc)
        index.mark_stale("job")
        return
    index.publish("job", str(record.get("job_id")), path, row)

"""What the listing index (``mmo_kernel.state.index``) holds for a session.

A session's row: its id, root agent, profile, cwd, status, creation time and the
host identity ``reconcile`` looks at; ``reconcile`` is set for the rows whose
status a reconciling read may still change (``load_session``), the only ones a
listing reconciles. ``write_session_record`` publishes the row right after the
record's atomic write.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mmo_kernel.state import index

RECONCILED_SESSION_STATUSES = frozenset({"starting", "running", "detached"})
"""The statuses ``sessions.state.reconcile`` acts on (a dead host makes them move)."""
HOST_FIELDS = ("root_pid", "root_start_token", "root_client_pid", "root_client_start_token",
               "root_app_server_pid", "root_app_server_start_token", "session_kind",
               "run_created_at", "cold_pause_pending")
SUMMARY_KEYS = ("session_id", "root_agent", "profile_id", "cwd", "status", "created_at",
                "updated_at")
"""What a summary (``iter_sessions(summary=True)``) holds: these record fields,
``updated_at`` being the record file's time; every key is present, None where the record
has none."""
SUMMARY_FIELDS = tuple(k for k in SUMMARY_KEYS if k != "updated_at")

def session_row(record: Mapping[str, Any]) -> dict[str, Any]:
    status = record.get("status")
    return {
        "session_id": record.get("session_id"), "agent": record.get("root_agent"),
        "profile_id": record.get("profile_id"), "cwd": record.get("cwd"), "status": status,
        "created_at": record.get("created_at"),
        "reconcile": status in RECONCILED_SESSION_STATUSES
        or bool(record.get("cold_pause_pending")),
        "host": {k: record[k] for k in HOST_FIELDS if record.get(k) is not None},
    }


def summary(row: index.IndexRow) -> dict[str, Any]:
    """The public summary of an indexed session (``SUMMARY_KEYS``)."""
    return dict(zip(SUMMARY_KEYS, (row.id, *row[2:8]), strict=True))


def record_summary(record: Mapping[str, Any], path: Path) -> dict[str, Any]:
    """The summary of a record just read (and maybe reconciled), with its file's time."""
    values = {k: record.get(k) for k in SUMMARY_FIELDS}
    values["updated_at"] = index.identity_time(index.identity(path))
    return {k: values[k] for k in SUMMARY_KEYS}


def publish_session(record: Mapping[str, Any], path: Path) -> None:
    """Publish the row of the session record just written to ``path`` (never raises)."""
    index.publish("session", str(record.get("session_id")), path, session_row(record))

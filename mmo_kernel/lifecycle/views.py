"""Read-side views of sessions: enumeration, public records, runs, the root capability."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Any

from mmo_kernel import package_version
from mmo_kernel.sessions.records import (
    installed_root_host,
    read_run_record,
    run_ids,
    session_dir,
)


def public_session(record: dict[str, Any]) -> dict[str, Any]:
    """The record plus ``runtime_current``: is its host running the installed code?"""
    return {**record, "runtime_current": _runtime_current(record)}


def _runtime_current(record: dict[str, Any]) -> bool:
    try:
        if record.get("package_version") != package_version():
            return False
        if record.get("root_host_package_version") not in (None, package_version()):
            return False
        recorded = record.get("root_host_runtime_digest")
        if recorded is None:
            return True
        from mmo_kernel.plugin.manager import execution_host

        host = execution_host(root_host_name(record))
        return recorded == host.runtime_digest()
    except Exception:  # an unreadable digest means "not current", never an error
        return False


def root_host_name(record: dict[str, Any]) -> str:
    """The execution host of the session's root: its ``root_execution_host``, which must be
    installed (``root execution host is invalid`` otherwise).

    A record from before sessions recorded it runs on its root agent's profile host.
    """
    if record.get("root_execution_host"):
        return installed_root_host(record)
    from mmo_kernel.profiles.snapshots import snapshot_profile

    return snapshot_profile(record["snapshot_hash"]).agents[record["root_agent"]].host


def iter_sessions(all_sessions: bool = True, include_unreadable: bool = False, *,
                  status: str | Collection[str] | None = None, agent: str | None = None,
                  profile: str | None = None, since: str | datetime | None = None,
                  limit: int | None = None, summary: bool = False) -> list[dict[str, Any]]:
    """Sessions, newest first, each reconciled with the processes that exist.

    Served from the listing index (``state.index``; every record file is stat'ed and the
    changed ones re-read first). ``all_sessions=False`` leaves out finished sessions;
    ``status`` (one or several) keeps only those statuses, finished ones included;
    ``agent`` (the root agent), ``profile`` and ``since`` (``created_at`` at or after an
    ISO time) filter; ``limit`` keeps the newest N. Only the rows whose status a
    reconciliation may change are reconciled. ``summary=True`` returns summaries
    (``session_id``, ``root_agent``, ``profile_id``, ``cwd``, ``status``, ``created_at``,
    ``updated_at``) without reading the records that need no reconciliation.

    With ``include_unreadable`` a record that cannot be read (or reconciled) is an
    ``unreadable`` row (``state.records.unreadable_row``), kept by every filter and
    beyond the limit; without it such a record raises ``invalid session state``.
    """
    from mmo_kernel.lifecycle.session_listing import list_sessions

    return list_sessions(all_sessions, include_unreadable, status=status, agent=agent,
                         profile=profile, since=since, limit=limit, summary=summary)


def root_mcp_token(session_id: str) -> str:
    """The root MCP capability; the capabilities file is its only source of truth."""
    from mmo_kernel.mesh.capabilities import CapabilityUnavailable, read_capabilities

    try:
        return read_capabilities(session_dir(session_id)).root_mcp_token
    except CapabilityUnavailable as exc:
        raise RuntimeError(str(exc)) from None


def iter_session_runs(session_id: str) -> list[dict[str, Any]]:
    return [read_run_record(session_id, run_id) for run_id in run_ids(session_id)]


def load_session_run(session_id: str, run_id: str | None = None) -> dict[str, Any]:
    """The named run (default: the session's current or last run), and only it.

    Reading never checks the run directories beside it: only a resume refuses
    an inventory other than exactly the one active run (spec 03 "Runs").
    """
    if run_id is None:
        from mmo_kernel.sessions.records import read_session_record, session_run_id

        run_id = session_run_id(read_session_record(session_id))
        if not run_id:
            raise FileNotFoundError(f"session {session_id} names no run")
    try:
        return read_run_record(session_id, run_id)
    except FileNotFoundError:
        raise FileNotFoundError(f"session {session_id} has no run {run_id!r}") from None

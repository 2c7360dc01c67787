"""``iter_sessions`` served from the listing index (``mmo_kernel.state.index``).

The index is refreshed first (a stat per record; changed records are re-read),
then rows are taken newest first and filtered there; only rows whose status a
reconciling read may still change (``starting``, ``running``, ``detached``, a
pending cold pause) are loaded and reconciled (``load_session``), and filtered
again afterwards. The others are read as they are (the bytes the index row was
built from, so no second validation) or, with ``summary``, not read at all.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from pathlib import Path
from typing import Any, get_args

from mmo_kernel.sessions.index_rows import record_summary, summary
from mmo_kernel.sessions.indexed import (
    check_strays,
    invalid_state,
    refresh_sessions,
    session_rows,
    unreadable,
)
from mmo_kernel.sessions.records import (
    TERMINAL_SESSION_STATUSES,
    SessionStatus,
    read_session_record,
    sessions_root,
)
from mmo_kernel.state import index

PAGE_SLACK = 16
"""Rows a limited listing fetches beyond its limit, for those a reconciliation filters out."""


def _load(session_id: str) -> dict[str, Any]:
    from mmo_kernel.lifecycle.controls import load_session

    return load_session(session_id)


def _record(row: index.IndexRow, path: str) -> dict[str, Any]:
    """The record of a row no reconciliation can change: the indexed bytes, else read."""
    ident = row.identity
    if ident is not None:
        doc = index.load_unchanged(path, ident)
        if doc is not None:
            return doc
    return read_session_record(row.id)


def _listed(record: dict[str, Any], all_sessions: bool, wanted: frozenset[str] | None) -> bool:
    status = record["status"]
    if wanted is not None:
        return status in wanted
    return all_sessions or status not in TERMINAL_SESSION_STATUSES


def _collect(*, all_sessions: bool, include_unreadable: bool, wanted: frozenset[str] | None,
             agent: str | None, profile: str | None, since: str | None, limit: int | None,
             summary_only: bool) -> list[dict[str, Any]]:
    _, scan = refresh_sessions()
    errors = list(session_rows(errors=True))
    if not include_unreadable:
        check_strays(scan)
        if errors:
            raise invalid_state(errors[0])
    sql_statuses = wanted
    if sql_statuses is None and not all_sessions:
        sql_statuses = frozenset(get_args(SessionStatus)) - TERMINAL_SESSION_STATUSES
    root = str(sessions_root())
    out: list[dict[str, Any]] = []
    rows = session_rows(statuses=sql_statuses, agent=agent, profile=profile, since=since,
                        batch=None if limit is None else limit + PAGE_SLACK)
    for row in rows:
        if limit is not None and len(out) >= limit:
            break
        if summary_only and not row.reconcile:
            out.append(summary(row))  # filtered in the index already
            continue
        path = f"{root}/{row.id}/session.json"
        try:
            record = _load(row.id) if row.reconcile else _record(row, path)
        except FileNotFoundError:
            continue  # removed meanwhile
        except (ValueError, RuntimeError, OSError) as exc:
            if not include_unreadable:
                raise
            from mmo_kernel.state.records import unreadable_row

            out.append(unreadable_row("session_id", row.id, Path(path), exc))
            continue
        if _listed(record, all_sessions, wanted):
            out.append(record_summary(record, Path(path)) if summary_only else record)
    if not errors:
        return out  # the index's order
    return sorted(out + [unreadable(row) for row in errors], key=lambda r: r["session_id"],
                  reverse=True)


def list_sessions(all_sessions: bool = True, include_unreadable: bool = False, *,
                  status: str | Collection[str] | None = None, agent: str | None = None,
                  profile: str | None = None, since: str | datetime | None = None,
                  limit: int | None = None, summary: bool = False) -> list[dict[str, Any]]:
    """See ``lifecycle.views.iter_sessions``."""
    wanted = index.statuses_arg(status, get_args(SessionStatus), "session")
    after, most = index.since_arg(since), index.limit_arg(limit)
    return index.attempt(lambda: _collect(
        all_sessions=all_sessions, include_unreadable=include_unreadable, wanted=wanted,
        agent=agent, profile=profile, since=after, limit=most, summary_only=summary))

__all__ = ["list_sessions"]

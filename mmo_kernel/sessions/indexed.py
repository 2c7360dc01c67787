"""Session rows of the listing index, brought in line with the records first.

``refresh_sessions`` stats every ``session.json`` (a directory still being
created is no session yet) and re-reads the records whose file identity changed;
``session_page`` then serves a filtered, newest-first selection from the index.
Reconciliation is the lifecycle layer's (``iter_sessions``).
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from typing import Any

from mmo_kernel.sessions.index_rows import session_row
from mmo_kernel.sessions.records import (
    CREATING_MARKER,
    read_session_record,
    session_file,
    sessions_root,
)
from mmo_kernel.state import index


@dataclass
class SessionScan:
    """What is on disk: record ids with their file identity, and stray entries (files that
    are no session directory) a strict listing refuses like a bad record."""

    found: dict[str, index.Identity | None] = field(default_factory=dict)
    strays: list[str] = field(default_factory=list)


def _scan() -> SessionScan:
    found, odd = index.scan(sessions_root(), "session.json")
    strays = [entry.name for entry in odd if not entry.is_dir()]
    for name in strays:
        del found[name]
    root = str(sessions_root())
    creating = [name for name in found if os.path.exists(f"{root}/{name}/{CREATING_MARKER}")]
    for name in creating:
        del found[name]  # a session still being created
    return SessionScan(found, strays)


def _read_row(session_id: str) -> dict[str, Any] | None:
    try:
        return session_row(read_session_record(session_id))
    except FileNotFoundError as exc:
        if not os.path.lexists(sessions_root() / session_id):
            return None  # removed meanwhile
        return {"session_id": session_id, "error": str(exc), "error_kind": "missing"}
    except (ValueError, RuntimeError, OSError) as exc:
        return {"session_id": session_id, "error": str(exc), "error_kind": "invalid"}


def refresh_sessions(force: bool = False) -> tuple[index.RefreshStats, SessionScan]:
    """Bring the session rows in line with the records on disk (see ``state.index``)."""
    scan = _scan()
    return index.refresh("session", scan.found, _read_row, force=force), scan


def invalid_state(row: index.IndexRow) -> RuntimeError:
    """What a strict reader raises for an unreadable record (as ``iter_session_records``)."""
    return RuntimeError(f"invalid session state in {sessions_root() / row.id}: {row.error}")


def unreadable(row: index.IndexRow) -> dict[str, Any]:
    """The listing row of an unreadable record (``state.records.unreadable_row``)."""
    from mmo_kernel.state.records import unreadable_row

    exc: Exception = (FileNotFoundError(row.error) if row.error_kind == "missing"
                      else ValueError(row.error))
    return unreadable_row("session_id", row.id, session_file(row.id, "session.json"), exc)


def check_strays(scan: SessionScan) -> None:
    """A strict listing refuses a stray entry the way ``iter_session_records`` does."""
    for name in scan.strays:
        try:
            read_session_record(name)
        except (ValueError, RuntimeError, FileNotFoundError, OSError) as exc:
            raise RuntimeError(f"invalid session state in {sessions_root() / name}: "
                               f"{exc}") from exc


def session_rows(*, statuses: Collection[str] | None = None, agent: str | None = None,
                 profile: str | None = None, since: str | None = None,
                 errors: bool = False, batch: int | None = None) -> Iterator[index.IndexRow]:
    """Indexed sessions, highest (newest) id first, filtered in the index; rows that a
    reconciliation may still move are kept whatever their status (the caller filters
    them after reconciling). ``errors``: only the rows of unreadable records; ``batch``:
    fetch that many rows at a time (a limited listing), else all at once."""
    query = index.Query("session", statuses=None if statuses is None else sorted(statuses),
                        agent=agent, profile_id=profile, since=since, errors=errors,
                        order="id")
    return index.iterate(query, batch)


__all__ = ["SessionScan", "check_strays", "invalid_state", "refresh_sessions", "session_rows",
           "unreadable"]

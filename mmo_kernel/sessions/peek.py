"""Pure reads of sessions: the status a reconciling read would report, nothing written.

Why: ``load_session`` and ``iter_sessions`` repair what they find (a session whose root
host died is suspended on disk with its run, an interrupted cold pause is finished, the
listing index is refreshed), so a viewer refreshing every second would write all the
time. These reads take the same decision (``state.session_verdict``: the recorded
processes' pid and start token, checked) and only report it: no record, run, partial
result, audit line, lock file or index row is created or changed, and no process is
signalled.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, get_args

from mmo_kernel.sessions.records import SessionStatus, iter_session_records, read_session_record
from mmo_kernel.sessions.state import reconciled_session, session_verdict
from mmo_kernel.state import index
from mmo_kernel.state.records import is_unreadable


def peek_session_record(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` as a reconciling read would return it, plus ``reconcile_pending`` (True:
    the stored record is stale, the next reconciling read writes what this shows) and
    ``stored_status`` (the status on disk)."""
    verdict = session_verdict(record)
    shown = record if verdict is None else reconciled_session(record, verdict)
    return {**shown, "reconcile_pending": verdict is not None,
            "stored_status": record["status"]}


def peek_session(session_id: str) -> dict[str, Any]:
    """``load_session`` without its writes (see ``peek_session_record``); a missing, torn or
    invalid record raises exactly what ``load_session`` raises."""
    return peek_session_record(read_session_record(session_id))


def peek_sessions(include_unreadable: bool = False, *,
                  status: str | Collection[str] | None = None) -> list[dict[str, Any]]:
    """``iter_sessions`` without its writes: every session (whose peeked status is in
    ``status``), newest first, each as ``peek_session_record`` shows it.

    It reads the record files themselves, not the listing index (refreshing that is a
    write). Unreadable records as in ``iter_sessions``: ``invalid session state`` raised,
    or with ``include_unreadable`` ``unreadable`` rows, kept by every filter.
    """
    wanted = index.statuses_arg(status, get_args(SessionStatus), "session")
    rows = [row if is_unreadable(row) else peek_session_record(row)
            for row in iter_session_records(include_unreadable)]
    if wanted is None:
        return rows
    return [row for row in rows if row["status"] in wanted or is_unreadable(row)]


__all__ = ["peek_session", "peek_session_record", "peek_sessions"]

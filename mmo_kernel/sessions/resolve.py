"""``resolve_resume_session``: which session ``mmo resume [SESSION|THREAD] [--last]`` means.

SESSION may be a full session id, a root thread id, or a unique session id prefix.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from mmo_kernel.sessions.ids import resolve_session_id
from mmo_kernel.sessions.records import (
    TERMINAL_SESSION_STATUSES,
    check_record_id,
    iter_session_records,
    read_session_record,
)


def _resumable(record: dict[str, Any]) -> bool:
    """Only a live (non-terminal) session with a bound root thread can be resumed."""
    return bool(record.get("root_thread_id")) and record["status"] not in TERMINAL_SESSION_STATUSES


def _existing(session_id: str, selector: str) -> str | None:
    """``session_id`` when it names a session with a bound root thread; None when absent."""
    try:
        record = read_session_record(check_record_id(session_id, "session"))
    except FileNotFoundError:
        return None
    if not record.get("root_thread_id"):
        raise FileNotFoundError(f"no resumable MMO session {selector!r}: it has no "
                                "bound root thread yet")
    return session_id


def _by_selector(selector: str) -> str:
    found = _existing(selector, selector)
    if found is not None:
        return found
    matches = [r["session_id"] for r in iter_session_records()
               if r.get("root_thread_id") == selector]
    if len(matches) > 1:
        raise RuntimeError(f"thread {selector!r} identifies multiple MMO sessions: "
                           f"{', '.join(matches)}; pass a session id")
    if not matches:
        return _by_prefix(selector)
    return matches[0]


def _by_prefix(selector: str) -> str:
    """A unique session id prefix (an ambiguous one lists the candidates)."""
    unknown = FileNotFoundError(f"no resumable MMO session or root thread {selector!r}: no "
                                "such session or thread (see `mmo sessions --all`)")
    try:
        session_id = resolve_session_id(selector)
    except FileNotFoundError:
        raise unknown from None
    found = _existing(session_id, selector)
    if found is None:
        raise unknown
    return found


def _last(cwd: str | os.PathLike[str] | None, all_cwds: bool) -> str:
    records = iter_session_records()  # an invalid record anywhere fails: invalid session state
    where = str(Path(cwd if cwd is not None else os.getcwd()).resolve())
    candidates = [r for r in records if _resumable(r) and (all_cwds or r["cwd"] == where)]
    if not candidates:
        scope = "in any directory" if all_cwds else f"in {where}"
        raise FileNotFoundError(f"no resumable MMO session {scope}")
    newest = max(candidates, key=lambda r: (r.get("last_active_at") or r["created_at"],
                                            r["session_id"]))
    return newest["session_id"]


def resolve_resume_session(selector: str | None = None, last: bool = False,
                           cwd: str | os.PathLike[str] | None = None,
                           all_cwds: bool = False) -> str:
    """A session id from a session id, a root thread id, or ``last`` (newest resumable
    session whose cwd equals ``cwd`` exactly unless ``all_cwds``)."""
    if selector is not None and last:
        raise ValueError("a session/thread selector and last=True cannot be combined")
    if selector is not None:
        if not isinstance(selector, str) or not selector.strip():
            raise ValueError("selector must be a non-empty session id or root thread id")
        return _by_selector(selector.strip())
    if not last:
        raise ValueError("pass a session id or root thread id, or last=True")
    return _last(cwd, all_cwds)


__all__ = ["resolve_resume_session"]

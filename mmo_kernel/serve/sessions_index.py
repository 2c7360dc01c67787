"""The server's session index, refs and process-job index (spec 12 "Projects and sessions").

The server is the system of record for which user owns which session and job, and for
the short refs (``~p<n>``, ``~s<n>``) it issues per user: they must survive restarts,
so everything lives in JSON files under the server state dir, written atomically
under one file lock (``StateFile``), read back on every call (no cache to go stale
when a second process shares the dir).
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from filelock import FileLock

from mmo_kernel.state.files import atomic_write_json, read_json
from mmo_kernel.state.paths import ensure_private_dir

SESSION_PREFIX = "mmo_sess_"
PROJECT_PREFIX = "runner:"
PROJECT_REF = re.compile(r"^~p([1-9][0-9]{0,9})$")
SESSION_REF = re.compile(r"^~s([1-9][0-9]{0,9})$")
RAW_SESSION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
PROJECT_ID = re.compile(r"^runner:([a-z0-9][a-z0-9_-]{0,63}):([a-z0-9][a-z0-9_-]{0,63})$")
ADMIN_KEY = "@admin"
"""Ref book of the admin token (no user): refs are per user, so the admin gets its own."""


def now_ms() -> int:
    return int(time.time() * 1000)


class StateFile:
    """One JSON document under the server state dir: read, or changed under a lock.

    ``transaction()`` holds ``<name>.lock`` (threads and processes), yields the parsed
    document and writes it back atomically (``0600``, known credential values redacted)
    when the block changed it and ended without an exception; an exception leaves the
    file exactly as it was.
    """

    _guard = threading.Lock()
    _locks: dict[str, FileLock] = {}

    def __init__(self, path: Path, empty: dict[str, Any]) -> None:
        self.path = Path(path)
        self._empty = empty

    def _lock(self) -> FileLock:
        key = str(self.path.absolute())
        with StateFile._guard:
            lock = StateFile._locks.get(key)
            if lock is None:
                lock = FileLock(key + ".lock", mode=0o600)
                StateFile._locks[key] = lock
            return lock

    def read(self) -> dict[str, Any]:
        try:
            data = read_json(self.path)
        except FileNotFoundError:
            return _copy(self._empty)
        if not isinstance(data, dict):
            raise ValueError(f"{self.path}: unreadable JSON record (not an object)")
        return data

    @contextmanager
    def transaction(self) -> Iterator[dict[str, Any]]:
        ensure_private_dir(self.path.parent)
        with self._lock():
            data = self.read()
            before = _copy(data)
            yield data
            if data != before:
                atomic_write_json(self.path, data)


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def public_session_id(raw: str) -> str:
    return SESSION_PREFIX + raw


def raw_session_id(public: str) -> str | None:
    """``mmo_sess_<raw>`` -> ``<raw>``; anything else None."""
    if not public.startswith(SESSION_PREFIX):
        return None
    raw = public[len(SESSION_PREFIX):]
    return raw if RAW_SESSION.match(raw) else None


def split_project_id(project_id: str) -> tuple[str, str] | None:
    """``runner:<client_id>:<id>`` -> ``(client_id, id)``; anything else None."""
    match = PROJECT_ID.match(project_id)
    return (match.group(1), match.group(2)) if match else None


def project_id_of(client_id: str, local_id: str) -> str:
    return f"{PROJECT_PREFIX}{client_id}:{local_id}"


def _user_key(user: str | None) -> str:
    return ADMIN_KEY if user is None else user


class SessionsIndex:
    """Refs per user, the session index and the process-job index of one server."""

    def __init__(self, state_dir: Path) -> None:
        root = Path(state_dir)
        os.makedirs(root, mode=0o700, exist_ok=True)
        self._refs = StateFile(root / "refs.json", {"schema_version": 1, "users": {}})
        self._sessions = StateFile(root / "sessions.json", {"schema_version": 1, "sessions": {}})
        self._jobs = StateFile(root / "process-jobs.json", {"schema_version": 1, "jobs": {}})

    # ------------------------------------------------------------------ refs --

    def _issue(self, user: str | None, kind: str, target: str) -> str:
        """The ref of ``target`` for ``user``, issued on first sight, never reissued."""
        book = self._refs.read()["users"].get(_user_key(user), {})
        known = book.get(kind, {}).get(target)
        if known:
            return str(known)
        with self._refs.transaction() as data:
            book = data["users"].setdefault(_user_key(user), {})
            refs = book.setdefault(kind, {})
            if target not in refs:
                counter = f"next_{kind}"
                number = int(book.get(counter, 1))
                refs[target] = f"~{kind[0]}{number}"
                book[counter] = number + 1
            return str(refs[target])

    def project_ref(self, user: str | None, project_id: str) -> str:
        return self._issue(user, "projects", project_id)

    def session_ref(self, user: str | None, session_id: str) -> str:
        return self._issue(user, "sessions", session_id)

    def _lookup(self, user: str | None, kind: str, ref: str) -> str | None:
        refs = self._refs.read()["users"].get(_user_key(user), {}).get(kind, {})
        for target, issued in refs.items():
            if issued == ref:
                return str(target)
        return None

    def project_for_ref(self, user: str | None, ref: str) -> str | None:
        """The project id ``~p<n>`` stands for in ``user``'s book, or None."""
        return self._lookup(user, "projects", ref) if PROJECT_REF.match(ref) else None

    def session_for_ref(self, user: str | None, ref: str) -> str | None:
        """The public session id ``~s<n>`` stands for in ``user``'s book, or None."""
        return self._lookup(user, "sessions", ref) if SESSION_REF.match(ref) else None

    # -------------------------------------------------------------- sessions --

    def register_session(self, *, raw_id: str, user: str, client_id: str, project: str,
                         instruction: str) -> dict[str, Any]:
        """Record (or, on an explicit resume, refresh) the session's owner and instruction."""
        stamp = now_ms()
        with self._sessions.transaction() as data:
            row = data["sessions"].get(raw_id)
            if row is None:
                row = {"user": user, "client_id": client_id, "project": project,
                       "created_at_unix_ms": stamp}
                data["sessions"][raw_id] = row
            row["instruction"] = instruction
            row["updated_at_unix_ms"] = stamp
            return dict(row)

    def session(self, raw_id: str) -> dict[str, Any] | None:
        row = self._sessions.read()["sessions"].get(raw_id)
        return dict(row) if isinstance(row, dict) else None

    # ------------------------------------------------------------------ jobs --

    def record_job(self, job_id: str, *, client_id: str, user: str | None,
                   session: str | None, project: str | None) -> None:
        """Remember which runner, user and session a process job belongs to.

        A ``job_event`` for a job the server already knows never overwrites what the
        starting call recorded (it carries no user or session of its own).
        """
        with self._jobs.transaction() as data:
            row = data["jobs"].get(job_id)
            if row is None:
                data["jobs"][job_id] = {"client_id": client_id, "user": user,
                                        "session": session, "project": project,
                                        "recorded_at_unix_ms": now_ms()}
                return
            if row.get("client_id") != client_id:
                return  # another runner cannot claim a job it did not start
            for key, value in (("user", user), ("session", session), ("project", project)):
                if row.get(key) is None and value is not None:
                    row[key] = value

    def note_job_status(self, job_id: str, client_id: str, status: str | None) -> None:
        if status is None:
            return
        with self._jobs.transaction() as data:
            row = data["jobs"].get(job_id)
            if row is not None and row.get("client_id") == client_id:
                row["status"] = status

    def job(self, job_id: str) -> dict[str, Any] | None:
        row = self._jobs.read()["jobs"].get(job_id)
        return dict(row) if isinstance(row, dict) else None

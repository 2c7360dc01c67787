"""The session records of a state dir as a viewer keeps them: re-read on identity change.

Why a book of its own: a state dir holds thousands of finished sessions, which a
viewer only counts. Walking all of them every second was most of a refresh, so the
counts (finished by status, tainted) are kept up to date as records come and go,
and a refresh touches only the live sessions and a slice of the finished ones.
"""

from __future__ import annotations

import heapq
import json
import os
import stat
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mmo_kernel.sessions.records import (
    TERMINAL_SESSION_STATUSES,
    read_session_record,
    sessions_root,
)
from mmo_kernel.state import index

FINISHED_CHECKS = 200
"""Finished sessions whose record file is checked per refresh, in turn: they rarely change,
and checking thousands every second would be most of a refresh (a change shows within
``len(finished) / FINISHED_CHECKS`` refreshes)."""


COUNTED_FIELDS = ("status", "tainted", "created_at")
"""All that is kept of a finished session's record: it is counted (and ordered), not shown."""


def _top_level(data: bytes) -> dict[str, Any] | None:
    """``COUNTED_FIELDS`` read off a record as MMO writes it (``indent=2``: a top-level
    key, and only one, starts a line with two spaces, a string never holds a newline),
    without parsing its thousands of other bytes; None for any other layout."""
    if not (data.startswith(b'{\n  "') and data.endswith((b"\n}", b"\n}\n"))):
        return None
    found: dict[str, Any] = {}
    for key in COUNTED_FIELDS:
        marker = b'\n  "' + key.encode() + b'": '
        at = data.find(marker)
        if at < 0:
            continue
        start = at + len(marker)
        if data.find(marker, start) >= 0:
            return None  # a key twice: the full parse says which one holds
        value = data[start:data.find(b"\n", start)]
        try:
            found[key] = _scalar(value[:-1] if value.endswith(b",") else value)
        except ValueError:
            return None  # an object or array: not a field counted here
    return found


_LITERALS: dict[bytes, Any] = {b"true": True, b"false": False, b"null": None}


def _scalar(raw: bytes) -> Any:
    """A JSON scalar; a plain string or literal without the parser (two thousand a start)."""
    if raw in _LITERALS:
        return _LITERALS[raw]
    inner = raw[1:-1]
    if len(raw) > 1 and raw[0] == raw[-1] == 0x22 and b"\\" not in inner and b'"' not in inner:
        return inner.decode()
    return json.loads(raw)


def _counted(data: bytes) -> dict[str, Any] | None:
    """The counted fields of a record file's bytes (None: not a JSON object)."""
    found = _top_level(data)
    if found is not None:
        return found
    try:
        doc = json.loads(data)
    except ValueError:
        return None
    return {k: doc[k] for k in COUNTED_FIELDS if k in doc} if isinstance(doc, dict) else None


def read_counted(path: str) -> tuple[str | None, dict[str, Any] | None]:
    """``(identity, counted fields)`` of a record file in one open (its identity taken on
    the open descriptor, so the fields are of exactly that version); ``(None, None)``
    for no file, a symlink or anything but a regular file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None, None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None, None
        chunks = [os.read(fd, info.st_size + 1)]
        while len(chunks[-1]) > 0 and sum(map(len, chunks)) > info.st_size:
            chunks.append(os.read(fd, 1 << 16))  # it grew since fstat: read to its end
        data = b"".join(chunks)
    except OSError:
        return None, None
    finally:
        os.close(fd)
    return f"{info.st_mtime_ns}:{info.st_size}:{info.st_ino}", _counted(data)


@dataclass(slots=True)
class Record:
    identity: str | None
    record: dict[str, Any] | None
    strict: bool = True
    """Read through the record's model (False: a finished session's ``COUNTED_FIELDS``)."""

    @property
    def finished(self) -> str | None:
        """How the record counts among the finished: its terminal status, ``unreadable``,
        or None for a live session."""
        if self.record is None:
            return "unreadable"
        status = self.record.get("status")
        return status if status in TERMINAL_SESSION_STATUSES else None


def reread(kept: Record | None, ident: str | None, read: Callable[[], Any]) -> Record:
    """The cached record while its identity holds; else read strictly (through the
    record's model), an unreadable one kept as None."""
    if kept is not None and ident is not None and kept.identity == ident and kept.strict:
        return kept
    try:
        return Record(ident, read())
    except (OSError, ValueError, RuntimeError):
        return Record(ident, None)


class SessionBook:
    """Every session record, its counts kept as records change; ``scan`` once a refresh."""

    def __init__(self) -> None:
        self._root = str(sessions_root())
        self.records: dict[str, Record] = {}
        self.finished: Counter[str] = Counter()
        """Finished sessions by status (``unreadable`` too)."""
        self.tainted = 0
        self._open: set[str] = set()
        """Sessions checked every refresh: live, unreadable, or not known yet."""
        self._done: set[str] = set()
        self._order: list[str] | None = None
        self._rotation = 0
        self._names: set[str] = set()
        self._names_stamp: int | None = None

    # ----------------------------------------------------------- counts --

    def _count(self, session_id: str, kept: Record, sign: int) -> None:
        state = kept.finished
        if state is not None:
            self.finished[state] += sign
            if not self.finished[state]:
                del self.finished[state]
        if kept.record is not None and kept.record.get("tainted"):
            self.tainted += sign
        target = self._done if state is not None and state != "unreadable" else self._open
        if sign > 0:
            target.add(session_id)
        else:
            target.discard(session_id)
        if target is self._done:
            self._order = None

    def _put(self, session_id: str, kept: Record) -> None:
        old = self.records.get(session_id)
        if old is kept:
            return
        if old is not None:
            self._count(session_id, old, -1)
        self.records[session_id] = kept
        self._count(session_id, kept, 1)

    def _drop(self, session_id: str) -> None:
        old = self.records.pop(session_id, None)
        if old is not None:
            self._count(session_id, old, -1)

    # ---------------------------------------------------------- reading --

    def _session_names(self) -> set[str]:
        """The session directories; listed again only when the directory changed."""
        try:
            stamp = os.stat(self._root).st_mtime_ns
        except FileNotFoundError:
            return set()
        if stamp != self._names_stamp:
            self._names = {e.name for e in os.scandir(self._root) if not e.name.startswith(".")}
            self._names_stamp = stamp
        return self._names

    def _check(self, session_id: str) -> None:
        """Re-read a session record whose identity changed: a finished one only for the
        fields it is counted by, any other one strictly (through its model)."""
        path = f"{self._root}/{session_id}/session.json"  # no Path: hundreds a second
        kept = self.records.get(session_id)
        if kept is not None:
            ident = index.identity(path)  # one lstat: the usual answer is "unchanged"
            if ident is not None and kept.identity == ident:
                return
        ident, counted = read_counted(path)
        if ident is None and not os.path.lexists(path):
            self._drop(session_id)  # a session being created: not one yet
            return
        if counted is not None and counted.get("status") in TERMINAL_SESSION_STATUSES:
            self._put(session_id, Record(ident, counted, strict=False))
            return
        self._put(session_id, reread(None, ident, lambda: read_session_record(session_id)))

    def scan(self) -> None:
        """Live sessions (and new names) are checked every refresh, finished ones a slice
        at a time."""
        names = self._session_names()
        for gone in self.records.keys() - names:
            self._drop(gone)
        for session_id in names - self._done:
            self._check(session_id)
        if self._order is None:
            self._order = sorted(self._done)
        order = self._order  # checks below may replace it; this slice goes on
        if order:
            start = self._rotation % len(order)
            picked = order[start:start + FINISHED_CHECKS]
            picked += order[:min(FINISHED_CHECKS - len(picked), start)]  # wrapped around
            for session_id in picked:
                if session_id in self._done:
                    self._check(session_id)
            self._rotation = start + FINISHED_CHECKS

    def live(self) -> list[tuple[str, dict[str, Any]]]:
        """The readable sessions that are not finished, as last read."""
        out = []
        for session_id in self._open:
            record = self.records[session_id].record
            if record is not None and record.get("status") not in TERMINAL_SESSION_STATUSES:
                out.append((session_id, record))
        return out

    def newest_finished(self, count: int) -> list[tuple[str, dict[str, Any]]]:
        """The ``count`` newest finished sessions (by ``created_at``)."""
        if count <= 0:
            return []
        done = [(sid, self.records[sid].record or {}) for sid in self._done]
        return heapq.nlargest(count, done, key=lambda item: item[1].get("created_at") or "")

    def strict(self, session_id: str) -> dict[str, Any] | None:
        """A shown session's record read through its model (a finished one was read light)."""
        kept = self.records[session_id]
        if not kept.strict:
            kept = reread(None, kept.identity, lambda: read_session_record(session_id))
            self._put(session_id, kept)
        return kept.record

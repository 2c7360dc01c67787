"""Append-only JSONL logs: ``audit.jsonl``, ``events.jsonl``, ``root-events.jsonl``.

One compact JSON object per line (``separators=(",", ":")``), appended with
a single ``write`` and fsynced, so a crash can at worst tear the last line;
readers skip a torn line instead of losing the whole log. Known credential
values are redacted from every string of the object before it is encoded.
Every audit event says who acted (``actor``, ``actor_name``: ``state.actor``).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mmo_kernel.errors import StateError, StorageError
from mmo_kernel.state.actor import ACTOR_KINDS, current_actor
from mmo_kernel.state.files import add_write_barrier, remove_write_barrier
from mmo_kernel.state.redaction import redact_value

RESERVED_AUDIT_KEYS = frozenset({"event", "at", "run_id"})
ACTOR_KEYS = ("actor", "actor_name")
"""Who acted (``mmo_kernel.state.actor``); a caller that passes either speaks for itself."""
_NATIVE_ACTOR: ContextVar[str | None] = ContextVar("mmo_native_actor", default=None)


@contextmanager
def native_actor(native_agent: str | None) -> Iterator[None]:
    """Name ``native_agent`` in every audit event appended inside the block.

    A Codex-native agent acts with its parent's authority, so the API calls it
    makes carry the parent's identity; the mesh wraps the call in this block so
    the audit trail still says which native agent acted (spec 07).
    """
    token = _NATIVE_ACTOR.set(native_agent)
    try:
        yield
    finally:
        _NATIVE_ACTOR.reset(token)


_EXTERNAL_LEAD: ContextVar[str | None] = ContextVar("mmo_external_lead", default=None)


@contextmanager
def external_lead(lead: str | None) -> Iterator[None]:
    """Name ``lead`` in every audit event appended inside the block.

    In an ``external`` session (spec 12) an external MCP host holds the root seat
    through ``mmo runner``: its team calls carry the root agent's authority, and this
    block makes the audit trail say which external lead acted.
    """
    token = _EXTERNAL_LEAD.set(lead)
    try:
        yield
    finally:
        _EXTERNAL_LEAD.reset(token)


def utc_timestamp() -> str:
    """The current time as ISO 8601 UTC (``2026-01-02T03:04:05.123456+00:00``)."""
    return datetime.now(UTC).isoformat(timespec="microseconds")


def encode_line(obj: Any) -> bytes:
    """One compact JSON line (newline-terminated) for ``obj``, credential values redacted."""
    text = json.dumps(redact_value(obj), separators=(",", ":"), ensure_ascii=False)
    return (text + "\n").encode("utf-8")


def _open_append(path: Path) -> int:
    try:
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        if path.is_symlink():
            raise StateError(f"log cannot traverse symlink {path}") from None
        raise exc
    os.fchmod(fd, 0o600)
    return fd


def _ends_torn(fd: int) -> bool:
    """True when the file's last byte is not a newline (a crash tore the last line)."""
    size = os.fstat(fd).st_size
    return size > 0 and os.pread(fd, 1, size - 1) != b"\n"


def append_jsonl(path: Path, obj: Any) -> None:
    """Append ``obj`` as one compact line to ``path`` (created ``0600``), fsynced.

    If a crash left the last line torn, it is terminated first so the new
    object stays on a line of its own (the torn text is kept as evidence).
    """
    line = encode_line(obj)
    try:
        fd = _open_append(Path(path))
    except OSError as exc:
        raise StorageError.wrap(exc, "write", path) from None
    try:
        if _ends_torn(fd):
            line = b"\n" + line
        _write_all(fd, line)
        os.fsync(fd)
    except OSError as exc:
        raise StorageError.wrap(exc, "write", path) from None
    finally:
        os.close(fd)


class EvidenceLog:
    """An append-only JSONL log kept open, for a host's protocol events.

    One fsync per line was most of a job host's own work (20 per one-turn job). Lines
    are written at once (a killed process loses none: they are in the page cache) and
    fsynced together before this process's next record write (a write barrier) and at
    ``close``, so after a power loss no record claims more than its log holds. Torn
    last lines and a full disk are handled as ``append_jsonl`` does.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._fd: int | None = None
        self._unsynced = False
        self._lock = threading.Lock()

    def append(self, obj: Any) -> None:
        line = encode_line(obj)
        with self._lock:
            try:
                if self._fd is None:
                    self._fd = _open_append(self.path)
                    add_write_barrier(self.sync)
                    if _ends_torn(self._fd):
                        line = b"\n" + line
                _write_all(self._fd, line)
                self._unsynced = True
            except OSError as exc:
                raise StorageError.wrap(exc, "write", self.path) from None

    def sync(self) -> None:
        with self._lock:
            if self._fd is not None and self._unsynced:
                try:
                    os.fsync(self._fd)
                except OSError as exc:
                    raise StorageError.wrap(exc, "write", self.path) from None
                self._unsynced = False

    def close(self) -> None:
        try:
            self.sync()
        finally:
            with self._lock:
                if self._fd is not None:
                    remove_write_barrier(self.sync)
                    os.close(self._fd)
                    self._fd = None


def _write_all(fd: int, line: bytes) -> None:
    """Write every byte of ``line``; if the disk fills up part-way, take the part back.

    The log is then as it was (no torn line of ours), unless another writer
    appended meanwhile, whose line is never cut.
    """
    before = os.fstat(fd).st_size
    written = 0
    try:
        while written < len(line):
            written += os.write(fd, line[written:])
    except OSError:
        if written and os.fstat(fd).st_size == before + written:
            os.ftruncate(fd, before)
        raise


def _who_acted(event: str, fields: dict[str, Any]) -> dict[str, Any]:
    """``actor``/``actor_name`` of the current actor, unless the caller passed its own."""
    if any(key in fields for key in ACTOR_KEYS):
        if "actor" in fields and fields["actor"] not in ACTOR_KINDS:
            raise ValueError(f"audit event {event!r}: actor must be one of "
                             f"{', '.join(ACTOR_KINDS)} (got {fields['actor']!r})")
        return {}
    actor = current_actor()
    return {"actor": actor.kind, "actor_name": actor.name}


def append_audit(path: Path, event: str, run_id: str, **fields: Any) -> dict[str, Any]:
    """Append one audit event (``event``, ``at``, ``run_id``, who acted + fields); returns it."""
    if not isinstance(event, str) or not event:
        raise ValueError("audit event must be a non-empty string")
    if not isinstance(run_id, str) or not run_id:
        raise ValueError(f"audit event {event!r} needs a non-empty run_id")
    clash = sorted(RESERVED_AUDIT_KEYS & set(fields))
    if clash:
        raise ValueError(f"audit event {event!r} cannot override {', '.join(clash)}")
    record = {"event": event, "at": utc_timestamp(), "run_id": run_id,
              **_who_acted(event, fields), **fields}
    actor = _NATIVE_ACTOR.get()
    if actor is not None:
        record.setdefault("native_agent", actor)
    lead = _EXTERNAL_LEAD.get()
    if lead is not None:
        record.setdefault("external_lead", lead)
    append_jsonl(path, record)
    return record


def read_jsonl(path: Path, *, strict: bool = False) -> list[dict[str, Any]]:
    """The objects of a JSONL log, oldest first; a missing file is an empty log.

    A torn line (text that is not a JSON object, left by a crash) is
    skipped. With ``strict=True`` only a torn *final* line is tolerated and
    any other bad line raises ``ValueError`` naming the file and line.
    """
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        return []
    lines = raw.split(b"\n")
    objects: list[dict[str, Any]] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        parsed = _parse(line)
        if parsed is not None:
            objects.append(parsed)
        elif strict and number != len(lines):
            raise ValueError(f"{path}: line {number} is not a JSON object")
    return objects


def _parse(line: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    return value if isinstance(value, dict) else None

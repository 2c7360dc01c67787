"""State-dir primitives: schema version, atomic writes, safe paths and locks.

Every record under the state dir is written atomically (temp + fsync +
rename) and resolved without following symlinks, so a planted link can never
redirect a write outside the state dir (spec 03, "Records on disk").
"""

from __future__ import annotations

import errno
import json
import os
import stat
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mmo_kernel.errors import StateError, StorageError
from mmo_kernel.state.paths import STATE_SUBDIRS, ensure_private_dir, state_dir
from mmo_kernel.state.redaction import redact_bytes, redact_value

if TYPE_CHECKING:
    from filelock import UnixFileLock

MMO_SCHEMA_VERSION = 1
"""The int every persisted MMO document carries as ``schema_version``."""

RUNTIME_LOCK_NAME = "runtime.lock"
LIFECYCLE_LOCK_NAME = "lifecycle.lock"
DEFAULT_RUNTIME_LOCK_TIMEOUT = 60.0
DEFAULT_LIFECYCLE_LOCK_TIMEOUT = 120.0


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_barriers: list[Callable[[], None]] = []


def add_write_barrier(barrier: Callable[[], None]) -> None:
    """Run ``barrier`` before every atomic write of this process.

    For a log whose lines are not fsynced one by one (``state.audit.EvidenceLog``):
    its lines reach the disk before any record that may refer to them does.
    """
    _barriers.append(barrier)


def remove_write_barrier(barrier: Callable[[], None]) -> None:
    if barrier in _barriers:
        _barriers.remove(barrier)


def atomic_write_bytes(path: Path, data: bytes, mode: int = 0o600, *,
                       redact: bool = True) -> None:
    """Write via temp file + fsync + rename so readers never see half a file.

    Known credential values are redacted first (``mmo_kernel.state.redaction``;
    JSON stays valid JSON, non-UTF-8 bytes are kept). ``redact=False`` is for
    the user's own content written back verbatim: patches, workspace files,
    profile snapshots whose digests are recorded.

    A full disk (or quota, or an I/O error) raises ``StorageError``
    (``cannot write <path>: no space left on device``); the old file is kept
    and no temp file is left behind.
    """
    path = Path(path)
    if redact:
        data = redact_bytes(data)
    for barrier in tuple(_barriers):
        barrier()
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise StorageError.wrap(exc, "write", path) from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise StorageError.wrap(exc, "write", path) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    try:
        _fsync_dir(path.parent)
    except OSError as exc:
        raise StorageError.wrap(exc, "write", path) from None


def atomic_write_text(path: Path, text: str, mode: int = 0o600, *, redact: bool = True) -> None:
    atomic_write_bytes(path, text.encode("utf-8"), mode, redact=redact)


def atomic_write_json(path: Path, data: Any, mode: int = 0o600, *, redact: bool = True) -> None:
    """Pretty, sorted JSON written atomically (records are read by people too).

    Credential values are redacted string by string before serializing.
    """
    text = json.dumps(redact_value(data) if redact else data, indent=2, sort_keys=True) + "\n"
    atomic_write_text(path, text, mode, redact=False)


def read_json(path: Path) -> Any:
    """Parse a JSON file without following a symlinked leaf.

    A missing file raises ``FileNotFoundError`` (unknown ids are not-found),
    a symlink ``StateError``; anything else unreadable (a folder, no
    permission, bad UTF-8, invalid JSON) ``ValueError`` naming the path.
    """
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as handle:
            raw = handle.read()
    except FileNotFoundError:
        raise
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise StateError(f"record cannot traverse symlink {path}") from None
        raise ValueError(f"{path}: unreadable record ({exc.strerror})") from None
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: unreadable JSON record ({exc})") from None


def _components(parts: tuple[str | os.PathLike[str], ...], what: str, root: Path) -> list[str]:
    names: list[str] = []
    for part in parts:
        raw = os.fspath(part)
        if os.path.isabs(raw):
            raise StateError(f"{what} cannot traverse outside {root}: absolute path {raw!r}")
        for name in raw.split("/"):
            if name in ("", "."):
                continue
            if name == "..":
                raise StateError(f"{what} cannot traverse outside {root}: {raw!r}")
            names.append(name)
    return names


def safe_path(root: Path, *parts: str | os.PathLike[str], what: str = "path") -> Path:
    """``root/parts`` checked component by component without following symlinks.

    Any existing component that is a symlink (directory or file) or not a
    directory where one is needed raises ``StateError`` ("<what> cannot
    traverse ..."); so does a part that would leave ``root``. Components that
    do not exist yet are fine: the caller may be about to create them.
    """
    root = Path(root)
    names = _components(parts, what, root)
    current = root
    for name in names:
        current = current / name
        try:
            info = os.lstat(current)
        except FileNotFoundError:
            break
        except NotADirectoryError:
            raise StateError(f"{what} cannot traverse non-directory {current.parent}") from None
        if stat.S_ISLNK(info.st_mode):
            raise StateError(f"{what} cannot traverse symlink {current}")
    return root.joinpath(*names)


def ensure_state_layout() -> Path:
    """Create the state dir and its ``sessions/ jobs/ snapshots/ runtime/`` (all ``0700``)."""
    root = ensure_private_dir(state_dir())
    for name in STATE_SUBDIRS:
        ensure_private_dir(safe_path(root, name, what="state layout"))
    return root


def _unix_lock(path: Path) -> UnixFileLock:
    """The process-wide instance for ``path``; every acquire passes its own timeout
    (filelock refuses a singleton built again with other arguments)."""
    from filelock import UnixFileLock

    return UnixFileLock(
        str(path.absolute()),
        timeout=-1,
        mode=0o600,
        is_singleton=True,
        fallback_to_soft=False,
        preserve_lock_file=True,
    )


class LockBusy(StateError):
    """The lock is held by another process or thread (the path itself was acceptable)."""


@contextmanager
def _held(lock: UnixFileLock, what: str, path: Path, timeout: float) -> Iterator[None]:
    from filelock import Timeout

    try:
        lock.acquire(timeout=timeout)
    except Timeout:
        raise LockBusy(
            f"{what} {path} is held by another process; gave up after {timeout:g} s"
        ) from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # the leaf became a symlink after the check
            raise StateError(f"{what} cannot traverse symlink {path}") from None
        raise
    try:
        yield
    finally:
        lock.release()


@contextmanager
def runtime_lock(timeout: float = DEFAULT_RUNTIME_LOCK_TIMEOUT) -> Iterator[Path]:
    """Hold ``<state>/runtime.lock``, the lock every state-dir write happens under.

    Re-entrant within a thread (nested ``with runtime_lock()`` is fine);
    other threads and processes wait up to ``timeout`` seconds, then get
    ``StateError``. Yields the lock path.
    """
    root = ensure_private_dir(state_dir())
    path = safe_path(root, RUNTIME_LOCK_NAME, what="runtime lock")
    with _held(_unix_lock(path), "runtime lock", path, timeout):
        yield path


@contextmanager
def lifecycle_lock(session_dir: Path,
                   timeout: float = DEFAULT_LIFECYCLE_LOCK_TIMEOUT) -> Iterator[Path]:
    """Exclusive flock on exactly ``<session_dir>/lifecycle.lock``, created on first use.

    Every lifecycle change of a session serializes on it. A symlinked session
    dir (when inside the state dir) or lock file is refused with
    ``lifecycle lock cannot traverse ...`` before anything is created.
    Re-entrant within a thread; yields the lock path.
    """
    path = _lifecycle_lock_path(Path(session_dir))
    if not path.parent.is_dir():
        raise FileNotFoundError(f"session directory {path.parent} does not exist")
    with _held(_unix_lock(path), "lifecycle lock", path, timeout):
        yield path


def _lifecycle_lock_path(session_dir: Path) -> Path:
    root = state_dir()
    try:
        relative = session_dir.absolute().relative_to(root.absolute())
    except ValueError:
        return safe_path(session_dir.parent, session_dir.name, LIFECYCLE_LOCK_NAME,
                         what="lifecycle lock")
    return safe_path(root, *relative.parts, LIFECYCLE_LOCK_NAME, what="lifecycle lock")

"""The listing index: one summary row per session and per job in ``<state>/index.sqlite3``.

Why: listing by reading every JSON record costs time linear in the whole history
(10,000 jobs: ~0.5 s just to parse them). The index lets a listing filter, order
and page without opening a record, and reconcile only the rows that can change.

The JSON records stay the source of truth; the index is a cache that is never
trusted blindly:

- every writer publishes the row of the record it just wrote (``publish``); a
  failure there never fails the write: it is logged and leaves a *stale marker*
  (``<state>/index.stale/<kind>-...``) that makes the next listing re-read every
  record of that kind;
- every listing first ``refresh``-es the kind: the caller stats each record file
  (``identity``: mtime_ns, size, inode) and the rows whose identity, or the MMO
  version that built them, differ are rebuilt from their records; rows of new
  record directories are added, rows of vanished ones dropped. A record changed
  by hand, by another MMO version or by a crash between the two writes is
  therefore re-read. Unreadable records are stored without an identity, so they
  are read again on every listing;
- a missing index is created, an index of another layout (``PRAGMA
  user_version``) is dropped and created again, a corrupt file (not a database,
  malformed) is removed with its WAL and created again. Either way the next
  ``refresh`` fills it from the records.

Concurrency: many processes (job hosts, root hosts, the CLI) write at once. The
database is in WAL mode with a busy timeout, every write is one short
transaction, and a reader's updates are compare-and-set on the identity it saw,
so a reader never overwrites a row a writer published meanwhile.

This module stores generic rows; the sessions and jobs layers say what a row of
their kind holds and how a record is read (the state layer knows no record kind).
"""

from __future__ import annotations

import os
import sqlite3
import stat
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from mmo_kernel import package_version
from mmo_kernel.state.files import MMO_SCHEMA_VERSION
from mmo_kernel.state.paths import ensure_private_dir, state_dir
from mmo_kernel.state.redaction import redact_value

INDEX_NAME = "index.sqlite3"
STALE_DIR_NAME = "index.stale"
LAYOUT_VERSION = 1
"""``PRAGMA user_version`` of the table layout below; any other value is rebuilt."""
BUSY_TIMEOUT_SECONDS = 30.0
KINDS = ("session", "job")
_CORRUPT_CODES = frozenset({11, 26})  # SQLITE_CORRUPT, SQLITE_NOTADB
T = TypeVar("T")

Identity = str
"""``"<st_mtime_ns>:<st_size>:<st_ino>"`` of a record file: text, so that comparing the
identities of thousands of rows is a dict lookup of plain strings."""

_LAYOUT = """
CREATE TABLE rows (
    kind TEXT NOT NULL,
    id TEXT NOT NULL,
    session_id TEXT,
    agent TEXT,
    profile_id TEXT,
    cwd TEXT,
    status TEXT,
    created_at TEXT NOT NULL DEFAULT '',
    created_utc TEXT,
    updated_at TEXT,
    progress_revision INTEGER,
    result_state TEXT,
    reconcile INTEGER NOT NULL DEFAULT 0,
    host TEXT,
    error TEXT,
    error_kind TEXT,
    ident TEXT,
    reader TEXT NOT NULL,
    PRIMARY KEY (kind, id)
) WITHOUT ROWID;
CREATE INDEX rows_by_created ON rows (kind, created_at, id);
CREATE INDEX rows_by_session ON rows (kind, session_id, created_at, id);
CREATE INDEX rows_unreadable ON rows (kind) WHERE error IS NOT NULL;
"""

VALUE_FIELDS = ("session_id", "agent", "profile_id", "cwd", "status", "created_at",
                "created_utc", "updated_at", "progress_revision", "result_state", "reconcile",
                "host", "error", "error_kind")
_IDENTITY_FIELDS = ("ident", "reader")
_ALL = ("kind", "id", *VALUE_FIELDS, *_IDENTITY_FIELDS)
_SELECT = ("id, session_id, agent, profile_id, cwd, status, created_at, updated_at, "
           "progress_revision, result_state, reconcile, host, error, error_kind, ident")
_UPSERT = (f"INSERT INTO rows ({', '.join(_ALL)}) VALUES ({', '.join('?' * len(_ALL))}) "
           f"ON CONFLICT (kind, id) DO UPDATE SET "
           + ", ".join(f"{f} = excluded.{f}" for f in (*VALUE_FIELDS, *_IDENTITY_FIELDS)))
_CAS = " WHERE rows.ident IS ? AND rows.reader IS ?"


def warn(message: str, *args: Any) -> None:
    """Log on ``mmo.index`` (logging is loaded only when there is something to say)."""
    import logging

    logging.getLogger("mmo.index").warning(message, *args)


def reader_version() -> str:
    """Who built a row: rows built by another MMO version (or schema) are read again."""
    return f"{package_version()}/{MMO_SCHEMA_VERSION}/{LAYOUT_VERSION}"


class IndexRow(NamedTuple):
    """One summary row; ``host_json`` is the JSON text of the host identity (``host``
    parses it). A tuple: listings build thousands of them."""

    id: str
    session_id: str | None
    agent: str | None
    profile_id: str | None
    cwd: str | None
    status: str | None
    created_at: str
    updated_at: str | None
    progress_revision: int | None
    result_state: str | None
    reconcile: int
    host_json: str | None
    error: str | None
    error_kind: str | None
    identity: Identity | None
    """None for an unreadable record: it is read again on every listing."""

    @property
    def host(self) -> dict[str, Any]:
        import json

        value = json.loads(self.host_json) if self.host_json else {}
        return value if isinstance(value, dict) else {}


# ------------------------------------------------------------- identity --


def identity(path: str | os.PathLike[str]) -> Identity | None:
    """The file identity of a regular record file (not following a symlink); None otherwise."""
    try:
        info = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode):
        return None
    return f"{info.st_mtime_ns}:{info.st_size}:{info.st_ino}"


def read_unchanged(path: str | os.PathLike[str], expected: Identity) -> bytes | None:
    """The file's bytes if it still has ``expected`` identity (checked on the open
    descriptor, so the bytes are exactly the indexed version); None otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if f"{info.st_mtime_ns}:{info.st_size}:{info.st_ino}" != expected:
            return None
        chunks = []
        while True:
            chunk = os.read(fd, max(info.st_size, 65536))
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def load_unchanged(path: str | os.PathLike[str], expected: Identity) -> dict[str, Any] | None:
    """The JSON object in ``path`` if the file still has ``expected`` identity. The row of
    that identity was built from a strictly validated read of these exact bytes, so the
    caller need not validate them again; None when the file changed (read it strictly)."""
    import json

    data = read_unchanged(path, expected)
    if data is None:
        return None
    try:
        doc = json.loads(data)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


# ----------------------------------------------------------- connection --


def index_path() -> Path:
    return state_dir() / INDEX_NAME


class _Cache(threading.local):
    path: str | None = None
    db: sqlite3.Connection | None = None
    ino: int | None = None
    pid: int | None = None
    override: sqlite3.Connection | None = None


_cache = _Cache()
_orphans: list[sqlite3.Connection] = []
"""Connections inherited across a fork: never used or closed in the child."""


def _is_corrupt(exc: BaseException) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int) and code & 0xFF in _CORRUPT_CODES:
        return True
    text = str(exc).lower()
    return "not a database" in text or "malformed" in text


def _open(path: Path) -> sqlite3.Connection:
    ensure_private_dir(path.parent)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)  # never world-readable
    os.close(fd)
    db = sqlite3.connect(path, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None,
                         check_same_thread=False)
    try:
        db.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_SECONDS * 1000)}")
        if db.execute("PRAGMA journal_mode = WAL").fetchone()[0].lower() != "wal":
            raise sqlite3.OperationalError(f"{path}: cannot switch the index to WAL mode")
        db.execute("PRAGMA synchronous = NORMAL")  # a cache: the records are fsynced
        _ensure_layout(db)
    except BaseException:
        db.close()
        raise
    return db


def _ensure_layout(db: sqlite3.Connection) -> None:
    """Create the table, or replace one of another layout (an older or newer MMO's)."""
    if db.execute("PRAGMA user_version").fetchone()[0] == LAYOUT_VERSION:
        return
    db.execute("BEGIN IMMEDIATE")  # another process may be replacing it right now
    try:
        if db.execute("PRAGMA user_version").fetchone()[0] != LAYOUT_VERSION:
            for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                      "AND name NOT LIKE 'sqlite_%'").fetchall():
                db.execute(f'DROP TABLE "{name}"')
            for statement in filter(str.strip, _LAYOUT.split(";")):  # not executescript: it
                # would COMMIT the open transaction
                db.execute(statement)
            db.execute(f"PRAGMA user_version = {LAYOUT_VERSION}")
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


def _discard(path: Path, seen_ino: int | None) -> None:
    """Remove a corrupt index (and its WAL and shared memory) so it is created again;
    only if ``path`` is still the file found corrupt (another process may have
    replaced it already)."""
    try:
        if seen_ino is not None and os.lstat(path).st_ino != seen_ino:
            return
    except FileNotFoundError:
        return
    for suffix in ("-wal", "-shm", ""):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    warn("the listing index %s was corrupt; it is rebuilt from the records", path)


def _ino(path: Path) -> int | None:
    try:
        return os.lstat(path).st_ino
    except FileNotFoundError:
        return None


def _memory() -> sqlite3.Connection:
    db = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    _ensure_layout(db)
    return db


def _open_checked(path: Path) -> sqlite3.Connection:
    """Open the index; a corrupt file is discarded and created again. A file that cannot be
    opened at all (read-only state dir, full disk) raises ``sqlite3.OperationalError``."""
    try:
        try:
            return _open(path)
        except sqlite3.DatabaseError as exc:
            if not _is_corrupt(exc):
                raise
            _discard(path, _ino(path))
            return _open(path)
    except OSError as exc:
        raise sqlite3.OperationalError(f"cannot open {path}: {exc}") from exc


def _connection() -> sqlite3.Connection:
    """This thread's connection to the current state dir's index, re-opened when the file
    was replaced or removed, or after a fork (``attempt`` may lend a private one)."""
    cache = _cache
    if cache.override is not None:
        return cache.override
    path = index_path()
    key = str(path)
    if cache.db is not None:
        if cache.pid != os.getpid():
            _orphans.append(cache.db)
            cache.db = None
        elif cache.path != key or _ino(path) != cache.ino:
            cache.db.close()
            cache.db = None
    if cache.db is None:
        db = _open_checked(path)
        cache.db, cache.path, cache.ino, cache.pid = db, key, _ino(path), os.getpid()
    return cache.db


def close() -> None:
    """Close this thread's connection (tests and ``reset`` use it)."""
    if _cache.db is not None and _cache.pid == os.getpid():
        _cache.db.close()
    _cache.db = None


@contextmanager
def _database() -> Iterator[sqlite3.Connection]:
    """The connection; a corrupt index found while using it is discarded (the operation
    fails once; ``attempt`` runs it again on a fresh file)."""
    db = _connection()
    try:
        yield db
    except sqlite3.DatabaseError as exc:
        if _is_corrupt(exc) and db is not _cache.override:
            close()
            _discard(index_path(), None)
        raise


def attempt(operation: Callable[[], T]) -> T:
    """Run a reading ``operation`` (refresh + queries) so that it never fails because of
    the index: a corrupt index is discarded and the operation runs again on a new one;
    any other database failure (an index that cannot be opened or written) runs it
    again on a private in-memory index, filled from the records (right, only slower)."""
    try:
        return operation()
    except sqlite3.DatabaseError as exc:
        if _is_corrupt(exc):
            try:
                return operation()
            except sqlite3.DatabaseError as again:
                exc = again
        warn("the listing index %s cannot be used (%s); this listing reads the records",
             index_path(), exc)
    _cache.override = _memory()
    try:
        return operation()
    finally:
        _cache.override.close()
        _cache.override = None


@contextmanager
def _write(db: sqlite3.Connection) -> Iterator[None]:
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


# ------------------------------------------------------------------ rows --


def mtime_stamp(mtime_ns: int | None) -> str | None:
    """A file time (ns) as UTC ISO text, the form of every MMO time stamp."""
    if mtime_ns is None:
        return None
    return datetime.fromtimestamp(mtime_ns / 1e9, UTC).isoformat(timespec="microseconds")


def identity_time(ident: Identity | None) -> str | None:
    """When the file of this identity was last written (``updated_at``)."""
    return None if ident is None else mtime_stamp(int(ident.split(":", 1)[0]))


def utc_key(value: Any) -> str | None:
    """``created_at`` as comparable UTC text (``YYYY-MM-DDTHH:MM:SS.ffffff+00:00``); naive
    times count as UTC; None when it is no ISO time."""
    if isinstance(value, datetime):
        when = value
    elif isinstance(value, str) and value:
        try:
            when = datetime.fromisoformat(value)
        except ValueError:
            return None
    else:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).isoformat(timespec="microseconds")


def _values(kind: str, record_id: str, row: Mapping[str, Any],
            ident: Identity | None) -> tuple[Any, ...]:
    import json

    row = redact_value(dict(row))
    host = row.get("host")
    error = row.get("error")
    if error is not None:
        ident = None  # an unreadable record is read again on every listing
    created = row.get("created_at")
    created = created if isinstance(created, str) else ""
    values = {
        **{f: row.get(f) for f in VALUE_FIELDS}, "created_at": created,
        "created_utc": utc_key(created), "updated_at": identity_time(ident),
        "reconcile": 1 if row.get("reconcile") else 0,
        "host": json.dumps(host, sort_keys=True) if host else None,
    }
    revision = values["progress_revision"]
    if not (isinstance(revision, int) and not isinstance(revision, bool)):
        values["progress_revision"] = None
    return (kind, record_id, *(values[f] for f in VALUE_FIELDS), ident, reader_version())


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise ValueError(f"index kind must be one of {', '.join(KINDS)}, got {kind!r}")


def publish(kind: str, record_id: str, path: str | os.PathLike[str],
            row: Mapping[str, Any]) -> None:
    """Record ``row`` as the summary of the record just written to ``path``.

    Called right after the record's atomic write (under the runtime lock, so the
    file's identity is that of this write). Never raises: a failure is logged and
    marks the kind stale, so the next listing re-reads every record of it.
    """
    try:
        _check_kind(kind)
        values = _values(kind, record_id, row, identity(path))
        with _database() as db:
            db.execute(_UPSERT, values)
    except Exception as exc:  # noqa: BLE001 - the record is written; the index catches up
        warn("listing index not updated for %s %s (%s); it is rebuilt on the next listing",
             kind, record_id, exc)
        mark_stale(kind)


def stale_dir() -> Path:
    return state_dir() / STALE_DIR_NAME


def mark_stale(kind: str) -> None:
    """Leave a marker that makes the next ``refresh`` of ``kind`` re-read every record."""
    try:
        directory = ensure_private_dir(stale_dir())
        name = f"{kind}-{os.getpid()}-{os.urandom(4).hex()}"
        os.close(os.open(directory / name, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except OSError as exc:
        warn("cannot mark the listing index stale (%s): run `mmo doctor --reindex`", exc)


def _stale_markers(kind: str) -> list[Path]:
    try:
        names = os.listdir(stale_dir())
    except OSError:
        return []
    return [stale_dir() / n for n in names if n.startswith(f"{kind}-")]


ReadRow = Callable[[str], Mapping[str, Any] | None]
"""Builds the row of one record id (``{"error": ...}`` when unreadable; None when gone)."""


class RefreshStats(NamedTuple):
    rows: int
    reread: int
    dropped: int


def refresh(kind: str, found: Mapping[str, Identity | None], read_row: ReadRow,
            force: bool = False) -> RefreshStats:
    """Bring the rows of ``kind`` in line with the records on disk.

    ``found`` maps every record id on disk to its file identity, taken *before* the
    record is read, so a change made while it is read shows next time (None: always
    read it). Rows whose identity differs, or that another MMO version built, are
    rebuilt with ``read_row``; rows of ids not in ``found`` are dropped. With ``force``
    (or a stale marker) every row is rebuilt.
    """
    _check_kind(kind)
    markers = _stale_markers(kind)
    force = force or bool(markers)
    reader = reader_version()
    with _database() as db:
        current = dict(db.execute(  # the identities of the rows this MMO built
            "SELECT id, ident FROM rows WHERE kind = ? AND reader = ?", (kind, reader)))
        foreign = {r[0]: (r[1], r[2]) for r in db.execute(  # another version's: read again
            "SELECT id, ident, reader FROM rows WHERE kind = ? AND reader != ?",
            (kind, reader))}
    seen = current.get
    changed = [rid for rid, ident in found.items()
               if force or ident is None or seen(rid) != ident]
    if not changed and not foreign and not current.keys() - found.keys():
        return RefreshStats(rows=len(found), reread=0, dropped=0)
    was = {rid: (ident, reader) for rid, ident in current.items()}
    was.update(foreign)
    vanished = [rid for rid in was if rid not in found]
    updates = []
    for rid in changed:
        row = read_row(rid)
        if row is None:
            if rid in was:
                vanished.append(rid)
            continue
        updates.append((*_values(kind, rid, row, found[rid]), *was.get(rid, (None, None))))
    if updates or vanished:
        with _database() as db, _write(db):  # compare-and-set: a writer's newer row stays
            db.executemany(_UPSERT + _CAS, updates)
            db.executemany("DELETE FROM rows WHERE kind = ? AND id = ? AND ident IS ? "
                           "AND reader IS ?", [(kind, rid, *was[rid]) for rid in vanished])
    if _cache.override is None:  # the markers are owed to the index file, not to a stand-in
        for marker in markers:
            marker.unlink(missing_ok=True)
    return RefreshStats(rows=len(found), reread=len(updates), dropped=len(vanished))


# --------------------------------------------------------------- queries --


def statuses_arg(status: str | Iterable[str] | None, known: Sequence[str],
                 what: str) -> frozenset[str] | None:
    """A listing's ``status`` argument as a set of known statuses (a str is one status);
    None means any. An unknown status is a ``ValueError`` naming the choices."""
    if status is None:
        return None
    wanted = frozenset([status] if isinstance(status, str) else status)
    unknown = sorted(wanted - set(known))
    if unknown:
        raise ValueError(f"{what} status must be one of {', '.join(known)}, got "
                         f"{', '.join(map(repr, unknown))}")
    return wanted


def since_arg(since: str | datetime | None) -> str | None:
    """A listing's ``since`` (an ISO date or time, or a datetime; naive means UTC) as the
    text the index compares with ``created_at``."""
    if since is None:
        return None
    key = utc_key(since)
    if key is None:
        raise ValueError(f"since must be an ISO date or time such as 2026-01-31 or "
                         f"2026-01-31T12:00:00+00:00, got {since!r}")
    return key


def limit_arg(limit: int | None) -> int | None:
    """A listing's ``limit``: None (all) or a positive int."""
    if limit is None:
        return None
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise ValueError(f"limit must be a positive integer, got {limit!r}")
    return limit


class Query(NamedTuple):
    """What a listing asks of the index; ``None`` means "any"."""

    kind: str
    session_id: str | None = None
    statuses: Sequence[str] | None = None
    agent: str | None = None
    profile_id: str | None = None
    since: str | None = None
    errors: bool = False
    """True: only rows of unreadable records (which the filters other than the session's
    never hide); False: only readable ones."""
    reconcilable: bool = True
    """With ``statuses``: keep the rows a reconciliation may move too (the caller
    reconciles, then filters); False filters on the indexed status alone."""
    order: str = "created"
    """``created``: newest ``created_at`` first (ties: id); ``id``: highest id first."""
    before: tuple[str, str] | None = None
    """Keyset paging: only rows that sort after this ``(created_at, id)`` / ``("", id)``."""
    limit: int | None = None


def _where(query: Query) -> tuple[str, list[Any]]:
    clauses, args = ["kind = ?"], [query.kind]
    if query.session_id is not None:
        clauses.append("session_id = ?")
        args.append(query.session_id)
    if query.errors:
        clauses.append("error IS NOT NULL")
        return " AND ".join(clauses), args
    clauses.append("error IS NULL")
    if query.statuses is not None:
        marks = ", ".join("?" * len(query.statuses))
        clauses.append(f"(status IN ({marks}) OR reconcile = 1)" if query.reconcilable
                       else f"status IN ({marks})")
        args.extend(query.statuses)
    for column, value in (("agent", query.agent), ("profile_id", query.profile_id)):
        if value is not None:
            clauses.append(f"{column} = ?")
            args.append(value)
    if query.since is not None:
        clauses.append("created_utc >= ?")
        args.append(query.since)
    if query.before is not None:
        created, rid = query.before
        if query.order == "id":
            clauses.append("id < ?")
            args.append(rid)
        else:
            clauses.append("(created_at, id) < (?, ?)")  # a row value: the index serves it
            args.extend((created, rid))
    return " AND ".join(clauses), args


def rows(query: Query) -> list[IndexRow]:
    """The rows ``query`` selects, newest first (the caller refreshed the kind first)."""
    _check_kind(query.kind)
    where, args = _where(query)
    order = "id DESC" if query.order == "id" else "created_at DESC, id DESC"
    table = "rows INDEXED BY rows_unreadable" if query.errors else "rows"  # they are few
    sql = f"SELECT {_SELECT} FROM {table} WHERE {where} ORDER BY {order}"
    if query.limit is not None:
        sql += " LIMIT ?"
        args.append(int(query.limit))
    with _database() as db:
        return list(map(IndexRow._make, db.execute(sql, args)))


def iterate(query: Query, batch: int | None = None) -> Iterator[IndexRow]:
    """``rows(query)`` fetched ``batch`` at a time (keyset paging), so a caller that stops
    early (a page is full) reads no more; all at once when ``batch`` is None."""
    if batch is None:
        yield from rows(query._replace(limit=None))
        return
    before = query.before
    while True:
        page = rows(query._replace(before=before, limit=batch))
        yield from page
        if len(page) < batch:
            return
        before = (page[-1].created_at, page[-1].id)


def ids(kind: str) -> list[str]:
    """Every id of ``kind`` in the index (refresh first for an exact answer)."""
    with _database() as db:
        return [r[0] for r in db.execute("SELECT id FROM rows WHERE kind = ?", (kind,))]


def reset() -> None:
    """Remove the index (and its stale markers); the next refresh rebuilds it from the records."""
    close()
    path = index_path()
    for suffix in ("-wal", "-shm", ""):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    for marker in (*_stale_markers("session"), *_stale_markers("job")):
        marker.unlink(missing_ok=True)


def scan(root: Path, leaf: str) -> tuple[dict[str, Identity | None], list[os.DirEntry[str]]]:
    """``({name: identity of <name>/<leaf>}, odd entries)`` for the visible entries of ``root``.

    A symlinked entry, an entry whose leaf is not a regular file, and an entry that is
    no directory are *odd*: they have no identity (so their record is always read,
    and refused, by the caller's strict reader) and are also returned for the caller to
    judge (a directory without its leaf may be no record yet). One ``lstat`` per entry:
    this is the per-listing cost of never trusting the index blindly.
    """
    found: dict[str, Identity | None] = {}
    odd: list[os.DirEntry[str]] = []
    lstat, regular = os.lstat, stat.S_ISREG
    try:
        entries = os.scandir(root)
    except FileNotFoundError:
        return found, odd
    with entries:
        for entry in entries:
            name = entry.name
            if name[0] == ".":
                continue
            try:
                info = lstat(f"{entry.path}/{leaf}")
            except OSError:
                info = None
            if info is not None and regular(info.st_mode) and not entry.is_symlink():
                found[name] = f"{info.st_mtime_ns}:{info.st_size}:{info.st_ino}"
            else:
                found[name] = None
                odd.append(entry)
    return found, odd


__all__ = [
    "INDEX_NAME", "KINDS", "LAYOUT_VERSION", "Identity", "IndexRow", "Query", "RefreshStats",
    "attempt", "close", "identity", "identity_time", "ids", "index_path", "iterate", "limit_arg",
    "load_unchanged", "mark_stale", "mtime_stamp", "publish", "since_arg", "statuses_arg",
    "read_unchanged",
    "reader_version", "refresh", "reset", "rows", "scan", "stale_dir", "utc_key",
]

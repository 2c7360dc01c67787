"""The server's accounts: users, personal access tokens, runner tokens and the admin token.

Tokens are random (``secrets.token_urlsafe``), shown once and stored only as the sha256 of
their text; a presented token is hashed and compared with ``hmac.compare_digest``. The one
plaintext token on disk is the bootstrap admin token in ``DIR/admin-token`` (``0600``),
which is how its owner reads it (spec 12, "Accounts, tokens and scopes").

Everything lives in ``DIR/accounts.json`` (users and token hashes) and ``DIR/runners.json``
(the registry of runners' last hellos), written atomically under ``DIR/accounts.lock``.
Reads check the file's identity (inode, size, mtime) and reload when another writer changed
it, so a revoke is effective from the very next request, whoever wrote it.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mmo_kernel.state.files import atomic_write_bytes, atomic_write_json, read_json
from mmo_kernel.state.paths import ensure_private_dir

USERNAME_RE = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
CLIENT_ID_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
SCOPES = ("read", "write", "execute", "goals", "delegate", "admin")
"""PAT scopes in the spec's order (replies list a token's scopes in this order)."""
ADMIN_PREFIX, PAT_PREFIX, RUNNER_PREFIX = "mmo_adm_", "mmo_pat_", "mmo_rt_"
ADMIN_TOKEN_FILE = "admin-token"
ACCOUNTS_FILE = "accounts.json"
RUNNERS_FILE = "runners.json"
LOCK_FILE = "accounts.lock"
NAME_MAX = 200
SCHEMA_VERSION = 1


class StoreError(ValueError):
    """A refused account change; ``phrase`` is the spec's error phrase, ``str()`` the detail."""

    status = 400
    phrase = "invalid request"


class UnknownScope(StoreError):
    phrase = "unknown scope"


class UnknownUser(StoreError):
    status = 404
    phrase = "unknown user"


class UnknownToken(StoreError):
    status = 404
    phrase = "unknown token"


class AlreadyExists(StoreError):
    status = 409
    phrase = "already exists"


@dataclass(frozen=True)
class Principal:
    """Who a bearer token speaks for. ``username`` is None (and ``is_admin`` True) for the
    bootstrap admin token only; an admin-scoped PAT is its user with ``admin`` in scopes."""

    username: str | None
    scopes: frozenset[str]
    is_admin: bool
    token_id: str | None = None

    @property
    def may_administer(self) -> bool:
        """The admin API accepts the admin token and PATs with the ``admin`` scope."""
        return self.is_admin or "admin" in self.scopes


@dataclass(frozen=True)
class RunnerGrant:
    """What a runner token allows: one link for one ``client_id`` of one user."""

    username: str
    client_id: str
    token_id: str


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _new_token(prefix: str) -> str:
    return prefix + secrets.token_urlsafe(32)


def check_username(username: object) -> str:
    if not isinstance(username, str) or not USERNAME_RE.fullmatch(username):
        raise StoreError(f"invalid username {str(username)[:80]!r}: "
                         "use [a-z0-9][a-z0-9._-]{0,63}")
    return username


def check_client_id(client_id: object) -> str:
    if not isinstance(client_id, str) or not CLIENT_ID_RE.fullmatch(client_id):
        raise StoreError(f"invalid client_id {str(client_id)[:80]!r}: "
                         "use [a-z0-9][a-z0-9_-]{0,63}")
    return client_id


def check_name(name: object) -> str:
    if not isinstance(name, str) or not name.strip() or len(name) > NAME_MAX \
            or any(ch in name for ch in "\r\n\0"):
        raise StoreError(f"invalid name: a non-empty single line of at most {NAME_MAX} characters")
    return name


def check_scopes(scopes: Iterable[object]) -> list[str]:
    """The scopes in canonical order; an unknown one raises ``UnknownScope``."""
    wanted = list(scopes)
    for scope in wanted:
        if scope not in SCOPES:
            raise UnknownScope(f"unknown scope {str(scope)[:40]!r}: use {', '.join(SCOPES)}")
    if not wanted:
        raise StoreError("scopes must name at least one of " + ", ".join(SCOPES))
    return [s for s in SCOPES if s in wanted]


class _JsonFile:
    """A JSON document cached in memory and reloaded when the file changes on disk."""

    def __init__(self, path: Path, empty: Callable[[], dict[str, Any]]) -> None:
        self.path, self.empty = path, empty
        self._stamp: tuple[int, int, int] | None = None
        self._data: dict[str, Any] = empty()

    def _current_stamp(self) -> tuple[int, int, int] | None:
        try:
            info = os.stat(self.path)
        except FileNotFoundError:
            return None
        return (info.st_ino, info.st_size, info.st_mtime_ns)

    def load(self) -> dict[str, Any]:
        stamp = self._current_stamp()
        if stamp != self._stamp or stamp is None:
            if stamp is None:
                self._data = self.empty()
            else:
                data = read_json(self.path)
                if not isinstance(data, dict):
                    raise ValueError(f"{self.path}: unreadable record (not a JSON object)")
                self._data = data
            self._stamp = stamp
        return self._data

    def save(self, data: dict[str, Any]) -> None:
        # redact=False: the document holds hashes and ids only; redaction of a value that
        # happens to equal an environment secret would corrupt it.
        atomic_write_json(self.path, data, 0o600, redact=False)
        self._data = data
        self._stamp = self._current_stamp()


class ServerStore:
    """Users, tokens and the runner registry under the server's state dir."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = ensure_private_dir(Path(state_dir))
        self._thread_lock = threading.RLock()
        self._accounts = _JsonFile(self.state_dir / ACCOUNTS_FILE, _empty_accounts)
        self._runners = _JsonFile(self.state_dir / RUNNERS_FILE, _empty_runners)
        self._revoke_listeners: list[Callable[[str], None]] = []
        from filelock import FileLock

        self._file_lock = FileLock(str(self.state_dir / LOCK_FILE), mode=0o600)
        self.admin_token_created = False
        self._admin_digest = token_digest(self._ensure_admin_token())

    # -- locking -------------------------------------------------------------------------

    def _locked(self) -> _Both:
        return _Both(self._thread_lock, self._file_lock)

    # -- admin token ---------------------------------------------------------------------

    @property
    def admin_token_path(self) -> Path:
        return self.state_dir / ADMIN_TOKEN_FILE

    def _ensure_admin_token(self) -> str:
        """Create ``admin-token`` on first start; later starts keep (and re-tighten) it."""
        path = self.admin_token_path
        with self._locked():
            if not path.exists():
                token = _new_token(ADMIN_PREFIX)
                atomic_write_bytes(path, (token + "\n").encode("ascii"), 0o600, redact=False)
                self.admin_token_created = True
                return token
            if path.is_symlink() or not path.is_file():
                raise ValueError(f"{path}: not a regular file")
            os.chmod(path, 0o600)
            token = path.read_text(encoding="utf-8").strip()
        if not token.startswith(ADMIN_PREFIX) or len(token) < len(ADMIN_PREFIX) + 16:
            raise ValueError(f"{path}: not an MMO admin token (expected one line starting "
                             f"{ADMIN_PREFIX})")
        return token

    # -- authentication ------------------------------------------------------------------

    def _find_token(self, token: str, kind: str) -> dict[str, Any] | None:
        digest = token_digest(token)
        with self._thread_lock:
            records = self._accounts.load()["tokens"]
            for record in records.values():
                if record["kind"] == kind and hmac.compare_digest(record["sha256"], digest):
                    if record.get("revoked_at") is None:
                        return dict(record)
        return None

    def authenticate_bearer(self, token: str | None) -> Principal | None:
        """The admin token or a live PAT; anything else (runner tokens too) is None."""
        if not token or not isinstance(token, str):
            return None
        if hmac.compare_digest(token_digest(token), self._admin_digest):
            return Principal(username=None, scopes=frozenset({"admin"}), is_admin=True)
        if not token.startswith(PAT_PREFIX):
            return None
        record = self._find_token(token, "pat")
        if record is None or not self.user_exists(record["username"]):
            return None
        return Principal(username=record["username"], scopes=frozenset(record["scopes"]),
                         is_admin=False, token_id=record["token_id"])

    def authenticate_runner(self, token: str | None) -> RunnerGrant | None:
        """A live runner token, as the user and ``client_id`` it is bound to."""
        if not token or not isinstance(token, str) or not token.startswith(RUNNER_PREFIX):
            return None
        record = self._find_token(token, "runner")
        if record is None:
            return None
        return RunnerGrant(username=record["username"], client_id=record["client_id"],
                           token_id=record["token_id"])

    def token_live(self, token_id: str) -> bool:
        """True while the token exists and is not revoked (a hub may re-check open links)."""
        with self._thread_lock:
            record = self._accounts.load()["tokens"].get(token_id)
        return bool(record) and record.get("revoked_at") is None

    # -- users ---------------------------------------------------------------------------

    def user_exists(self, username: str) -> bool:
        with self._thread_lock:
            return username in self._accounts.load()["users"]

    def users(self) -> list[dict[str, Any]]:
        with self._thread_lock:
            return [dict(u) for u in self._accounts.load()["users"].values()]

    def create_user(self, username: str) -> dict[str, Any]:
        check_username(username)
        with self._locked():
            data = _copy(self._accounts.load())
            if username in data["users"]:
                raise AlreadyExists(f"user {username!r} already exists")
            user = {"username": username, "created_at": now_iso()}
            data["users"][username] = user
            self._accounts.save(data)
        return dict(user)

    # -- tokens --------------------------------------------------------------------------

    def _add_token(self, record: dict[str, Any], token: str) -> None:
        data = _copy(self._accounts.load())
        if record["username"] not in data["users"]:
            raise UnknownUser(f"unknown user {record['username']!r}")
        record |= {"sha256": token_digest(token), "created_at": now_iso(), "revoked_at": None}
        data["tokens"][record["token_id"]] = record
        self._accounts.save(data)

    def create_token(self, username: str, name: str, scopes: Iterable[str]) -> dict[str, Any]:
        """A new PAT: ``{"token", "token_id", "scopes"}`` (the only time the token is seen)."""
        check_username(username)
        check_name(name)
        ordered = check_scopes(scopes)
        token = _new_token(PAT_PREFIX)
        token_id = "tok_" + secrets.token_hex(8)
        with self._locked():
            self._add_token({"token_id": token_id, "kind": "pat", "username": username,
                             "name": name, "scopes": ordered}, token)
        return {"token": token, "token_id": token_id, "scopes": ordered}

    def create_runner_token(self, username: str, client_id: str, name: str) -> dict[str, Any]:
        """A runner token bound to ``username`` and ``client_id``. A ``client_id`` belongs
        to the first user enrolled with it (another user -> ``AlreadyExists``); the same
        user may hold several tokens for it (rotation: revoke the old one)."""
        check_username(username)
        check_client_id(client_id)
        check_name(name)
        token = _new_token(RUNNER_PREFIX)
        token_id = "rtok_" + secrets.token_hex(8)
        with self._locked():
            for record in self._accounts.load()["tokens"].values():
                if record.get("client_id") == client_id and record["username"] != username:
                    raise AlreadyExists(f"client_id {client_id!r} already exists for another user")
            self._add_token({"token_id": token_id, "kind": "runner", "username": username,
                             "name": name, "client_id": client_id, "scopes": []}, token)
        return {"token": token, "token_id": token_id, "client_id": client_id}

    def revoke_token(self, token_id: str) -> dict[str, Any]:
        """Revoke a PAT or runner token; revoking twice is a no-op success."""
        if not isinstance(token_id, str) or not token_id:
            raise StoreError("token_id must be a non-empty string")
        with self._locked():
            data = _copy(self._accounts.load())
            record = data["tokens"].get(token_id)
            if record is None:
                raise UnknownToken(f"unknown token_id {token_id[:80]!r}")
            if record.get("revoked_at") is None:
                record["revoked_at"] = now_iso()
                self._accounts.save(data)
        for listener in list(self._revoke_listeners):
            try:
                listener(token_id)
            except Exception:  # noqa: BLE001 - a listener must not undo a committed revoke
                pass
        return _public_token(record)

    def on_revoke(self, listener: Callable[[str], None]) -> None:
        """Call ``listener(token_id)`` after each revoke (the hub closes that runner's link)."""
        self._revoke_listeners.append(listener)

    def tokens(self, username: str | None = None) -> list[dict[str, Any]]:
        """Token metadata (never a hash or a token)."""
        with self._thread_lock:
            records = self._accounts.load()["tokens"].values()
            return [_public_token(r) for r in records
                    if username is None or r["username"] == username]

    def runner_client_ids(self, username: str) -> set[str]:
        """The ``client_id``s enrolled for ``username`` (live or revoked tokens)."""
        with self._thread_lock:
            return {r["client_id"] for r in self._accounts.load()["tokens"].values()
                    if r["kind"] == "runner" and r["username"] == username}

    # -- runner registry -----------------------------------------------------------------

    def runner_registry(self) -> dict[str, dict[str, Any]]:
        """``client_id -> {"client_id", "owner", "projects", "live_job_ids", "last_seen_at"}``
        from each runner's last hello / projects frame (persisted across restarts)."""
        with self._thread_lock:
            return _copy(self._runners.load()["runners"])

    def record_hello(self, client_id: str, owner: str, projects: list[dict[str, Any]],
                     live_job_ids: list[str] | None = None, *, version: str | None = None) -> None:
        with self._locked():
            data = _copy(self._runners.load())
            entry = data["runners"].get(client_id, {})
            entry |= {"client_id": client_id, "owner": owner, "projects": list(projects),
                      "live_job_ids": list(live_job_ids or []), "last_seen_at": now_iso()}
            if version is not None:
                entry["version"] = version
            data["runners"][client_id] = entry
            self._runners.save(data)

    def record_projects(self, client_id: str, projects: list[dict[str, Any]]) -> None:
        with self._locked():
            data = _copy(self._runners.load())
            entry = data["runners"].get(client_id)
            if entry is None:
                return
            entry |= {"projects": list(projects), "last_seen_at": now_iso()}
            self._runners.save(data)

    def touch_runner(self, client_id: str) -> None:
        """Record that the runner was seen now (on disconnect, say)."""
        with self._locked():
            data = _copy(self._runners.load())
            entry = data["runners"].get(client_id)
            if entry is None:
                return
            entry["last_seen_at"] = now_iso()
            self._runners.save(data)


class _Both:
    """Hold the in-process lock, then the cross-process file lock."""

    def __init__(self, thread_lock: threading.RLock, file_lock: Any) -> None:
        self.thread_lock, self.file_lock = thread_lock, file_lock

    def __enter__(self) -> None:
        self.thread_lock.acquire()
        try:
            self.file_lock.acquire(timeout=30)
        except BaseException:
            self.thread_lock.release()
            raise

    def __exit__(self, *exc: object) -> None:
        try:
            self.file_lock.release()
        finally:
            self.thread_lock.release()


def _empty_accounts() -> dict[str, Any]:
    return {"schema_version": SCHEMA_VERSION, "users": {}, "tokens": {}}


def _empty_runners() -> dict[str, Any]:
    return {"schema_version": SCHEMA_VERSION, "runners": {}}


def _copy(data: Any) -> Any:
    import copy

    return copy.deepcopy(data)


def _public_token(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k != "sha256"}

"""The host control protocol: one JSON request line in, one JSON reply line out.

Hosts (root controllers and job runners) serve a unix socket; the CLI, the
API and the MCP mesh send controls through ``send_control_request``. The
reply is ``{"result": ...}``; a request the host refuses comes back as
``{"error": {"type", "message"}}`` and is raised as ``ControlRequestRejected``
(it was delivered, so a revision is consumed). When a request was sent but
no reply came back, nobody can know whether the host applied it:
``ControlDeliveryUnknown`` (spec 04, "Controls").

Socket paths must stay under 104 bytes (the BSD ``sun_path`` limit), so they
live in a short private runtime dir, not the state dir: see
``app_server_socket_path``. A server that takes over a path leaves a
generation marker; a retiring server unlinks only the socket file its own
generation created.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import logging
import os
import socket
import stat
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from mmo_kernel.errors import ControlDeliveryUnknown
from mmo_kernel.state.files import atomic_write_json, read_json
from mmo_kernel.state.paths import ensure_private_dir, state_dir

log = logging.getLogger("mmo.control")

MAX_SOCKET_PATH_BYTES = 104
"""A socket path must be *shorter* than this many bytes."""
MAX_MESSAGE_BYTES = 4 * 1024 * 1024
DEFAULT_CONTROL_TIMEOUT = 30.0
_READ_TIMEOUT = 10.0
_DRAIN_SECONDS = 15.0
_NAME_DIGEST_CHARS = 24

Handler = Callable[[dict[str, Any]], Any]
"""Takes the request object, returns the JSON ``result``; raising refuses the request."""


class ControlRequestRejected(RuntimeError):
    """The host received the request and refused it; ``kind`` is its exception type."""

    def __init__(self, kind: str, message: str) -> None:
        self.kind = kind
        super().__init__(message)


class ControlNotDelivered(RuntimeError):
    """Nothing reached a host: no socket, or no server listening on it."""


# ------------------------------------------------------------------ paths ---


def _runtime_base() -> Path:
    """``$XDG_RUNTIME_DIR/mmo`` when it is ours and short enough, else ``/tmp/mmo-<uid>``."""
    xdg = os.environ.get("XDG_RUNTIME_DIR", "")
    if xdg and os.path.isabs(xdg):
        try:
            info = os.stat(xdg)
        except OSError:
            info = None
        candidate = Path(xdg) / "mmo"
        fits = len(os.fsencode(candidate)) + _NAME_DIGEST_CHARS + 7 < MAX_SOCKET_PATH_BYTES
        if info is not None and stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and fits:
            return candidate
    return Path("/tmp") / f"mmo-{os.getuid()}"


def _ensure_runtime_dir(path: Path) -> Path:
    """Create the dir ``0700``; refuse a symlink or a dir someone else owns (shared /tmp)."""
    if not os.path.lexists(path):
        ensure_private_dir(path)
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise RuntimeError(f"control runtime dir {path} is not a plain directory; remove it")
    if info.st_uid != os.getuid():
        raise RuntimeError(f"control runtime dir {path} belongs to uid {info.st_uid}, not to you")
    if stat.S_IMODE(info.st_mode) != 0o700:
        os.chmod(path, 0o700)
    return path


def app_server_socket_path(name: str) -> Path:
    """The short, private socket path for a logical name such as ``control:job:<job_id>``.

    Deterministic from the name and the resolved state dir, so two state
    dirs never share a socket; always shorter than 104 bytes.
    """
    if not isinstance(name, str) or not name.strip() or "\0" in name:
        raise ValueError(f"socket name must be a non-empty string, got {name!r}")
    scope = f"{os.path.realpath(state_dir())}\0{name}"
    digest = hashlib.sha256(scope.encode("utf-8")).hexdigest()[:_NAME_DIGEST_CHARS]
    path = _ensure_runtime_dir(_runtime_base()) / f"{digest}.sock"
    check_socket_path(path)
    return path


def check_socket_path(path: Path | str) -> Path:
    """``path`` as a ``Path`` if a unix socket can live there, else ``ValueError``."""
    size = len(os.fsencode(os.fspath(path)))
    if size >= MAX_SOCKET_PATH_BYTES:
        raise ValueError(
            f"control socket path {os.fspath(path)!r} is {size} bytes; unix socket paths "
            f"must be shorter than {MAX_SOCKET_PATH_BYTES} (use app_server_socket_path)"
        )
    return Path(path)


# ----------------------------------------------------------------- framing ---


def _encode(obj: Any) -> bytes:
    return (json.dumps(obj, separators=(",", ":"), ensure_ascii=False) + "\n").encode("utf-8")


def _read_line(conn: socket.socket) -> bytes | None:
    """Bytes up to the first newline, or ``None`` on EOF before one."""
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        newline = chunk.find(b"\n")
        if newline >= 0:
            chunks.append(chunk[:newline])
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_MESSAGE_BYTES:
            raise ValueError(f"control message exceeds {MAX_MESSAGE_BYTES} bytes")


# ------------------------------------------------------------------ client ---


def _validate_request(request: Any) -> str:
    if not isinstance(request, dict):
        raise ValueError(f"control request must be a JSON object, got {type(request).__name__}")
    action = request.get("action")
    if not isinstance(action, str) or not action:
        raise ValueError("control request needs a non-empty string 'action'")
    return action


def send_control_request(socket_path: Path | str, request: dict[str, Any],
                         timeout: float = DEFAULT_CONTROL_TIMEOUT) -> dict[str, Any]:
    """One control exchange with a host; returns the reply ``{"result": ...}``.

    Raises ``ControlNotDelivered`` when nothing reached a host,
    ``ControlDeliveryUnknown`` when the request was sent but no reply came
    back within ``timeout``, and ``ControlRequestRejected`` when the host
    refused it.
    """
    action = _validate_request(request)
    payload = _encode(request)
    path = check_socket_path(socket_path)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(timeout)
        try:
            conn.connect(os.fspath(path))
            conn.sendall(payload)
        except (TimeoutError, FileNotFoundError, ConnectionRefusedError,
                ConnectionResetError, BrokenPipeError) as exc:
            raise ControlNotDelivered(
                f"control request {action!r} was not delivered: no host is listening on "
                f"{path} ({exc.__class__.__name__})"
            ) from None
        try:
            raw = _read_line(conn)
        except (OSError, ValueError) as exc:
            raise _unknown(action, path, f"{exc.__class__.__name__}: {exc}") from None
    if raw is None:
        raise _unknown(action, path, "the host closed the connection without replying")
    return _reply_of(action, path, raw)


def _unknown(action: str, path: Path, why: str) -> ControlDeliveryUnknown:
    return ControlDeliveryUnknown(
        f"control request {action!r} was sent to {path} but its reply was lost ({why}); "
        "it may or may not have been applied"
    )


def _reply_of(action: str, path: Path, raw: bytes) -> dict[str, Any]:
    try:
        reply = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise _unknown(action, path, "the reply was not JSON") from None
    if isinstance(reply, dict) and isinstance(reply.get("error"), dict):
        error = reply["error"]
        raise ControlRequestRejected(str(error.get("type") or "RuntimeError"),
                                     str(error.get("message") or f"{action} was refused"))
    if not isinstance(reply, dict) or "result" not in reply:
        raise _unknown(action, path, "the reply had no result")
    return reply


# ------------------------------------------------------------------ server ---


def _marker_path(path: Path) -> Path:
    return path.with_name(path.name + ".generation")


@contextmanager
def _path_lock(path: Path) -> Iterator[None]:
    """Serialize bind/unlink across servers and processes (a flock on the socket's dir)."""
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _live_server_at(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(1.0)
        try:
            probe.connect(os.fspath(path))
        except OSError:
            return False
    return True


class ControlServer:
    """A host's control socket: a thread accepting connections, one exchange each.

    Connections are read concurrently (a slow client cannot block others);
    handler calls are serialized, so host logic needs no locking of its own.
    ``close`` waits for exchanges in flight, so a control that ends the host
    (pause, stop) still gets its reply before the process exits.
    """

    def __init__(self, path: Path | str, handler: Handler) -> None:
        self.path = check_socket_path(path)
        self.generation = uuid.uuid4().hex
        self._handler = handler
        self._handler_lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._inode: tuple[int, int] | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._exchanges: set[threading.Thread] = set()
        self._exchanges_lock = threading.Lock()

    def start(self, *, replace_live: bool = False) -> ControlServer:
        """Bind and serve; replaces a stale socket file, a live server only if ``replace_live``."""
        if self._sock is not None:
            raise RuntimeError(f"control server on {self.path} is already started")
        with _path_lock(self.path):
            if os.path.lexists(self.path):
                if _live_server_at(self.path) and not replace_live:
                    raise RuntimeError(f"control socket {self.path} is served by a live host")
                self._remove_stale()
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.bind(os.fspath(self.path))
                os.chmod(self.path, 0o600)
                sock.listen(16)
            except BaseException:
                sock.close()
                raise
            info = os.lstat(self.path)
            self._inode = (info.st_dev, info.st_ino)
            atomic_write_json(_marker_path(self.path), {
                "generation": self.generation, "pid": os.getpid(), "inode": info.st_ino})
        self._sock = sock
        self._thread = threading.Thread(target=self._serve, name=f"control-{self.path.name}",
                                        daemon=True)
        self._thread.start()
        return self

    def _remove_stale(self) -> None:
        info = os.lstat(self.path)
        if not stat.S_ISSOCK(info.st_mode):
            raise RuntimeError(f"{self.path} exists and is not a socket; refusing to replace it")
        os.unlink(self.path)

    def owns_path(self) -> bool:
        """True while the socket file at ``path`` is the one this generation bound."""
        try:
            info = os.lstat(self.path)
            marker = read_json(_marker_path(self.path))
        except (OSError, ValueError, RuntimeError):
            return False
        return ((info.st_dev, info.st_ino) == self._inode
                and isinstance(marker, dict) and marker.get("generation") == self.generation)

    def close(self) -> None:
        """Stop serving; unlink the socket only if no newer generation took the path."""
        if self._sock is None or self._stopping.is_set():
            return
        self._stopping.set()
        with _path_lock(self.path):
            if self.owns_path():
                os.unlink(self.path)
                _marker_path(self.path).unlink(missing_ok=True)
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5.0)
        self._drain()

    def _drain(self) -> None:
        """Let replies already being computed reach their callers (bounded)."""
        deadline = time.monotonic() + _DRAIN_SECONDS
        with self._exchanges_lock:
            pending = [t for t in self._exchanges if t is not threading.current_thread()]
        for thread in pending:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))

    def __enter__(self) -> ControlServer:
        return self if self._sock is not None else self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _serve(self) -> None:
        assert self._sock is not None
        while not self._stopping.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError as exc:
                if self._stopping.is_set() or exc.errno in (errno.EBADF, errno.EINVAL):
                    return
                log.warning("control socket %s accept failed: %s", self.path, exc)
                continue
            thread = threading.Thread(target=self._exchange, args=(conn,), daemon=True,
                                      name=f"control-conn-{self.path.name}")
            with self._exchanges_lock:
                self._exchanges.add(thread)
            thread.start()

    def _exchange(self, conn: socket.socket) -> None:
        try:
            self._answer(conn)
        finally:
            with self._exchanges_lock:
                self._exchanges.discard(threading.current_thread())

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(_READ_TIMEOUT)
            try:
                raw = _read_line(conn)
            except (OSError, ValueError) as exc:
                log.warning("control socket %s: unreadable request: %s", self.path, exc)
                return
            if raw is None:
                return
            reply = self._reply(raw)
            conn.settimeout(None)
            try:
                conn.sendall(reply)
            except OSError as exc:
                log.warning("control socket %s: reply lost: %s", self.path, exc)

    def _reply(self, raw: bytes) -> bytes:
        try:
            request = json.loads(raw.decode("utf-8"))
            _validate_request(request)
        except (UnicodeDecodeError, json.JSONDecodeError, ValueError) as exc:
            return _error_line("ValueError", f"invalid control request: {exc}")
        try:
            with self._handler_lock:
                result = self._handler(request)
        except Exception as exc:  # the host refused: the caller gets the reason, typed
            return _error_line(exc.__class__.__name__, str(exc))
        try:
            return _encode({"result": result})
        except (TypeError, ValueError) as exc:
            log.error("control handler for %r returned a non-JSON result", request["action"])
            return _error_line("RuntimeError", f"host produced an unencodable result: {exc}")


def _error_line(kind: str, message: str) -> bytes:
    return _encode({"error": {"type": kind, "message": message}})


__all__ = [
    "MAX_SOCKET_PATH_BYTES",
    "ControlDeliveryUnknown",
    "ControlNotDelivered",
    "ControlRequestRejected",
    "ControlServer",
    "app_server_socket_path",
    "check_socket_path",
    "send_control_request",
]

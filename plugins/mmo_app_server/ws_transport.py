"""An app-server reached over ``--listen unix://PATH`` instead of stdio.

Real Codex speaks WebSocket on such a socket (an HTTP upgrade, then one
JSON-RPC message per text frame). Every root uses it: its app-server must
outlive a host that dies (spec 03), and an interactive root's TUI
(``codex --remote unix://PATH``) shares it with the host.
:class:`ListeningProcess` looks like the ``Popen`` that :class:`AppServerClient`
wraps (``pid``, ``stdin``, ``stdout``, ``poll``, ``wait``), with the pipes
replaced by the socket, so the whole JSON-RPC client is reused unchanged and
``root-events.jsonl`` stays complete evidence.

The app-server is spawned detached from the host's pipes (stdin is
``/dev/null``), so it outlives a host that dies; a new host *adopts* it by
``(pid, start token)`` and connects again.

For the same reason its stdout and stderr go straight to the log file and are
**not** redacted (unlike a stdio app-server's stderr, which the host pumps
through ``pump_redacted``): a pump in the host would die with the host and
leave Codex writing into a pipe nobody reads, and a pump of its own would be a
process outside its group that retiring the group could not wait for. The log
holds Codex's own diagnostics (start-up warnings, errors); the agent's
commands and their output are reported as notifications, which
``root-events.jsonl`` records redacted. The file counts among the files Codex
writes itself (docs/configuration.md, "What is redacted").
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from mmo_kernel.host_api import process_matches, process_start_token
from mmo_kernel.hosts import UnixWebSocket, WebSocketError

from .client import AppServerClient

CONNECT_TIMEOUT_SECONDS = 30.0
_POLL = 0.02


def unix_endpoint(path: Path | str) -> str:
    """``unix://PATH``: how both ``--listen`` and the TUI's ``--remote`` name the socket."""
    return f"unix://{os.fspath(path)}"


WebSocketConnection = UnixWebSocket
"""The host's connection to a listening app-server."""


class _FrameWriter:
    """``stdin`` for the client: each JSON line becomes one text frame."""

    def __init__(self, conn: WebSocketConnection) -> None:
        self.conn = conn

    def write(self, line: bytes) -> int:
        if self.conn.closed:
            raise BrokenPipeError("app-server socket is closed")
        self.conn.send_text(line.rstrip(b"\n"))
        return len(line)

    def flush(self) -> None:
        """Frames are sent whole; nothing is buffered."""

    def close(self) -> None:
        self.conn.close()


class _FrameReader:
    """``stdout`` for the client: each text frame reads as one line; EOF when closed."""

    def __init__(self, conn: WebSocketConnection) -> None:
        self.conn = conn

    def readline(self) -> bytes:
        payload = self.conn.receive_text()
        return b"" if payload is None else payload + b"\n"

    def close(self) -> None:
        self.conn.close()


class ListeningProcess:
    """A listening app-server plus one WebSocket connection, shaped like ``Popen``."""

    def __init__(self, pid: int, start_token: str | None, conn: WebSocketConnection,
                 popen: subprocess.Popen[bytes] | None = None) -> None:
        self.pid = pid
        self.start_token = start_token
        self.popen = popen
        self.stdin = _FrameWriter(conn)
        self.stdout = _FrameReader(conn)

    def poll(self) -> int | None:
        if self.popen is not None:
            return self.popen.poll()
        return None if process_matches(self.pid, self.start_token) else -1

    def wait(self, timeout: float | None = None) -> int:
        if self.popen is not None:
            return self.popen.wait(timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"app-server pid {self.pid}", timeout or 0)
            time.sleep(_POLL)
        return code


def _connect(path: Path, alive: Any, timeout: float) -> WebSocketConnection:
    """Connect once the server listens; fail early if it exits first."""
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        if not alive():
            raise RuntimeError(f"app-server exited before listening on {path}"
                               + (f" ({last})" if last else ""))
        try:
            return WebSocketConnection(path)
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            last = exc
            time.sleep(_POLL)
    raise TimeoutError(f"app-server did not listen on {path} within {timeout:g} s")


def _log_fd(path: Path | None) -> int:
    if path is None:
        return subprocess.DEVNULL
    return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)


def spawn_listening(argv: Sequence[str], socket_path: Path, *, cwd: str | os.PathLike[str],
                    env: Mapping[str, str], stderr_path: Path | None = None,
                    connect_timeout: float = CONNECT_TIMEOUT_SECONDS,
                    on_spawn: Callable[[int, int, str | None], None] | None = None,
                    **wiring: Any) -> AppServerClient:
    """Start ``argv`` (``<codex> app-server --listen unix://…``) as its own group and connect.

    A stale socket file is removed first; the caller owns ``socket_path``.
    ``on_spawn(pid, pgid, start_token)`` runs as soon as the process exists,
    before waiting for it to listen: a listening server does not die with its
    host, so it must be on record (for cancel) from its first moment.
    """
    if not Path(cwd).is_dir():
        raise FileNotFoundError(f"app-server working directory {os.fspath(cwd)!r} does not exist")
    if socket_path.is_socket() or socket_path.is_symlink():
        socket_path.unlink()
    log = _log_fd(stderr_path)
    try:
        popen = subprocess.Popen(  # noqa: S603 - argv comes from MMO, never a shell
            list(argv), cwd=cwd, env=dict(env), stdin=subprocess.DEVNULL, stdout=log,
            stderr=log, start_new_session=True, close_fds=True)
    finally:
        if isinstance(log, int) and log >= 0 and stderr_path is not None:
            os.close(log)
    token = process_start_token(popen.pid)
    try:
        if on_spawn is not None:
            on_spawn(popen.pid, popen.pid, token)
        conn = _connect(socket_path, lambda: popen.poll() is None, connect_timeout)
    except BaseException:
        _kill_group(popen)
        raise
    process = ListeningProcess(popen.pid, token, conn, popen)
    return AppServerClient(process, stderr_path=stderr_path, **wiring)  # type: ignore[arg-type]


def adopt_listening(pid: int, start_token: str, socket_path: Path, *,
                    stderr_path: Path | None = None,
                    connect_timeout: float = CONNECT_TIMEOUT_SECONDS,
                    **wiring: Any) -> AppServerClient:
    """Connect to a live app-server a previous host left listening (same pid and token)."""
    if not process_matches(pid, start_token):
        raise RuntimeError(f"app-server pid {pid} is gone; it cannot be adopted")
    conn = _connect(socket_path, lambda: process_matches(pid, start_token), connect_timeout)
    process = ListeningProcess(pid, start_token, conn)
    return AppServerClient(process, stderr_path=stderr_path, **wiring)  # type: ignore[arg-type]


def _kill_group(popen: subprocess.Popen[bytes]) -> None:
    import signal

    try:
        os.killpg(popen.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    popen.wait()


__all__ = ["ListeningProcess", "WebSocketConnection", "WebSocketError", "adopt_listening",
           "spawn_listening", "unix_endpoint"]

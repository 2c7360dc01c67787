"""The ``mmo serve`` process (spec 12, "Processes").

It refuses a non-loopback address without ``--allow-remote`` (exit 2), holds
``DIR/serve.lock`` for its life (one server per state dir), binds before it reports, and
writes ``DIR/server.json`` atomically once uvicorn accepts connections: whoever started it
polls for that file (with its ``pid``) to learn the real port. SIGINT/SIGTERM stop
accepting, let in-flight calls answer (up to ``GRACEFUL_SECS``), remove ``server.json``
and exit 0. Tokens are never logged; the only plaintext one on disk is ``admin-token``.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import socket
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from mmo_kernel.state.files import atomic_write_json
from mmo_kernel.state.paths import ensure_private_dir, state_dir

DEFAULT_HOST, DEFAULT_PORT = "127.0.0.1", 8765
GRACEFUL_SECS = 45
"""In-flight calls get this long after SIGTERM (the tool call deadline is 40 s)."""
SERVER_FILE, LOCK_FILE = "server.json", "serve.lock"
RUNNER_WS_PATH = "/api/runners/ws"
REMOTE_REFUSAL = "refusing to listen on a non-loopback address without --allow-remote"
log = logging.getLogger("mmo.serve")


class UsageError(ValueError):
    """A bad flag: exit 2, one line."""


class ServeError(RuntimeError):
    """The server cannot start (port taken, state dir in use): exit 1, one line."""


@dataclass
class ServeOptions:
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    state_dir: Path | None = None
    public_url: str | None = None
    allow_remote: bool = False
    allow_origins: list[str] = field(default_factory=list)


def is_loopback(host: str) -> bool:
    """``localhost`` or a loopback IP literal (``127.0.0.0/8``, ``::1``)."""
    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _check_url(value: str, flag: str, *, path_allowed: bool) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query \
            or parts.fragment or parts.username or parts.password \
            or (not path_allowed and parts.path not in ("", "/")):
        shape = "http(s)://host[:port][/path]" if path_allowed else "http(s)://host[:port]"
        raise UsageError(f"invalid {flag} {value!r}: expected {shape}")
    try:
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError:
        raise UsageError(f"invalid {flag} {value!r}: bad port") from None
    return value.rstrip("/")


def check_options(options: ServeOptions) -> ServeOptions:
    """Validate the flags before anything is created; raises ``UsageError``."""
    if not options.host:
        raise UsageError("--host must not be empty")
    if not is_loopback(options.host) and not options.allow_remote:
        raise UsageError(REMOTE_REFUSAL)
    if not 0 <= options.port <= 65535:
        raise UsageError(f"invalid --port {options.port}: use 0-65535 (0 picks a free port)")
    if options.public_url is not None:
        options.public_url = _check_url(options.public_url, "--public-url", path_allowed=True)
    options.allow_origins = [_check_url(o, "--allow-origin", path_allowed=False)
                             for o in options.allow_origins]
    return options


def default_state_dir() -> Path:
    return state_dir() / "serve"


def base_url(host: str, port: int) -> str:
    shown = f"[{host.strip('[]')}]" if ":" in host else host
    return f"http://{shown}:{port}"


def runner_url(url: str) -> str:
    """The ``ws(s)://`` form of ``url + /api/runners/ws``."""
    scheme, rest = url.split("://", 1)
    return ("wss" if scheme == "https" else "ws") + "://" + rest + RUNNER_WS_PATH


def server_record(url: str) -> dict[str, Any]:
    return {"url": url, "mcp_url": url + "/mcp", "runner_url": runner_url(url),
            "pid": os.getpid(), "started_at": datetime.now(UTC).isoformat(timespec="seconds")}


def _bind(host: str, port: int) -> socket.socket:
    bare = host.strip("[]")
    try:
        infos = socket.getaddrinfo(bare, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise ServeError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    infos.sort(key=lambda info: info[0] != socket.AF_INET)  # "localhost": IPv4 first
    family, _, _, _, address = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        raise ServeError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.set_inheritable(True)
    return sock


def _hold_lock(directory: Path) -> Any:
    """The state dir's process lock, or ``ServeError`` naming the server that has it."""
    from filelock import FileLock, Timeout

    lock = FileLock(str(directory / LOCK_FILE), mode=0o600)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        raise ServeError(f"another mmo serve is using state dir {directory}"
                         f"{_running_pid(directory)}") from None
    return lock


def _running_pid(directory: Path) -> str:
    try:
        import json

        pid = json.loads((directory / SERVER_FILE).read_text(encoding="utf-8")).get("pid")
    except (OSError, ValueError, AttributeError):
        return ""
    return f" (pid {pid})" if isinstance(pid, int) else ""


def _server_class() -> type:
    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn's server, announcing itself in ``server.json`` and exiting 0 on a signal."""

        on_started: Any = None
        drain: Any = None

        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets=sockets)
            if not self.should_exit and self.on_started is not None:
                self.on_started()

        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            # Stop accepting, then let calls forwarded to runners get their replies while
            # the runner links are still open (uvicorn closes every WebSocket at once).
            for server in getattr(self, "servers", []):
                server.close()
            if self.drain is not None:
                await self.drain()
            await super().shutdown(sockets=sockets)

        def handle_exit(self, sig: int, frame: Any) -> None:
            super().handle_exit(sig, frame)
            # uvicorn re-raises a captured signal after shutting down, which would end the
            # process with that signal instead of the spec's exit 0.
            self._captured_signals.clear()

    return Server


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is now (a test may swap it between runs)."""

    @property  # type: ignore[override]
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, _value: Any) -> None:
        pass


def _configure_logging() -> None:
    """``mmo serve: ...`` lines on stderr for the server's own loggers (``mmo.serve.*``)."""
    logger = logging.getLogger("mmo.serve")
    if not any(isinstance(h, _StderrHandler) for h in logger.handlers):
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter("mmo serve: %(message)s"))
        logger.addHandler(handler)
    logger.setLevel(logging.INFO)


def serve(options: ServeOptions) -> int:
    """Run the server in the foreground until SIGINT/SIGTERM; returns the exit code."""
    import uvicorn

    from mmo_kernel.serve.app import create_app

    check_options(options)
    _configure_logging()
    directory = ensure_private_dir(Path(options.state_dir or default_state_dir()).absolute())
    lock = _hold_lock(directory)
    info_path = directory / SERVER_FILE
    try:
        info_path.unlink(missing_ok=True)  # a stale one would point a reader at a dead port
        sock = _bind(options.host, options.port)  # a taken port fails before any file is made
        port = sock.getsockname()[1]
        try:
            app = create_app(directory, public_url=options.public_url,
                             allow_origins=options.allow_origins)
        except BaseException:
            sock.close()
            raise
        if app.state.store.admin_token_created:
            log.info("admin token written to %s (mode 0600)", app.state.store.admin_token_path)
        url = options.public_url or base_url(options.host, port)
        app.state.url = url
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on",
                                timeout_graceful_shutdown=GRACEFUL_SECS, server_header=False)
        server = _server_class()(config)

        def announce() -> None:
            atomic_write_json(info_path, server_record(url), 0o600, redact=False)
            log.info("listening on %s (MCP %s/mcp, state dir %s)", url, url, directory)

        server.on_started = announce
        server.drain = lambda: app.state.hub.drain(GRACEFUL_SECS)
        try:
            server.run(sockets=[sock])
        finally:
            sock.close()
        if not server.started:
            raise ServeError("the server did not start (see the messages above)")
        log.info("stopped")
        return 0
    finally:
        info_path.unlink(missing_ok=True)
        lock.release()

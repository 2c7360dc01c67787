"""Start an ``mmo serve`` app for a test: in-process (uvicorn in a thread) or as the real
``mmo serve`` subprocess. Both bind loopback port 0 and report the real URL.

    with running_server(tmp_path / "serve") as (base_url, app):
        admin = admin_token(app.state.state_dir)
        pat = create_user_and_pat(base_url, admin, "alice", ["read"])

``running_server`` stops the server (and waits for its thread) on exit; ``serve_process``
sends SIGTERM and waits for the exit, so the process guard finds nothing left.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2 as httpx
import uvicorn

from mmo_kernel.serve.app import create_app
from support.waiting import wait_until

STARTUP_TIMEOUT = 60.0


@contextmanager
def running_server(state_dir: Path, *, public_url: str | None = None,
                   allow_origins: Sequence[str] = ()) -> Iterator[tuple[str, Any]]:
    """Yield ``(base_url, app)`` for an in-process server on ``127.0.0.1:<free port>``."""
    app = create_app(Path(state_dir), public_url=public_url, allow_origins=list(allow_origins))
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    base_url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    if app.state.url is None:
        app.state.url = base_url
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on",
                            timeout_graceful_shutdown=5, ws_ping_interval=None)
    server = uvicorn.Server(config)
    failure: list[BaseException] = []

    def serve() -> None:
        try:
            server.run(sockets=[sock])
        except BaseException as exc:  # surfaced by the wait below
            failure.append(exc)

    thread = threading.Thread(target=serve, name="mmo-serve-test", daemon=True)
    thread.start()
    wait_until(lambda: server.started or failure or not thread.is_alive(),
               timeout=STARTUP_TIMEOUT, what="in-process mmo serve to start")
    if not server.started:
        raise RuntimeError(f"in-process server did not start: {failure[:1]}")
    try:
        yield base_url, app
    finally:
        server.should_exit = True
        thread.join(timeout=STARTUP_TIMEOUT)
        sock.close()


def admin_token(state_dir: Path) -> str:
    """The bootstrap admin token a server wrote into ``state_dir/admin-token``."""
    return (Path(state_dir) / "admin-token").read_text(encoding="utf-8").strip()


def api(base_url: str, token: str | None, path: str, body: Any = None, *,
        method: str = "POST", timeout: float = 60.0) -> httpx.Response:
    """One admin-API request with an optional bearer token."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with httpx.Client(timeout=timeout) as client:
        if method == "GET":
            return client.get(base_url + path, headers=headers)
        return client.request(method, base_url + path, headers=headers,
                              json=body if body is not None else None)


def create_user_and_pat(base_url: str, admin: str, username: str,
                        scopes: Sequence[str] = ("read", "write", "execute", "goals",
                                                 "delegate")) -> str:
    """Create ``username`` (if new) and a PAT for it; returns the PAT."""
    reply = api(base_url, admin, "/api/users/create", {"username": username})
    assert reply.status_code in (200, 409), reply.text
    reply = api(base_url, admin, "/api/tokens/create",
                {"username": username, "name": "test", "scopes": list(scopes)})
    assert reply.status_code == 200, reply.text
    return reply.json()["token"]


def create_runner_token(base_url: str, admin: str, username: str, client_id: str) -> str:
    """A runner token for ``username``/``client_id`` (the user must exist)."""
    reply = api(base_url, admin, "/api/runner-tokens/create",
                {"username": username, "client_id": client_id, "name": "test"})
    assert reply.status_code == 200, reply.text
    return reply.json()["token"]


@dataclass
class ServeProcess:
    """A running ``mmo serve`` subprocess and what it wrote in ``server.json``."""

    process: subprocess.Popen[bytes]
    state_dir: Path
    info: dict[str, Any]
    log_path: Path

    def stderr(self) -> str:
        """What the server logged so far."""
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""

    @property
    def url(self) -> str:
        return self.info["url"]

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60.0) -> int:
        """Signal the server and wait for it to exit; returns its exit code."""
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise


def mmo_command() -> list[str]:
    """The ``mmo`` console script of this interpreter's environment."""
    script = Path(sys.executable).parent / "mmo"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "import sys; from mmo_kernel.cli import main; sys.exit(main())"]


def start_serve_process(state_dir: Path, *extra: str,
                        env: dict[str, str] | None = None) -> ServeProcess:
    """Start ``mmo serve --port 0 --state-dir DIR`` and wait for a fresh ``server.json``.
    Its stderr goes to ``<DIR>.stderr.log`` beside the state dir (``ServeProcess.stderr``)."""
    state_dir = Path(state_dir)
    state_dir.parent.mkdir(parents=True, exist_ok=True)
    info_path = state_dir / "server.json"
    info_path.unlink(missing_ok=True)
    log_path = state_dir.parent / f"{state_dir.name}.stderr.log"
    with open(log_path, "ab") as log:
        process = subprocess.Popen(
            [*mmo_command(), "serve", "--port", "0", "--state-dir", str(state_dir), *extra],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
            env=env if env is not None else os.environ.copy())
    server = ServeProcess(process=process, state_dir=state_dir, info={}, log_path=log_path)

    def ready() -> dict[str, Any] | None:
        if process.poll() is not None:
            raise AssertionError(f"mmo serve exited {process.returncode}: {server.stderr()}")
        try:
            info = json.loads(info_path.read_text(encoding="utf-8"))
        except (FileNotFoundError, json.JSONDecodeError):
            return None
        return info if info.get("pid") == process.pid else None

    try:
        server.info = wait_until(ready, timeout=STARTUP_TIMEOUT,
                                 what="mmo serve to write server.json")
    except BaseException:
        if process.poll() is None:
            process.kill()
            process.wait()
        raise
    return server


@contextmanager
def serve_process(state_dir: Path, *extra: str,
                  env: dict[str, str] | None = None) -> Iterator[ServeProcess]:
    """``start_serve_process`` as a context manager: SIGTERM and wait on exit."""
    server = start_serve_process(state_dir, *extra, env=env)
    try:
        yield server
    finally:
        server.stop()


class RunnerLink:
    """A test's side of a runner link: a real WebSocket that says hello like ``mmo runner``
    and then lets the test read ``call`` frames and send replies itself."""

    def __init__(self, runner_url: str, token: str, client_id: str, owner: str,
                 projects: Sequence[dict[str, Any]] = (), live_job_ids: Sequence[str] = ()):
        from contextlib import ExitStack

        from websockets.sync.client import connect

        self._stack = ExitStack()
        self.ws = self._stack.enter_context(connect(
            runner_url, additional_headers={"Authorization": f"Bearer {token}"},
            open_timeout=STARTUP_TIMEOUT, max_size=None))
        self.send({"type": "hello", "protocol": 1, "client_id": client_id, "owner": owner,
                   "version": "test", "projects": list(projects),
                   "live_job_ids": list(live_job_ids)})
        self.welcome = self.receive("welcome")

    def send(self, frame: dict[str, Any]) -> None:
        self.ws.send(json.dumps(frame))

    def receive(self, kind: str, timeout: float = STARTUP_TIMEOUT) -> dict[str, Any]:
        """The next frame of type ``kind`` (pings are answered, other frames skipped)."""
        import time

        deadline = time.monotonic() + timeout
        while True:
            frame = json.loads(self.ws.recv(timeout=max(0.01, deadline - time.monotonic())))
            if frame.get("type") == kind:
                return frame
            if frame.get("type") == "ping":
                self.send({"type": "pong"})

    def reply(self, call: dict[str, Any], envelope: dict[str, Any]) -> None:
        self.send({"type": "reply", "call_id": call["call_id"], "envelope": envelope})

    def close(self) -> None:
        self._stack.close()

    def __enter__(self) -> RunnerLink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

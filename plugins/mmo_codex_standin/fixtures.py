"""pytest fixtures and a JSON-RPC client for driving the Codex stand-in.

Plain functions and classes; ``mmo_kernel.testing`` re-exports them. Each
spawned app-server leads its own process group and is killed with it at
teardown, so no test leaves a process (or an orphan child) behind.
"""

from __future__ import annotations

import abc
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from mmo_codex_standin.websocket import WebSocketClient, WebSocketClosed


def standin_executable() -> Path:
    """The ``mmo-codex-standin`` console script installed next to this Python."""
    path = Path(sys.executable).parent / "mmo-codex-standin"
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: install the project (pip install -e .) first")
    return path


class RpcFailure(Exception):
    """The app-server answered a request with an error."""

    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(error.get("message", ""))
        self.code = error.get("code")
        self.message = error.get("message", "")


class AppServerClient(abc.ABC):
    """Talks JSON-RPC to an app-server; every message in and out is kept for assertions."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        self.sent: list[dict[str, Any]] = []
        self.closed = False
        self._cond = threading.Condition()
        self._next = 1000

    # transport hooks ---------------------------------------------------------
    @abc.abstractmethod
    def _write(self, message: dict[str, Any]) -> None:
        """Put one message on the transport."""

    def _reader(self, read: Callable[[], dict[str, Any] | None]) -> None:
        while True:
            try:
                message = read()
            except (OSError, ValueError, WebSocketClosed):
                message = None
            with self._cond:
                if message is None:
                    self.closed = True
                    self._cond.notify_all()
                    return
                self.received.append(message)
                self._cond.notify_all()

    # protocol ------------------------------------------------------------------
    def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)
        self._write(message)

    def request(
        self, method: str, params: dict[str, Any] | None = None, timeout: float = 15
    ) -> dict[str, Any]:
        """Send a request and return its whole response message (result or error)."""
        self._next += 1
        request_id = self._next
        self.send({"id": request_id, "method": method, "params": params or {}})
        return self.wait_for(
            lambda m: m.get("id") == request_id and "method" not in m,
            timeout,
            f"response to {method}",
        )

    def call(
        self, method: str, params: dict[str, Any] | None = None, timeout: float = 15
    ) -> dict[str, Any]:
        response = self.request(method, params, timeout)
        if "error" in response:
            raise RpcFailure(response["error"])
        return response["result"]

    def initialize(self, **capabilities: Any) -> dict[str, Any]:
        body: dict[str, Any] = {"clientInfo": {"name": "mmo-test", "version": "1"}}
        if capabilities:
            body["capabilities"] = capabilities
        result = self.call("initialize", body)
        self.send({"method": "initialized"})
        return result

    def respond(self, request_id: Any, result: dict[str, Any]) -> None:
        self.send({"id": request_id, "result": result})

    def wait_for(
        self,
        predicate: Callable[[dict[str, Any]], bool],
        timeout: float = 15,
        what: str = "message",
        start: int = 0,
    ) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        index = start
        with self._cond:
            while True:
                while index < len(self.received):
                    message = self.received[index]
                    index += 1
                    if predicate(message):
                        return message
                if self.closed:
                    raise EOFError(f"app-server closed the connection while waiting for {what}")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(
                        f"no {what} within {timeout}s; got "
                        f"{[m.get('method') for m in self.received]}"
                    )
                self._cond.wait(remaining)

    def notification(
        self,
        method: str,
        timeout: float = 15,
        start: int = 0,
        where: Callable[[dict[str, Any]], bool] = lambda p: True,
    ) -> dict[str, Any]:
        """The first notification ``method`` (from index ``start``) whose params match ``where``."""
        message = self.wait_for(
            lambda m: m.get("method") == method and "id" not in m and where(m["params"]),
            timeout,
            method,
            start,
        )
        return message["params"]

    def server_request(self, method: str, timeout: float = 15, start: int = 0) -> dict[str, Any]:
        return self.wait_for(
            lambda m: m.get("method") == method and "id" in m, timeout, method, start
        )

    def turn_completed(self, turn_id: str, timeout: float = 15) -> dict[str, Any]:
        return self.notification(
            "turn/completed", timeout, where=lambda p: p["turn"]["id"] == turn_id
        )["turn"]

    def start_thread(self, **params: Any) -> str:
        return self.call("thread/start", params)["thread"]["id"]

    def start_turn(self, thread_id: str, text: str, **params: Any) -> str:
        body = {"threadId": thread_id, "input": [{"type": "text", "text": text}], **params}
        return self.call("turn/start", body)["turn"]["id"]

    def run_turn(
        self, thread_id: str, text: str, timeout: float = 15, **params: Any
    ) -> dict[str, Any]:
        return self.turn_completed(self.start_turn(thread_id, text, **params), timeout)

    @abc.abstractmethod
    def close(self) -> None:
        """Release the transport (and the process, for spawned servers)."""


class StdioAppServer(AppServerClient):
    """``mmo-codex-standin app-server`` (or any codex binary) spawned over pipes."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        super().__init__()
        self.stderr_path = (
            Path(env.get("CODEX_HOME", cwd)) / f"app-server-{time.monotonic_ns()}.stderr"
        )
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=open(self.stderr_path, "wb"),
            env=env,
            cwd=cwd,
            start_new_session=True,
        )
        stdin, stdout = self.proc.stdin, self.proc.stdout
        if stdin is None or stdout is None:  # both were asked for as pipes just above
            raise RuntimeError("the app-server was spawned without stdin/stdout pipes")
        self._stdin: IO[bytes] = stdin
        self._stdout: IO[bytes] = stdout
        self._lock = threading.Lock()
        threading.Thread(target=self._reader, args=(self._read_line,), daemon=True).start()

    def _read_line(self) -> dict[str, Any] | None:
        while True:
            line = self._stdout.readline()
            if not line:
                return None
            if line.strip():
                return json.loads(line)

    def _write(self, message: dict[str, Any]) -> None:
        with self._lock:
            self._stdin.write((json.dumps(message) + "\n").encode())
            self._stdin.flush()

    def kill(self) -> None:
        """SIGKILL the whole process group (the app-server and any child it left)."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=10)

    def close(self) -> None:
        self.kill()
        for stream in (self._stdin, self._stdout):
            try:
                stream.close()
            except OSError:
                pass


class UnixAppServerClient(AppServerClient):
    """A WebSocket client on an app-server's ``unix://`` socket."""

    def __init__(self, path: Path, timeout: float = 10) -> None:
        super().__init__()
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.ws = WebSocketClient(str(path), timeout=None)
                break
            except (FileNotFoundError, ConnectionRefusedError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        self._lock = threading.Lock()
        threading.Thread(target=self._reader, args=(self.ws.recv,), daemon=True).start()

    def _write(self, message: dict[str, Any]) -> None:
        with self._lock:
            self.ws.send(message)

    def close(self) -> None:
        self.ws.close()


@pytest.fixture
def standin_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private ``CODEX_HOME`` with an ``auth.json``, plus private MMO state/config dirs."""
    home = tmp_path / "codex-home"
    home.mkdir()
    (home / "auth.json").write_text(json.dumps({"OPENAI_API_KEY": "sk-test-not-a-secret"}))
    monkeypatch.setenv("CODEX_HOME", str(home))
    monkeypatch.setenv("MMO_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("MMO_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("MMO_CODEX_BIN", str(standin_executable()))
    return home


@pytest.fixture
def standin_workspace(tmp_path: Path) -> Path:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    return workspace


@pytest.fixture
def spawn_standin(
    standin_home: Path, standin_workspace: Path
) -> Iterator[Callable[..., StdioAppServer]]:
    """Factory ``spawn_standin(*args, env=None, cwd=None)``: an uninitialised stdio client."""
    spawned: list[AppServerClient] = []

    def spawn(
        *extra: str, env: dict[str, str] | None = None, cwd: Path | None = None
    ) -> StdioAppServer:
        full_env = dict(os.environ, **(env or {}))
        client = StdioAppServer(
            [str(standin_executable()), "app-server", *extra], full_env, cwd or standin_workspace
        )
        spawned.append(client)
        return client

    yield spawn
    for client in spawned:
        client.close()

"""Drive the real native Codex app-server (the pinned CLI) in tests.

``run_turn`` writes a throw-away ``CODEX_HOME/config.toml`` (plugins off, a
custom provider pointing at a local gateway or upstream), starts the native
binary in its own process group, performs ``initialize`` / ``thread/start`` /
``turn/start``, answers server requests, and collects every message until
``turn/completed``. The whole process group is always killed at the end.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import tomlkit

from mmo_kernel.hosts.codex_cli import PINNED_CODEX_VERSION, project_codex

PROJECT_ROOT = Path(__file__).resolve().parents[2]
INSTALL_HINT = (
    f"the pinned real Codex CLI {PINNED_CODEX_VERSION} is not installed under "
    f"{PROJECT_ROOT / '.codex-cli'}; install it with `make codex` (or "
    f"`npm install --prefix .codex-cli @openai/codex@{PINNED_CODEX_VERSION}`) from the project root"
)


def codex_binary() -> Path:
    """The native pinned Codex binary; fails (never skips) with install instructions."""
    binary = project_codex(PROJECT_ROOT)
    if binary is None:
        raise AssertionError(INSTALL_HINT)
    return binary


def provider_config(provider_id: str, base_url: str, model: str,
                    provider_extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Config keys selecting a custom Responses provider at ``base_url``."""
    return {"model": model, "model_provider": provider_id, "model_providers": {
        provider_id: {"name": provider_id, "base_url": base_url, "wire_api": "responses",
                      **(provider_extra or {})}}}


def write_config(home: Path, config: dict[str, Any]) -> Path:
    """``config.toml`` with network-free features plus ``config`` (deep-merged on top)."""
    base: dict[str, Any] = {
        "approval_policy": "never",
        "sandbox_mode": "danger-full-access",
        "cli_auth_credentials_store": "file",
        "check_for_update_on_startup": False,
        # shell_snapshot spawns a login shell at start-up that outlives the turn
        "features": {"plugins": False, "remote_plugin": False, "shell_snapshot": False},
    }
    merged = _merge(base, config)
    home.mkdir(parents=True, exist_ok=True)
    path = home / "config.toml"
    path.write_text(tomlkit.dumps(merged), encoding="utf-8")
    return path


def _merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    out = dict(a)
    for key, value in b.items():
        out[key] = _merge(out[key], value) if isinstance(value, dict) and isinstance(
            out.get(key), dict) else value
    return out


@dataclass
class TurnResult:
    messages: list[dict[str, Any]] = field(default_factory=list)
    completed: dict[str, Any] | None = None
    stderr: str = ""

    def notifications(self, method: str) -> list[dict[str, Any]]:
        return [m["params"] for m in self.messages if m.get("method") == method]

    @property
    def status(self) -> str | None:
        return (self.completed or {}).get("turn", {}).get("status")

    @property
    def error(self) -> dict[str, Any] | None:
        return (self.completed or {}).get("turn", {}).get("error")

    def items(self, kind: str) -> list[dict[str, Any]]:
        return [p["item"] for p in self.notifications("item/completed")
                if p.get("item", {}).get("type") == kind]

    def agent_text(self) -> str:
        return "".join(i.get("text", "") for i in self.items("agentMessage"))


class AppServer:
    """One native app-server process; use as a context manager (kills its group on exit)."""

    def __init__(self, home: Path, cwd: Path, env: dict[str, str] | None = None) -> None:
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("CODEX_")}
        # a private HOME: the user's dotfiles (and their login-shell cost) stay out of tests
        private_home = home.parent / f"{home.name}-user-home"
        private_home.mkdir(parents=True, exist_ok=True)
        full_env["HOME"] = str(private_home)
        full_env.update(env or {})
        full_env["CODEX_HOME"] = str(home)
        full_env.setdefault("RUST_LOG", "error")
        self.proc = subprocess.Popen(
            [str(codex_binary()), "app-server"], cwd=cwd, env=full_env,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            start_new_session=True)
        self._lines: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._stderr: list[bytes] = []
        self._next_id = 1000
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            try:
                self._lines.put(json.loads(raw))
            except ValueError:
                continue
        self._lines.put(None)

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            self._stderr.append(raw)

    @property
    def stderr(self) -> str:
        return b"".join(self._stderr).decode("utf-8", errors="replace")

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        self.proc.stdin.flush()

    def next_message(self, deadline: float) -> dict[str, Any]:
        try:
            message = self._lines.get(timeout=max(0.01, deadline - time.monotonic()))
        except queue.Empty:
            raise TimeoutError(
                f"codex app-server sent nothing in time; stderr:\n{self.stderr}") from None
        if message is None:
            raise EOFError(f"codex app-server exited ({self.proc.poll()}); stderr:\n{self.stderr}")
        return message

    def request(self, method: str, params: dict[str, Any], deadline: float,
                seen: list[dict[str, Any]]) -> dict[str, Any]:
        self._next_id += 1
        rid = self._next_id
        self.send({"id": rid, "method": method, "params": params})
        while True:
            message = self.next_message(deadline)
            if "method" in message:
                seen.append(message)
                self.answer(message)
                continue
            if message.get("id") == rid:
                if "error" in message:
                    raise RuntimeError(f"{method} failed: {message['error']}")
                return message["result"]

    def answer(self, message: dict[str, Any]) -> None:
        """Approve what a server request asks (tests run with approval_policy=never)."""
        if "id" not in message:
            return
        method = message["method"]
        if method.endswith("requestApproval"):
            result: dict[str, Any] = {"decision": "accept"}
        elif method == "mcpServer/elicitation/request":
            result = {"action": "accept", "content": {}}
        else:
            result = {}
        self.send({"id": message["id"], "result": result})

    def __enter__(self) -> AppServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()

    def kill(self) -> None:
        """SIGKILL the server's group and the groups of any children it moved out of it."""
        try:
            children = psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.Error:
            children = []
        groups = {self.proc.pid}
        for child in children:
            try:
                groups.add(os.getpgid(child.pid))
            except ProcessLookupError:
                continue
        for group in groups - {os.getpgrp()}:
            try:
                os.killpg(group, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait(10)
        psutil.wait_procs(children, timeout=5)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


def run_turn(home: Path, cwd: Path, prompt: str, env: dict[str, str] | None = None,
             timeout: float = 60.0, thread_params: dict[str, Any] | None = None,
             turn_params: dict[str, Any] | None = None) -> TurnResult:
    """Start a thread and one turn; collect messages until ``turn/completed``."""
    result = TurnResult()
    deadline = time.monotonic() + timeout
    with AppServer(home, cwd, env) as server:
        try:
            server.request("initialize", {"clientInfo": {"name": "mmo-tests", "version": "1"}},
                           deadline, result.messages)
            server.send({"method": "initialized"})
            started = server.request("thread/start", {"cwd": str(cwd), **(thread_params or {})},
                                     deadline, result.messages)
            thread_id = started["thread"]["id"]
            turn = {"threadId": thread_id, "input": [{"type": "text", "text": prompt}],
                    **(turn_params or {})}
            server.request("turn/start", turn, deadline, result.messages)
            while result.completed is None:
                message = server.next_message(deadline)
                if "method" not in message:
                    continue
                result.messages.append(message)
                server.answer(message)
                if message["method"] == "turn/completed":
                    result.completed = message["params"]
        finally:
            result.stderr = server.stderr
    return result

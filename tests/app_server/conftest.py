"""Fixtures for the app-server client tests: the real pinned Codex, offline.

Real Codex needs a model to run a turn, so ``responses_server`` is a tiny
Responses-API HTTP server (built from the gateway's SSE event builder) that
answers each ``POST /v1/responses`` from a script; real Codex talks to it
through a custom provider in a private ``CODEX_HOME``.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from mmo_kernel.codex_cli import project_codex
from mmo_kernel.gateway.responses_stream import ResponsesStream, usage_block

PROJECT_ROOT = Path(__file__).resolve().parents[2]
PEER_SCRIPT = Path(__file__).with_name("peer.py")

Reply = Callable[[ResponsesStream, dict[str, Any]], bytes]
"""Builds one streamed response body from the request body Codex sent."""


def say(text: str, input_tokens: int = 120, output_tokens: int = 7) -> Reply:
    """A reply: one assistant message, then ``response.completed`` with usage."""

    def reply(stream: ResponsesStream, _body: dict[str, Any]) -> bytes:
        return (stream.created() + stream.message(text)
                + stream.completed(usage_block(input_tokens, output_tokens)))

    return reply


def call_tool(name: str, arguments: dict[str, Any]) -> Reply:
    """A reply: one function call the model makes."""

    def reply(stream: ResponsesStream, _body: dict[str, Any]) -> bytes:
        return (stream.created() + stream.function_call(name, json.dumps(arguments))
                + stream.completed(usage_block(100, 5)))

    return reply


@dataclass
class ResponsesServer:
    """A scripted model: replies are consumed in order; the default says ``FAKE_CODEX_OK``."""

    url: str = ""
    replies: list[Reply] = field(default_factory=list)
    bodies: list[dict[str, Any]] = field(default_factory=list)
    gate: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def script(self, *replies: Reply) -> None:
        with self.lock:
            self.replies.extend(replies)

    def next_reply(self, body: dict[str, Any]) -> Reply:
        with self.lock:
            self.bodies.append(body)
            return self.replies.pop(0) if self.replies else say("FAKE_CODEX_OK")


def _handler_for(server: ResponsesServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802 - http.server naming
            self._send(200, "application/json", b'{"object":"list","data":[],"models":[]}')

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            reply = server.next_reply(body)
            payload = reply(ResponsesStream(str(body.get("model") or "mock-model")), body)
            self._send(200, "text/event-stream", payload)

        def _send(self, status: int, kind: str, payload: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    return Handler


@pytest.fixture
def responses_server() -> Iterator[ResponsesServer]:
    state = ResponsesServer()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(state))
    httpd.daemon_threads = True
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield state
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def codex_binary() -> Path:
    binary = project_codex(PROJECT_ROOT)
    if binary is None:
        pytest.fail("the pinned Codex CLI is not installed under .codex-cli; run `make setup`",
                    pytrace=False)
    return binary


def write_codex_config(home: Path, base_url: str, approval_policy: str = "never") -> None:
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    (home / "config.toml").write_text(
        'model = "mock-model"\n'
        'model_provider = "mock"\n'
        f'approval_policy = "{approval_policy}"\n'
        'sandbox_mode = "read-only"\n'
        "[model_providers.mock]\n"
        'name = "mock"\n'
        f'base_url = "{base_url}"\n'
        'wire_api = "responses"\n'
        "request_max_retries = 0\n"
        "stream_max_retries = 0\n"
        "[features]\n"
        "plugins = false\n"
        "remote_plugin = false\n"
        "goals = true\n",
        encoding="utf-8",
    )


@dataclass
class AppServerSetup:
    """Everything needed to spawn an app-server in one test."""

    argv: list[str]
    cwd: Path
    env: dict[str, str]
    home: Path
    logs: Path


@pytest.fixture
def real_codex(mmo_env: Any, mmo_process_guard: Any, codex_binary: Path,
               responses_server: ResponsesServer, tmp_path: Path) -> AppServerSetup:
    """The real Codex app-server against the scripted model, in private dirs."""
    home = tmp_path / "agent-home"
    write_codex_config(home, responses_server.url)
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    logs = tmp_path / "logs"
    logs.mkdir()
    env = dict(os.environ, CODEX_HOME=str(home), RUST_LOG="warn")
    return AppServerSetup([str(codex_binary), "app-server"], workspace, env, home, logs)


@pytest.fixture
def peer(mmo_env: Any, mmo_process_guard: Any, tmp_path: Path) -> AppServerSetup:
    """A scripted JSON-RPC peer for what real Codex cannot do on demand offline."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    logs = tmp_path / "logs"
    logs.mkdir()
    return AppServerSetup([sys.executable, str(PEER_SCRIPT)], workspace, dict(os.environ),
                          tmp_path, logs)

"""A scripted Responses-API model so the real Codex can run turns offline.

Each ``POST /v1/responses`` is answered by the next scripted reply (built
with the gateway's SSE event builder); when the script is empty the model
says ``FAKE_CODEX_OK``. ``write_codex_config`` points a private
``CODEX_HOME`` at it through a custom provider.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from mmo_kernel.gateway.responses_stream import ResponsesStream, usage_block

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


def hang(release: threading.Event, text: str = "released") -> Reply:
    """A reply that holds the model call open until ``release`` is set (a slow turn)."""

    def reply(stream: ResponsesStream, body: dict[str, Any]) -> bytes:
        release.wait(20)
        return say(text)(stream, body)

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


def handler_for(server: ResponsesServer) -> type[BaseHTTPRequestHandler]:
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

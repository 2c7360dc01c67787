"""A real loopback HTTP server standing in for a model provider in tests.

Each test queues replies (status, content type, body chunks) and reads back
the requests the server received (path, headers, parsed JSON body).
"""

from __future__ import annotations

import json
import ssl
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    status: int = 200
    content_type: str = "text/event-stream"
    chunks: list[bytes] = field(default_factory=list)
    delay: float = 0.0


def sse(events: Iterable[dict[str, Any] | str], named: bool = False) -> list[bytes]:
    """SSE chunks: one ``data:`` frame per event (``event:`` lines when ``named``)."""
    out = []
    for event in events:
        data = event if isinstance(event, str) else json.dumps(event)
        name = f"event: {event['type']}\n" if named and isinstance(event, dict) else ""
        out.append(f"{name}data: {data}\n\n".encode())
    return out


def chat_text_reply(text: str, usage: tuple[int, int] = (11, 7), **extra: Any) -> Reply:
    """A streamed chat completion answering ``text`` in two deltas, then usage."""
    half = len(text) // 2
    chunks = [{"id": "c1", "model": "up", "choices": [{"index": 0, "delta": {"role": "assistant",
                                                                               "content": part}}],
               **extra} for part in (text[:half], text[half:]) if part]
    chunks.append({"id": "c1", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                   **extra})
    chunks.append({"id": "c1", "choices": [], "usage": {"prompt_tokens": usage[0],
                                                        "completion_tokens": usage[1],
                                                        "total_tokens": sum(usage)}})
    return Reply(chunks=sse(chunks) + [b"data: [DONE]\n\n"])


def chat_tool_reply(calls: list[tuple[str, str, str]], usage: tuple[int, int] = (20, 9)) -> Reply:
    """A streamed chat completion asking for tool calls ``(id, name, arguments)``, args split."""
    chunks = []
    for index, (call_id, name, args) in enumerate(calls):
        half = len(args) // 2
        chunks.append({"choices": [{"index": 0, "delta": {"tool_calls": [{
            "index": index, "id": call_id, "type": "function",
            "function": {"name": name, "arguments": args[:half]}}]}}]})
        chunks.append({"choices": [{"index": 0, "delta": {"tool_calls": [{
            "index": index, "function": {"arguments": args[half:]}}]}}]})
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}],
                   "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1]}})
    return Reply(chunks=sse(chunks) + [b"data: [DONE]\n\n"])


def chat_reasoning_reply(reasoning: list[str], then: Reply,
                         field: str = "reasoning_content") -> Reply:
    """``then`` (a streamed chat reply) preceded by reasoning deltas in ``field``.

    DeepSeek and Z.AI stream ``reasoning_content`` with ``content: null``;
    OpenRouter streams ``reasoning``.
    """
    deltas = sse({"id": "c1", "choices": [{"index": 0, "delta": {
        "role": "assistant", "content": None, field: part}}]} for part in reasoning)
    return Reply(then.status, then.content_type, deltas + then.chunks)


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


class FakeUpstream:
    """Context manager: ``url``, ``replies`` (FIFO; default reply when empty), ``seen``."""

    def __init__(self, default: Reply | None = None, tls: ssl.SSLContext | None = None) -> None:
        self.scheme = "https" if tls else "http"
        self.replies: list[Reply] = []
        self.default = default or Reply(200, "application/json", [b'{"ok":true}'])
        self.seen: list[Seen] = []
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw
                with owner._lock:
                    owner.seen.append(Seen(self.command, self.path,
                                           {k.lower(): v for k, v in self.headers.items()}, body))
                    reply = owner.replies.pop(0) if owner.replies else owner.default
                if reply.delay:
                    time.sleep(reply.delay)
                self.send_response(reply.status)
                self.send_header("Content-Type", reply.content_type)
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for part in reply.chunks:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

            do_POST = _handle
            do_GET = _handle

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        if tls is not None:
            self._server.socket = tls.wrap_socket(self._server.socket, server_side=True)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"{self.scheme}://{host}:{port}"

    def queue(self, *replies: Reply) -> None:
        with self._lock:
            self.replies.extend(replies)

    def __enter__(self) -> FakeUpstream:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

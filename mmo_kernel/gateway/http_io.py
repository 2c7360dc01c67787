"""Minimal HTTP/1.1 request parsing and response framing on asyncio streams."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

MAX_HEAD = 64 * 1024
MAX_BODY = 128 * 1024 * 1024
REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found",
           405: "Method Not Allowed", 411: "Length Required", 413: "Payload Too Large",
           415: "Unsupported Media Type", 429: "Too Many Requests", 500: "Internal Server Error",
           502: "Bad Gateway", 503: "Service Unavailable", 504: "Gateway Timeout"}


class BadRequest(Exception):
    """The client sent something that is not a request we can read; answer and close."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class Request:
    method: str
    path: str
    version: str
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""

    @property
    def keep_alive(self) -> bool:
        connection = self.headers.get("connection", "").lower()
        if self.version == "HTTP/1.0":
            return connection == "keep-alive"
        return connection != "close"


async def read_request(reader: asyncio.StreamReader) -> Request | None:
    """The next request on the connection, or None when the client closed it."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    except asyncio.LimitOverrunError:
        raise BadRequest(400, "request head too large") from None
    lines = head[:-4].decode("latin-1").split("\r\n")
    try:
        method, target, version = lines[0].split(" ", 2)
    except ValueError:
        raise BadRequest(400, "malformed request line") from None
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep:
            raise BadRequest(400, "malformed header line")
        headers[name.strip().lower()] = value.strip()
    request = Request(method.upper(), target.split("?", 1)[0], version, headers)
    request.body = await _read_body(reader, headers)
    return request


async def _read_body(reader: asyncio.StreamReader, headers: dict[str, str]) -> bytes:
    if headers.get("content-encoding", "identity").lower() not in ("identity", ""):
        raise BadRequest(415, f"content-encoding {headers['content-encoding']!r} is not supported")
    if "chunked" in headers.get("transfer-encoding", "").lower():
        parts: list[bytes] = []
        total = 0
        while True:
            size_line = await reader.readuntil(b"\r\n")
            size = int(size_line.split(b";")[0].strip() or b"0", 16)
            if size == 0:
                await reader.readuntil(b"\r\n")
                return b"".join(parts)
            total += size
            if total > MAX_BODY:
                raise BadRequest(413, "request body too large")
            parts.append(await reader.readexactly(size))
            await reader.readexactly(2)
    length = headers.get("content-length")
    if length is None:
        return b""
    if not length.isdigit():
        raise BadRequest(400, "invalid content-length")
    if int(length) > MAX_BODY:
        raise BadRequest(413, "request body too large")
    return await reader.readexactly(int(length))


def response_head(status: int, headers: dict[str, str]) -> bytes:
    lines = [f"HTTP/1.1 {status} {REASONS.get(status, 'Status')}"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def json_response(status: int, payload: Any, keep_alive: bool = True,
                  extra: dict[str, str] | None = None) -> bytes:
    body = json.dumps(payload, separators=(",", ":")).encode("utf-8")
    headers = {"Content-Type": "application/json", "Content-Length": str(len(body)),
               "Connection": "keep-alive" if keep_alive else "close", **(extra or {})}
    return response_head(status, headers) + body


def stream_head(keep_alive: bool = True) -> bytes:
    return response_head(200, {"Content-Type": "text/event-stream", "Cache-Control": "no-cache",
                               "Transfer-Encoding": "chunked",
                               "Connection": "keep-alive" if keep_alive else "close"})


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data) if data else b""


LAST_CHUNK = b"0\r\n\r\n"

"""Minimal RFC 6455 WebSocket framing over a unix socket.

Real ``codex app-server --listen unix://PATH`` answers an HTTP upgrade and
then carries one JSON-RPC message per text frame; the stand-in does the
same, so the host code that drives it also drives the real CLI. The
synchronous :class:`WebSocketClient` is what tests (and the TUI stub's
callers) use to talk to such a socket.
"""

from __future__ import annotations

import asyncio
import json
import struct
from typing import Any

from mmo_kernel.hosts import (
    OP_CLOSE,
    OP_PING,
    OP_PONG,
    UnixWebSocket,
    accept_key,
    encode_frame,
)
from mmo_kernel.hosts import unmask as _unmask


class WebSocketClosed(Exception):
    """The peer closed the connection (close frame or EOF)."""


async def server_handshake(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Answer the HTTP upgrade; a non-WebSocket client gets a 400 and EOF."""
    head = await reader.readuntil(b"\r\n\r\n")
    headers = {}
    for line in head.decode("latin-1").split("\r\n")[1:]:
        if ":" in line:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    key = headers.get("sec-websocket-key")
    if not key or "websocket" not in headers.get("upgrade", "").lower():
        writer.write(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n")
        await writer.drain()
        raise WebSocketClosed("client did not request a WebSocket upgrade")
    writer.write(
        b"HTTP/1.1 101 Switching Protocols\r\nconnection: Upgrade\r\nupgrade: websocket\r\n"
        + f"sec-websocket-accept: {accept_key(key)}\r\n\r\n".encode()
    )
    await writer.drain()


async def read_message(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> str:
    """The next text message; pings are answered, fragments joined."""
    parts: list[bytes] = []
    while True:
        try:
            b1, b2 = await reader.readexactly(2)
            length = b2 & 0x7F
            if length == 126:
                (length,) = struct.unpack("!H", await reader.readexactly(2))
            elif length == 127:
                (length,) = struct.unpack("!Q", await reader.readexactly(8))
            key = await reader.readexactly(4) if b2 & 0x80 else b""
            payload = await reader.readexactly(length)
        except (asyncio.IncompleteReadError, ConnectionError) as exc:
            raise WebSocketClosed("connection closed") from exc
        if key:
            payload = _unmask(payload, key)
        opcode = b1 & 0x0F
        if opcode == OP_CLOSE:
            raise WebSocketClosed("close frame received")
        if opcode == OP_PING:
            writer.write(encode_frame(OP_PONG, payload, mask=False))
            continue
        if opcode == OP_PONG:
            continue
        parts.append(payload)
        if b1 & 0x80:
            return b"".join(parts).decode("utf-8")


class WebSocketClient(UnixWebSocket):
    """Blocking JSON-message client for ``unix://`` app-server sockets (tests, tools)."""

    def __init__(self, path: str, timeout: float | None = 10.0) -> None:
        super().__init__(path, timeout)
        self.sock.settimeout(timeout)

    def send(self, message: dict[str, Any]) -> None:
        self.send_text(json.dumps(message).encode())

    def recv(self) -> dict[str, Any]:
        payload = self.receive_text()
        if payload is None:
            raise WebSocketClosed("connection closed")
        return json.loads(payload)

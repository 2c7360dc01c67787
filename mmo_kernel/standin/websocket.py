"""Minimal RFC 6455 WebSocket framing over a unix socket.

Real ``codex app-server --listen unix://PATH`` answers an HTTP upgrade and
then carries one JSON-RPC message per text frame; the stand-in does the
same, so the host code that drives it also drives the real CLI. The
synchronous :class:`WebSocketClient` is what tests (and the TUI stub's
callers) use to talk to such a socket.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import socket
import struct
from typing import Any

_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
OP_TEXT, OP_CLOSE, OP_PING, OP_PONG = 0x1, 0x8, 0x9, 0xA


class WebSocketClosed(Exception):
    """The peer closed the connection (close frame or EOF)."""


def accept_key(key: str) -> str:
    return base64.b64encode(hashlib.sha1((key + _GUID).encode()).digest()).decode()


def encode_frame(opcode: int, payload: bytes, *, mask: bool) -> bytes:
    head = bytes([0x80 | opcode])
    length = len(payload)
    mask_bit = 0x80 if mask else 0
    if length < 126:
        head += bytes([mask_bit | length])
    elif length < 1 << 16:
        head += bytes([mask_bit | 126]) + struct.pack("!H", length)
    else:
        head += bytes([mask_bit | 127]) + struct.pack("!Q", length)
    if not mask:
        return head + payload
    key = os.urandom(4)
    return head + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


def _unmask(payload: bytes, key: bytes) -> bytes:
    return bytes(b ^ key[i % 4] for i, b in enumerate(payload))


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


class WebSocketClient:
    """Blocking client for ``unix://`` app-server sockets (tests, tools)."""

    def __init__(self, path: str, timeout: float = 10.0) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self._buffer = b""
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(
            (
                "GET / HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
            ).encode()
        )
        while b"\r\n\r\n" not in self._buffer:
            self._fill()
        head, self._buffer = self._buffer.split(b"\r\n\r\n", 1)
        if b" 101 " not in head.split(b"\r\n")[0] or accept_key(key).encode() not in head:
            raise ConnectionError(f"WebSocket upgrade refused: {head[:200]!r}")

    def _fill(self) -> None:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise WebSocketClosed("connection closed")
        self._buffer += chunk

    def _take(self, count: int) -> bytes:
        while len(self._buffer) < count:
            self._fill()
        data, self._buffer = self._buffer[:count], self._buffer[count:]
        return data

    def send(self, message: dict[str, Any]) -> None:
        self.sock.sendall(encode_frame(OP_TEXT, json.dumps(message).encode(), mask=True))

    def recv(self) -> dict[str, Any]:
        while True:
            b1, b2 = self._take(2)
            length = b2 & 0x7F
            if length == 126:
                (length,) = struct.unpack("!H", self._take(2))
            elif length == 127:
                (length,) = struct.unpack("!Q", self._take(8))
            payload = self._take(length)
            if b1 & 0x0F == OP_CLOSE:
                raise WebSocketClosed("close frame received")
            if b1 & 0x0F == OP_TEXT:
                return json.loads(payload)

    def close(self) -> None:
        try:
            self.sock.sendall(encode_frame(OP_CLOSE, b"", mask=True))
        except OSError:
            pass
        self.sock.close()

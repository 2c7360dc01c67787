"""RFC 6455 WebSocket framing over a unix socket, as ``codex app-server --listen unix://``.

Real Codex answers an HTTP upgrade on such a socket and then carries one
JSON-RPC message per text frame. The interactive host, the stand-in and the
tests all speak it through this one module.
"""

from __future__ import annotations

import base64
import hashlib
import os
import socket
import struct
import threading
from pathlib import Path

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA


class WebSocketError(ConnectionError):
    """The socket refused the upgrade or broke the framing."""


def accept_key(key: str) -> str:
    """The ``Sec-WebSocket-Accept`` value a server owes for ``key``."""
    return base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()


def encode_frame(opcode: int, payload: bytes, *, mask: bool) -> bytes:
    """One final frame; clients must mask (RFC 6455 §5.3), servers must not."""
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
    return head + key + unmask(payload, key)


def unmask(payload: bytes, key: bytes) -> bytes:
    return bytes(b ^ key[i % 4] for i, b in enumerate(payload))


class UnixWebSocket:
    """A blocking WebSocket client on a unix socket; one reader, many writers."""

    def __init__(self, path: Path | str, timeout: float | None = 10.0) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        try:
            self.sock.connect(os.fspath(path))
            self._buffer = b""
            self._handshake()
        except BaseException:
            self.sock.close()
            raise
        # ``timeout`` bounds the connect and upgrade only: an app-server may rightly
        # stay silent for a long time (an idle interactive thread) without being lost.
        self.sock.settimeout(None)
        self._send_lock = threading.Lock()
        self.closed = False

    def _handshake(self) -> None:
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(
            ("GET / HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\n"
             f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
             "Sec-WebSocket-Version: 13\r\n\r\n").encode())
        while b"\r\n\r\n" not in self._buffer:
            self._fill()
        head, self._buffer = self._buffer.split(b"\r\n\r\n", 1)
        status = head.split(b"\r\n", 1)[0]
        if b" 101" not in status or accept_key(key).encode() not in head:
            raise WebSocketError(f"the server refused the WebSocket upgrade: {status[:120]!r}")

    def _fill(self) -> None:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise WebSocketError("the server closed the socket")
        self._buffer += chunk

    def _take(self, count: int) -> bytes:
        while len(self._buffer) < count:
            self._fill()
        data, self._buffer = self._buffer[:count], self._buffer[count:]
        return data

    def send_text(self, payload: bytes) -> None:
        self._send(OP_TEXT, payload)

    def _send(self, opcode: int, payload: bytes) -> None:
        with self._send_lock:
            self.sock.sendall(encode_frame(opcode, payload, mask=True))

    def receive_text(self) -> bytes | None:
        """The next text (or binary) message; ``None`` once the peer closes."""
        parts: list[bytes] = []
        try:
            while True:
                b1, b2 = self._take(2)
                length = b2 & 0x7F
                if length == 126:
                    (length,) = struct.unpack("!H", self._take(2))
                elif length == 127:
                    (length,) = struct.unpack("!Q", self._take(8))
                key = self._take(4) if b2 & 0x80 else b""
                payload = self._take(length)
                if key:
                    payload = unmask(payload, key)
                opcode = b1 & 0x0F
                if opcode == OP_CLOSE:
                    return None
                if opcode == OP_PING:
                    self._send(OP_PONG, payload)
                    continue
                if opcode == OP_PONG:
                    continue
                parts.append(payload)
                if b1 & 0x80:
                    return b"".join(parts)
        except (OSError, WebSocketError):
            return None

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            self._send(OP_CLOSE, b"")
        except OSError:
            pass
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()

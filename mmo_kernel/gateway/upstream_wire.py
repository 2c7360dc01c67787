"""Bytes of one upstream HTTP/1.1 connection, parsed straight from an asyncio protocol.

A protocol (rather than ``asyncio.StreamReader``) lets the client hand on
*everything* that one ``recv`` brought, decoded, in one piece: a burst of
upstream SSE chunks becomes one write to Codex instead of one per chunk, and
nothing waits for bytes that have not arrived. The idle timeout is one
timer per connection, re-armed lazily, not one per read.
"""

from __future__ import annotations

import asyncio

HIGH_WATER = 1024 * 1024
MAX_HEAD = 64 * 1024
MAX_LINE = 8 * 1024


class UpstreamProtocolError(Exception):
    """The upstream answered with something that is not HTTP/1.x."""


class RemoteDisconnected(ConnectionError):
    """The upstream closed the connection before the response was complete."""


class Wire(asyncio.Protocol):
    """Received bytes in ``buffer``; :meth:`more` waits for the next arrival."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.error: BaseException | None = None
        self.last = loop.time()
        self._waiter: asyncio.Future[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._timeout = 0.0
        self._paused = False

    # ----------------------------------------------------- asyncio side --

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        self.last = self.loop.time()
        if len(self.buffer) > HIGH_WATER and not self._paused and self.transport is not None:
            self._paused = True
            self.transport.pause_reading()
        self._wake(None)

    def eof_received(self) -> bool:
        self.closed = True
        self._wake(None)
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.error = exc
        self._wake(None)
        self.disarm()

    def _wake(self, error: BaseException | None) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            if error is None:
                waiter.set_result(None)
            else:
                waiter.set_exception(error)

    # ------------------------------------------------------- client side --

    @property
    def reusable(self) -> bool:
        return (not self.closed and not self.buffer and self.transport is not None
                and not self.transport.is_closing())

    def send(self, data: bytes) -> None:
        assert self.transport is not None
        self.last = self.loop.time()
        self.transport.write(data)

    async def more(self, timeout: float) -> None:
        """Wait for more bytes; ``RemoteDisconnected`` at EOF, ``TimeoutError`` when idle."""
        if self.closed:
            if isinstance(self.error, OSError):
                raise self.error
            raise RemoteDisconnected("upstream closed the connection")
        if self._paused and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()
        self._waiter = self.loop.create_future()
        self._timeout = timeout
        if self._timer is None:
            self._timer = self.loop.call_at(self.last + timeout, self._expire)
        await self._waiter

    def _expire(self) -> None:
        self._timer = None
        if self._waiter is None:
            return  # not waiting now: the next wait re-arms
        due = self.last + self._timeout
        if self.loop.time() < due:
            self._timer = self.loop.call_at(due, self._expire)
        else:
            self._wake(TimeoutError())

    def disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def close(self) -> None:
        self.disarm()
        if self.transport is not None:
            self.transport.close()

    def take(self, size: int) -> bytes:
        data = bytes(self.buffer[:size])
        del self.buffer[:size]
        return data


def parse_head(head: bytes) -> tuple[int, dict[str, str], bool]:
    """Status, lower-cased headers (repeats joined) and whether the connection stays open."""
    lines = head.decode("latin-1").split("\r\n")
    version, _, rest = lines[0].partition(" ")
    if not version.startswith("HTTP/1.") or not rest[:3].isdigit():
        raise UpstreamProtocolError("malformed status line")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep:
            raise UpstreamProtocolError("malformed header line")
        name, value = name.strip().lower(), value.strip()
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    connection = headers.get("connection", "").lower()
    keep = connection == "keep-alive" if version == "HTTP/1.0" else "close" not in connection
    return int(rest[:3]), headers, keep


async def read_head(wire: Wire, timeout: float) -> tuple[int, dict[str, str], bool]:
    """The final (non-1xx) response head."""
    while True:
        end = wire.buffer.find(b"\r\n\r\n")
        if end < 0:
            if len(wire.buffer) > MAX_HEAD:
                raise UpstreamProtocolError("response head too large")
            await wire.more(timeout)
            continue
        status, headers, keep = parse_head(wire.take(end + 4)[:-4])
        if not 100 <= status < 200:
            return status, headers, keep


class BodyDecoder:
    """Turns buffered bytes into body bytes for chunked, sized or close-delimited bodies."""

    def __init__(self, headers: dict[str, str]) -> None:
        self.chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        length = headers.get("content-length", "").strip()
        self.left: int | None = None if self.chunked or not length.isdigit() else int(length)
        self.until_close = not self.chunked and self.left is None
        self.done = self.left == 0
        self._state = "size"

    def decode(self, wire: Wire) -> bytes:
        """All the body bytes now available (``b""`` if none); sets ``done`` at the end."""
        if self.done:
            return b""
        if self.chunked:
            return self._chunked(wire)
        if self.until_close:
            data = wire.take(len(wire.buffer))
            self.done = wire.closed and not wire.buffer
            return data
        assert self.left is not None
        data = wire.take(min(self.left, len(wire.buffer)))
        self.left -= len(data)
        self.done = self.left == 0
        return data

    def _chunked(self, wire: Wire) -> bytes:
        """Decode in place: one pass over the buffer, one cut at the end."""
        buffer = wire.buffer
        view = memoryview(buffer)
        out: list[bytes] = []
        pos, size = 0, len(buffer)
        try:
            while pos < size:
                if self._state == "data":
                    assert self.left is not None
                    end = min(pos + self.left, size)
                    out.append(bytes(view[pos:end]))
                    self.left -= end - pos
                    pos = end
                    if self.left == 0:
                        self._state = "crlf"
                    continue
                if self._state == "crlf":
                    if size - pos < 2:
                        break
                    if buffer[pos:pos + 2] != b"\r\n":
                        raise UpstreamProtocolError("chunk not terminated by CRLF")
                    pos += 2
                    self._state = "size"
                    continue
                end = buffer.find(b"\r\n", pos)
                if end < 0:
                    if size - pos > MAX_LINE:
                        raise UpstreamProtocolError("chunk size line too long")
                    break
                line, pos = bytes(view[pos:end]), end + 2
                if self._state == "trailer":
                    if not line:
                        self.done = True
                        break
                    continue  # trailer fields are not used
                self._size_line(line)
        finally:
            view.release()
            del buffer[:pos]
        return b"".join(out) if len(out) != 1 else out[0]

    def _size_line(self, line: bytes) -> None:
        try:
            size = int(line.split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise UpstreamProtocolError("bad chunk size") from None
        if size < 0:
            raise UpstreamProtocolError("bad chunk size")
        self.left = size
        self._state = "data" if size else "trailer"

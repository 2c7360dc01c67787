"""The upstream client of async route drivers: HTTP/1.1 on the gateway's own event loop.

Running the upstream hop on the loop (instead of ``http.client`` in a worker
thread) removes a thread hand-off per chunk and ``http.client``'s parsing,
which measured as most of the gateway's added latency (docs/gateway.md).
Connections are kept alive and pooled per event loop (a transport belongs
to one loop); asyncio sets ``TCP_NODELAY``. Body bytes are handed on as soon
as they arrive, everything one ``recv`` brought in one piece.

Errors are the same ``GatewayError`` answers as the blocking client in
``upstream.py``: cannot connect 502, timeouts 504, upstream HTTP errors
mapped by ``map_upstream_status``.
"""

from __future__ import annotations

import asyncio
import re
import weakref
from collections.abc import AsyncGenerator, Mapping
from typing import Any

from mmo_kernel.gateway.errors import GatewayError, error_body
from mmo_kernel.gateway.upstream_proxy import uses_proxy
from mmo_kernel.gateway.upstream_target import Target, map_upstream_status, post_target, tls_context
from mmo_kernel.gateway.upstream_wire import BodyDecoder, UpstreamProtocolError, Wire, read_head

MAX_IDLE_PER_HOST = 32
_UNSAFE = re.compile(r"[\r\n\0]")
MAX_ERROR_BODY = 1024 * 1024
Key = tuple[str, str, int]
_pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[Key, list[Wire]]] = (
    weakref.WeakKeyDictionary())
_BROKEN = (OSError, UpstreamProtocolError)  # ConnectionError and ssl.SSLError are OSErrors


def _idle(key: Key) -> list[Wire]:
    pools = _pools.setdefault(asyncio.get_running_loop(), {})
    return pools.setdefault(key, [])


def close_idle_connections(loop: asyncio.AbstractEventLoop | None = None) -> None:
    """Close every pooled connection of ``loop`` (default: the running one); on shutdown."""
    for idle in _pools.pop(loop or asyncio.get_running_loop(), {}).values():
        for wire in idle:
            wire.close()


async def _connect(target: Target) -> tuple[Wire, bool]:
    """A pooled live connection (reused=True) or a new one."""
    idle = _idle(target.key)
    while idle:
        wire = idle.pop()
        if wire.reusable:
            return wire, True
        wire.close()
    loop = asyncio.get_running_loop()
    if target.scheme == "https":
        _transport, wire = await loop.create_connection(
            lambda: Wire(loop), target.host, target.port, ssl=tls_context(),
            server_hostname=target.host)
    else:
        _transport, wire = await loop.create_connection(lambda: Wire(loop), target.host,
                                                        target.port)
    return wire, False


def _release(key: Key, wire: Wire) -> None:
    wire.disarm()
    idle = _idle(key)
    if len(idle) < MAX_IDLE_PER_HOST and wire.reusable:
        idle.append(wire)
    else:
        wire.close()


def _request_head(target: Target) -> bytes:
    host = f"[{target.host}]" if ":" in target.host else target.host
    if target.port != (443 if target.scheme == "https" else 80):
        host = f"{host}:{target.port}"
    fields = "".join(f"{name}: {value}\r\n" for name, value in target.headers.items())
    if _UNSAFE.search(fields.replace("\r\n", " ")):
        bad = next(n for n, v in target.headers.items() if _UNSAFE.search(f"{n}{v}"))
        raise GatewayError(502, error_body(f"route header {bad!r} has an invalid value",
                                           "server_error", "bad_route"))
    try:
        return f"POST {target.path} HTTP/1.1\r\nHost: {host}\r\n{fields}\r\n".encode("latin-1")
    except UnicodeEncodeError:
        raise GatewayError(502, error_body("route header values must be latin-1 text",
                                           "server_error", "bad_route")) from None


class AsyncUpstreamResponse:
    """A 2xx upstream response whose body is read incrementally on the loop."""

    def __init__(self, wire: Wire, key: Key, status: int, headers: dict[str, str],
                 keep_alive: bool, timeout: float) -> None:
        self._wire = wire
        self._key = key
        self.status = status
        self.headers = headers
        self._timeout = timeout
        self._body = BodyDecoder(headers)
        self._keep_alive = keep_alive and not self._body.until_close
        self._released = False

    async def iter_bytes(self) -> AsyncGenerator[bytes, None]:
        """Body bytes as they arrive; the connection is pooled again after a full read."""
        complete = False
        try:
            while True:
                try:
                    data = self._body.decode(self._wire)
                    if not data and not self._body.done:
                        if self._body.until_close and self._wire.closed:
                            self._body.done = True
                        else:
                            await self._wire.more(self._timeout)
                            continue
                except TimeoutError:
                    raise GatewayError(504, error_body(
                        "upstream stream timed out", "server_error", "upstream_timeout")) from None
                except _BROKEN as exc:
                    raise GatewayError(502, error_body(
                        f"upstream stream broke: {type(exc).__name__}", "server_error",
                        "upstream_transport")) from None
                if data:
                    yield data
                elif self._body.done:
                    complete = True
                    return
        finally:
            if complete and self._keep_alive and not self._released:
                self._released = True
                _release(self._key, self._wire)
            else:
                self.close()

    async def read(self, limit: int | None = None) -> bytes:
        """The whole body (or about its first ``limit`` bytes, the connection then dropped)."""
        parts, size = [], 0
        chunks = self.iter_bytes()
        try:
            async for chunk in chunks:
                parts.append(chunk)
                size += len(chunk)
                if limit is not None and size > limit:
                    break
        finally:
            await chunks.aclose()
        return b"".join(parts)

    def close(self) -> None:
        """Drop the connection unless a full read already gave it back to the pool."""
        if not self._released:
            self._released = True
            self._wire.close()


async def _exchange(target: Target, request: bytes, timeout: float
                    ) -> tuple[Wire, int, dict[str, str], bool]:
    """Send the request and read the response head; retry once on a stale pooled connection."""
    attempt = 0
    while True:
        wire, reused = None, False
        try:
            async with asyncio.timeout(timeout):
                wire, reused = await _connect(target)
                wire.send(request)
                status, headers, keep = await read_head(wire, timeout)
            return wire, status, headers, keep
        except TimeoutError:
            if wire is not None:
                wire.close()
            raise GatewayError(504, error_body(
                f"upstream {target.host} timed out", "server_error", "upstream_timeout")) from None
        except _BROKEN as exc:
            if wire is not None:
                wire.close()
            if reused and attempt == 0 and isinstance(exc, ConnectionError):
                attempt += 1
                continue  # a pooled keep-alive connection the server had closed
            raise GatewayError(502, error_body(
                f"cannot reach upstream {target.host}: {type(exc).__name__}",
                "server_error", "upstream_transport")) from None


async def post_json_async(url: str, payload: Mapping[str, Any] | bytes,
                          headers: Mapping[str, str],
                          timeout: float = 300.0) -> AsyncUpstreamResponse:
    """POST JSON and return the response once its status is 2xx; else raise GatewayError."""
    target = post_target(url, payload, headers)
    if uses_proxy(*target.key):  # httpx2 carries proxied requests
        from mmo_kernel.gateway.upstream_httpx import post_proxied_async

        return await post_proxied_async(target, timeout)  # type: ignore[return-value]
    request = _request_head(target) + target.body
    wire, status, response_headers, keep = await _exchange(target, request, timeout)
    response = AsyncUpstreamResponse(wire, target.key, status, response_headers, keep, timeout)
    if status >= 400:
        try:
            raw = await response.read(MAX_ERROR_BODY)
        except GatewayError:
            raw = b""  # the status alone still says what went wrong
        raise map_upstream_status(status, raw)
    return response

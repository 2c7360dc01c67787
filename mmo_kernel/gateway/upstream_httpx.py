"""Upstream HTTP through httpx2 (pydantic's httpx) for everything the fast path does not speak.

The hand-written clients in ``upstream.py`` / ``upstream_async.py`` talk
straight to the provider. As soon as the environment names a proxy for the
target (``HTTPS_PROXY``, ``HTTP_PROXY``, ``ALL_PROXY``, minus ``NO_PROXY``),
the request goes through httpx2 instead, which implements HTTP CONNECT and
SOCKS proxies, proxy authentication and the ``NO_PROXY`` rules the way every
other HTTP tool does (``trust_env``). httpx2 is the client the official
``openai`` and ``mcp`` SDKs already install. Keeping it off the direct path
is a measured choice: it costs more per request than the fast path
(docs/gateway.md has the figures side by side).

Both wrappers expose what the route drivers read from the fast path's
responses (``status``, ``headers``, ``iter_bytes``, ``read``, ``close``),
and failures are the same ``GatewayError`` answers: cannot connect or a
broken proxy 502, timeouts 504, upstream HTTP errors mapped by status.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import threading
import weakref
from collections.abc import AsyncGenerator, Iterator
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from typing import Any

import httpx2

from mmo_kernel.gateway.errors import GatewayError, error_body
from mmo_kernel.gateway.upstream_target import Target, map_upstream_status, tls_context

MAX_ERROR_BODY = 1024 * 1024
_async_clients: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, tuple[ssl.SSLContext, httpx2.AsyncClient]] = (
    weakref.WeakKeyDictionary())
_sync_lock = threading.Lock()
_sync_client: tuple[ssl.SSLContext, httpx2.Client] | None = None


def _timeout(seconds: float) -> httpx2.Timeout:
    return httpx2.Timeout(seconds, connect=min(seconds, 30.0))


def _client_kwargs(context: ssl.SSLContext) -> dict[str, Any]:
    return {"verify": context, "trust_env": True, "follow_redirects": False,
            "timeout": _timeout(300.0)}


def _async_client() -> httpx2.AsyncClient:
    """The running loop's client, rebuilt when the CA store variables changed."""
    loop = asyncio.get_running_loop()
    context = tls_context()  # the fast path's context: SSL_CERT_FILE / SSL_CERT_DIR honoured
    held = _async_clients.get(loop)
    if held is None or held[0] is not context:
        held = _async_clients[loop] = (context, httpx2.AsyncClient(**_client_kwargs(context)))
    return held[1]


def _blocking_client() -> httpx2.Client:
    global _sync_client
    context = tls_context()
    with _sync_lock:
        if _sync_client is None or _sync_client[0] is not context:
            _sync_client = (context, httpx2.Client(**_client_kwargs(context)))
        return _sync_client[1]


def _url(target: Target) -> str:
    host = f"[{target.host}]" if ":" in target.host else target.host
    return f"{target.scheme}://{host}:{target.port}{target.path}"


def _request_headers(target: Target) -> dict[str, str]:
    return {k: v for k, v in target.headers.items() if k.lower() != "content-length"}


def _failure(exc: Exception, target: Target) -> GatewayError:
    if isinstance(exc, httpx2.TimeoutException):
        return GatewayError(504, error_body(f"upstream {target.host} timed out", "server_error",
                                            "upstream_timeout"))
    if isinstance(exc, httpx2.ProxyError):
        return GatewayError(502, error_body(
            f"proxy refused the connection to upstream {target.host}: {exc}", "server_error",
            "upstream_transport"))
    return GatewayError(502, error_body(
        f"cannot reach upstream {target.host} through the proxy: {type(exc).__name__}",
        "server_error", "upstream_transport"))


def _stream_failure(exc: Exception) -> GatewayError:
    if isinstance(exc, httpx2.TimeoutException):
        return GatewayError(504, error_body("upstream stream timed out", "server_error",
                                            "upstream_timeout"))
    return GatewayError(502, error_body(f"upstream stream broke: {type(exc).__name__}",
                                        "server_error", "upstream_transport"))


class ProxiedAsyncResponse:
    """A 2xx upstream response read incrementally on the loop (the fast path's interface)."""

    def __init__(self, context: AbstractAsyncContextManager[httpx2.Response],
                 response: httpx2.Response) -> None:
        self._context = context
        self._response = response
        self.status = response.status_code
        self.headers = {k.lower(): v for k, v in response.headers.items()}
        self._closed = False

    async def iter_bytes(self) -> AsyncGenerator[bytes, None]:
        try:
            async for chunk in self._response.aiter_bytes():
                if chunk:
                    yield chunk
        except httpx2.HTTPError as exc:
            raise _stream_failure(exc) from None
        finally:
            await self.aclose()

    async def read(self, limit: int | None = None) -> bytes:
        parts, size = [], 0
        async for chunk in self.iter_bytes():
            parts.append(chunk)
            size += len(chunk)
            if limit is not None and size > limit:
                break
        await self.aclose()
        return b"".join(parts)

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            await self._context.__aexit__(None, None, None)

    def close(self) -> None:
        """Drop the response (sync callers: the fast path's ``close``)."""
        if not self._closed:
            self._closed = True
            asyncio.get_running_loop().create_task(self._context.__aexit__(None, None, None))


async def post_proxied_async(target: Target, timeout: float) -> ProxiedAsyncResponse:
    """POST ``target`` through the environment's proxy; 2xx or ``GatewayError``."""
    context = _async_client().stream("POST", _url(target), content=target.body,
                                     headers=_request_headers(target), timeout=_timeout(timeout))
    try:
        response = await context.__aenter__()
    except httpx2.HTTPError as exc:
        raise _failure(exc, target) from None
    wrapped = ProxiedAsyncResponse(context, response)
    if response.status_code >= 400:
        try:
            raw = await wrapped.read(MAX_ERROR_BODY)
        except GatewayError:
            raw = b""
        raise map_upstream_status(response.status_code, raw)
    return wrapped


class ProxiedResponse:
    """The blocking twin of ``ProxiedAsyncResponse`` for ``serve_responses``."""

    def __init__(self, context: AbstractContextManager[httpx2.Response],
                 response: httpx2.Response) -> None:
        self._context = context
        self._response = response
        self.status = response.status_code
        self.headers = {k.lower(): v for k, v in response.headers.items()}
        self._closed = False

    def iter_bytes(self) -> Iterator[bytes]:
        try:
            for chunk in self._response.iter_bytes():
                if chunk:
                    yield chunk
        except httpx2.HTTPError as exc:
            raise _stream_failure(exc) from None
        finally:
            self.close()

    def json(self) -> Any:
        return json.loads(b"".join(self.iter_bytes()) or b"null")

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._context.__exit__(None, None, None)


def post_proxied(target: Target, timeout: float) -> ProxiedResponse:
    """Blocking POST through the environment's proxy; 2xx or ``GatewayError``."""
    context = _blocking_client().stream("POST", _url(target), content=target.body,
                                        headers=_request_headers(target),
                                        timeout=_timeout(timeout))
    try:
        response = context.__enter__()
    except httpx2.HTTPError as exc:
        raise _failure(exc, target) from None
    wrapped = ProxiedResponse(context, response)
    if response.status_code >= 400:
        raw = b"".join(wrapped.iter_bytes())[:MAX_ERROR_BODY]
        raise map_upstream_status(response.status_code, raw)
    return wrapped

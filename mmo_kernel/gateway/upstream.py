"""The blocking upstream client (``http.client``, keep-alive pool) for sync route drivers.

``serve_responses`` runs in a gateway worker thread (or any caller's
thread), so a blocking stdlib client is the right tool there; the gateway's
own fast path uses ``upstream_async`` instead. Both share ``post_target``
and the error mapping (``upstream_target``); a target a proxy variable
covers goes through ``upstream_httpx``. Failures
become ``GatewayError`` with the status Codex should see: connection errors
502 (retryable transport), timeouts 504, upstream HTTP errors their own
status with the upstream's error message.
"""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Iterator, Mapping
from typing import Any

from mmo_kernel.gateway.errors import GatewayError, error_body
from mmo_kernel.gateway.upstream_proxy import uses_proxy
from mmo_kernel.gateway.upstream_target import (
    map_upstream_status,
    post_target,
    tls_context,
)

READ_SIZE = 65536
_pool_lock = threading.Lock()
_pool: dict[tuple[str, str, int], list[http.client.HTTPConnection]] = {}


def _connect(scheme: str, host: str, port: int, timeout: float) -> http.client.HTTPConnection:
    key = (scheme, host, port)
    with _pool_lock:
        idle = _pool.get(key)
        if idle:
            conn = idle.pop()
            conn.timeout = timeout
            if conn.sock is not None:
                conn.sock.settimeout(timeout)
            return conn
    if scheme == "https":
        return http.client.HTTPSConnection(host, port, timeout=timeout, context=tls_context())
    return http.client.HTTPConnection(host, port, timeout=timeout)


def _release(scheme: str, host: str, port: int, conn: http.client.HTTPConnection) -> None:
    with _pool_lock:
        idle = _pool.setdefault((scheme, host, port), [])
        if len(idle) < 32:
            idle.append(conn)
            return
    conn.close()


class UpstreamResponse:
    """A successful (2xx) upstream response whose body is read incrementally."""

    def __init__(self, conn: http.client.HTTPConnection, response: http.client.HTTPResponse,
                 key: tuple[str, str, int]) -> None:
        self._conn = conn
        self._response = response
        self._key = key
        self.status = response.status
        self.headers = {k.lower(): v for k, v in response.getheaders()}

    def iter_bytes(self) -> Iterator[bytes]:
        """Body chunks as they arrive; the connection is pooled again after a full read."""
        complete = False
        try:
            while True:
                try:
                    chunk = self._response.read1(READ_SIZE)
                except TimeoutError:
                    raise GatewayError(504, error_body(
                        "upstream stream timed out", "server_error", "upstream_timeout")) from None
                except (OSError, http.client.HTTPException) as exc:
                    raise GatewayError(502, error_body(
                        f"upstream stream broke: {type(exc).__name__}", "server_error",
                        "upstream_transport")) from None
                if not chunk:
                    complete = True
                    return
                yield chunk
        finally:
            if complete and not self._response.will_close:
                _release(*self._key, self._conn)
            else:
                self._conn.close()

    def json(self) -> Any:
        return json.loads(b"".join(self.iter_bytes()) or b"null")


def post_json(url: str, payload: Mapping[str, Any] | bytes, headers: Mapping[str, str],
              timeout: float = 300.0) -> UpstreamResponse:
    """POST JSON and return the response once its status is 2xx; else raise GatewayError."""
    target = post_target(url, payload, headers)
    if uses_proxy(*target.key):  # httpx2 carries proxied requests
        from mmo_kernel.gateway.upstream_httpx import post_proxied

        return post_proxied(target, timeout)  # type: ignore[return-value]
    for attempt in (0, 1):
        conn = _connect(*target.key, timeout=timeout)
        reused = conn.sock is not None
        try:
            conn.request("POST", target.path, body=target.body, headers=target.headers)
            response = conn.getresponse()
            break
        except TimeoutError:
            conn.close()
            raise GatewayError(504, error_body(
                f"upstream {target.host} timed out", "server_error", "upstream_timeout")) from None
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            if reused and attempt == 0:
                continue  # a pooled keep-alive connection the server had closed
            raise GatewayError(502, error_body(
                f"cannot reach upstream {target.host}: {type(exc).__name__}",
                "server_error", "upstream_transport")) from None
    if response.status >= 400:
        raw = response.read()
        conn.close()
        raise map_upstream_status(response.status, raw)
    return UpstreamResponse(conn, response, target.key)

"""What both upstream clients share: the request target, the TLS context, the error mapping.

``upstream.py`` (blocking), ``upstream_async.py`` (the gateway's fast path) and
``upstream_httpx.py`` (proxied requests) send the same ``Target`` and turn an
upstream HTTP error into the same ``GatewayError``.
"""

from __future__ import annotations

import functools
import json
import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from mmo_kernel.gateway.errors import GatewayError, error_body


def tls_context() -> ssl.SSLContext:
    """The verifying TLS context for the CA store ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` name now.

    Unset, the system store. Building a context loads the store (milliseconds),
    so it is made once per value of the two variables.
    """
    return _tls_context(os.environ.get("SSL_CERT_FILE") or None,
                        os.environ.get("SSL_CERT_DIR") or None)


@functools.lru_cache(maxsize=8)
def _tls_context(cafile: str | None, capath: str | None) -> ssl.SSLContext:
    if cafile is None and capath is None:
        return ssl.create_default_context()
    return ssl.create_default_context(cafile=cafile, capath=capath)


def upstream_error(status: int, raw: bytes) -> tuple[str, str | None, str | None]:
    """``(message, code, type)`` of a provider's error body (OpenAI and Anthropic shapes).

    Without a readable message, a short excerpt of the body; ``code`` and
    ``type`` only when the provider gave them as strings.
    """
    try:
        doc = json.loads(raw)
    except ValueError:
        text = raw.decode("utf-8", errors="replace").strip()
        return text[:500] or f"upstream returned HTTP {status}", None, None
    error = doc.get("error") if isinstance(doc, dict) else None
    if isinstance(error, dict):
        code, kind = error.get("code"), error.get("type")
        message = error.get("message")
        return (message if isinstance(message, str) else json.dumps(doc)[:500],
                code if isinstance(code, str) and code else None,
                kind if isinstance(kind, str) and kind else None)
    if isinstance(error, str):
        return error, None, None
    if isinstance(doc, dict) and isinstance(doc.get("message"), str):
        return doc["message"], None, None
    return json.dumps(doc)[:500], None, None


def upstream_error_message(status: int, raw: bytes) -> str:
    """The provider's own error text, else a short excerpt of the body."""
    return upstream_error(status, raw)[0]


def map_upstream_status(status: int, raw: bytes) -> GatewayError:
    """Turn an upstream HTTP error into the error Codex classifies the same way.

    429 stays 429 (a rate limit Codex retries, unless the code or type says
    ``insufficient_quota``); 401/403 become 401 (terminal); other 4xx are 400
    (terminal, the provider's message shown; ``context_length_exceeded`` makes
    it Codex's context-window error); 5xx stay 5xx (retryable). The provider's
    own ``code`` and ``type`` are kept, since that is what Codex and the SDKs
    classify by; the defaults below only fill in what the provider left out.
    """
    message, code, kind = upstream_error(status, raw)
    if status == 429:
        status, default_kind, default_code = 429, "rate_limit_error", "rate_limit_exceeded"
    elif status in (401, 403):
        status, default_kind, default_code = 401, "authentication_error", "invalid_api_key"
    elif 400 <= status < 500:
        status, default_kind, default_code = 400, "invalid_request_error", None
    else:
        status = status if 500 <= status <= 599 else 502
        default_kind, default_code = "server_error", "upstream_error"
    return GatewayError(status, error_body(message, kind or default_kind, code or default_code))


@dataclass(frozen=True)
class Target:
    """One upstream POST, ready to send: where to, and the exact bytes of its body."""

    scheme: str
    host: str
    port: int
    path: str
    body: bytes
    headers: dict[str, str]

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.scheme, self.host, self.port)


def post_target(url: str, payload: Mapping[str, Any] | bytes,
                headers: Mapping[str, str]) -> Target:
    """Check the URL and serialise the body once (bytes: already JSON), for both clients."""
    parts = urlsplit(url)
    scheme = parts.scheme
    if scheme not in ("http", "https") or not parts.hostname:
        raise GatewayError(502, error_body(f"route base_url is not usable: {scheme}://...",
                                           "server_error", "bad_route"))
    port = parts.port or (443 if scheme == "https" else 80)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    body = payload if isinstance(payload, bytes) else json.dumps(
        payload, separators=(",", ":")).encode("utf-8")
    all_headers = {"Content-Type": "application/json",
                   "Accept": "text/event-stream, application/json",
                   **headers, "Content-Length": str(len(body))}
    return Target(scheme, parts.hostname, port, path, body, all_headers)

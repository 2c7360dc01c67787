"""Who may talk to ``mmo ui``: the person who started it, from a browser on this machine.

Why each check: the server binds loopback, but any web page the person visits can make
their browser send requests to ``127.0.0.1``. So a request must carry the run's secret
(given once in the printed URL, then kept in an HttpOnly, SameSite=Strict cookie that no
other site can make the browser send), must name exactly the bound ``127.0.0.1:PORT`` as
its Host (a rebound DNS name pointing at loopback names another host), and a POST must
also come from that origin (``Origin``) and carry the page's CSRF token. Anything else is
a bare 403. Every response forbids framing, sniffing, referrers and caching, and its
content security policy allows nothing but this origin: a page cannot reach anywhere else.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qs, urlencode

COOKIE = "mmo_ui"
LOOPBACK = "127.0.0.1"
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
]

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


@dataclass(frozen=True)
class Secrets:
    """This run's secrets: fresh in every ``mmo ui`` process, never written anywhere."""

    token: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    """Given once in the printed URL."""
    cookie: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    """What the browser keeps instead of the token."""
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    """Embedded in every page; every POST must send it back."""


def _same(given: str | None, wanted: str) -> bool:
    return given is not None and hmac.compare_digest(given.encode(), wanted.encode())


def _header(scope: Scope, name: bytes) -> str | None:
    values = [v for k, v in scope.get("headers", []) if k == name]
    if len(values) != 1:
        return None  # absent, or repeated (ambiguous: refused)
    return values[0].decode("latin-1")


def _cookie(scope: Scope) -> str | None:
    raw = _header(scope, b"cookie")
    if raw is None:
        return None
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(raw)
    except Exception:  # noqa: BLE001 - a malformed cookie header is no credential
        return None
    morsel = jar.get(COOKIE)
    return None if morsel is None else morsel.value


async def _deny(send: Send, why: str) -> None:
    body = f"403 forbidden: {why}\n".encode()
    await send({"type": "http.response.start", "status": 403,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                            (b"content-length", str(len(body)).encode()), *HEADERS]})
    await send({"type": "http.response.body", "body": body})


async def _welcome(scope: Scope, send: Send, keys: Secrets) -> None:
    """The URL's token traded for the cookie, and the token dropped from the address bar."""
    query = {k: v for k, v in parse_qs(scope.get("query_string", b"").decode()).items()
             if k != "token"}
    target = scope.get("path", "/") + ("?" + urlencode(query, doseq=True) if query else "")
    cookie = f"{COOKIE}={keys.cookie}; HttpOnly; SameSite=Strict; Path=/"
    await send({"type": "http.response.start", "status": 303,
                "headers": [(b"location", target.encode()), (b"set-cookie", cookie.encode()),
                            (b"content-length", b"0"), *HEADERS]})
    await send({"type": "http.response.body", "body": b""})


class Guard:
    """ASGI middleware in front of every route (the event stream included)."""

    def __init__(self, app: Any, keys: Secrets, port: int) -> None:
        self.app, self.keys = app, keys
        self.origin = f"http://{LOOPBACK}:{port}"
        self.host = f"{LOOPBACK}:{port}"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":
            await _deny(send, "not HTTP")
            return
        if _header(scope, b"host") != self.host:
            await _deny(send, "unexpected Host")
            return
        query = parse_qs(scope.get("query_string", b"").decode())
        given = query.get("token", [None])
        if len(given) == 1 and given[0] is not None and _same(given[0], self.keys.token) \
                and scope["method"] == "GET":
            await _welcome(scope, send, self.keys)
            return
        if not _same(_cookie(scope), self.keys.cookie):
            await _deny(send, "missing or wrong token (open the URL `mmo ui` printed)")
            return
        if scope["method"] not in ("GET", "HEAD"):
            if _header(scope, b"origin") != self.origin:
                await _deny(send, "cross-origin request")
                return
            if not _same(_header(scope, b"x-csrf-token"), self.keys.csrf):
                scope = {**scope, "mmo_csrf_pending": True}  # a form post: checked on its body
        await self.app(scope, receive, self._secured(send))

    @staticmethod
    def _secured(send: Send) -> Send:
        async def wrapped(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                present = {k.lower() for k, _ in message.get("headers", [])}
                extra = [(k, v) for k, v in HEADERS if k not in present]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)
        return wrapped


def csrf_ok(scope: Scope, form_value: str | None, keys: Secrets) -> bool:
    """A POST passed the header check already, or its form carries the token."""
    return not scope.get("mmo_csrf_pending") or _same(form_value, keys.csrf)


__all__ = ["COOKIE", "CSP", "Guard", "LOOPBACK", "Secrets", "csrf_ok"]

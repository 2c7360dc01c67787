"""The ``mmo serve`` ASGI application: admin API, ``/mcp`` and the runner hub in one app.

``create_app`` builds the store, the runner hub and the tool router and hangs them on
``app.state`` (``store``, ``hub``, ``router``), with ``state_dir``, ``public_url``,
``allow_origins`` and ``url`` (the server's own base URL: ``public_url``, else set by
whoever bound the socket). Every HTTP request body is bounded by ``MAX_BODY_BYTES`` (spec
12, "Limits"): the bytes are counted as they stream in, so an oversized body is refused
with 413 without ever being held in memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mmo_kernel.serve import admin_api, mcp_endpoint
from mmo_kernel.serve.hub import RunnerHub
from mmo_kernel.serve.router import Router
from mmo_kernel.serve.store import ServerStore

log = logging.getLogger("mmo.serve")
MAX_BODY_BYTES = 8 * 1024 * 1024
TOO_LARGE = "request body too large"


class BodyTooLarge(Exception):
    """Raised from ``receive`` when a request body passes ``MAX_BODY_BYTES``."""


class BodyLimit:
    """ASGI middleware: 413 for any HTTP request whose body exceeds ``limit`` bytes.

    A declared ``Content-Length`` over the limit is refused before the app runs; a streamed
    (chunked) body is counted message by message and the app's ``receive`` raises once it
    passes the limit. Whatever the app then sends is replaced by the 413, which closes the
    connection; the rest of the body is read and dropped before it (``_drain``), never kept.
    """

    def __init__(self, app: ASGIApp, limit: int = MAX_BODY_BYTES) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.limit:
            await _drain(receive)  # refused from the headers; what comes is dropped
            await _too_large(scope, send)
            return
        state = {"seen": 0, "over": False, "started": False}

        async def limited_receive() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                state["seen"] += len(message.get("body", b""))
                if state["seen"] > self.limit:
                    state["over"] = True
                    raise BodyTooLarge
            return message

        async def guarded_send(message: Message) -> None:
            if state["over"]:
                return  # the app's reply to a body it never fully saw is dropped
            if message["type"] == "http.response.start":
                state["started"] = True
            await send(message)

        try:
            await self.app(scope, limited_receive, guarded_send)
        except BodyTooLarge:
            pass
        if state["over"] and not state["started"]:
            await _drain(receive)
            await _too_large(scope, send)


DRAIN_BYTES = 4 * MAX_BODY_BYTES
DRAIN_IDLE_SECONDS = 1.0


async def _drain(receive: Receive) -> None:
    """Read and drop what the client is still sending before its 413 (at most
    ``DRAIN_BYTES``; a client silent for ``DRAIN_IDLE_SECONDS`` or gone ends it).

    The server closes the connection after a 413; closing while the client still sends
    makes its TCP stack reset the connection, and the reset can discard the 413 before the
    client reads it. (After the response, the server's ``receive`` no longer reads.)
    """
    budget = DRAIN_BYTES
    while budget > 0:
        try:
            message = await asyncio.wait_for(receive(), DRAIN_IDLE_SECONDS)
        except TimeoutError:
            return
        if message["type"] != "http.request":
            return
        budget -= len(message.get("body", b""))
        if not message.get("more_body"):
            return


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def _too_large(scope: Scope, send: Send) -> None:
    if scope.get("path", "").startswith("/mcp"):
        body: dict[str, Any] = {"jsonrpc": "2.0", "id": None,
                                "error": {"code": -32600, "message": TOO_LARGE}}
    else:
        body = {"success": False, "error": TOO_LARGE}
    data = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": 413,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(data)).encode()),
                            (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": data})


async def _api_http_error(request: Request, exc: Exception) -> Response:
    """404/405 under ``/api`` answer in the API's JSON shape; elsewhere starlette's text."""
    assert isinstance(exc, HTTPException)
    if request.url.path.startswith("/api"):
        phrase = {404: "not found", 405: "method not allowed"}.get(exc.status_code,
                                                                   str(exc.detail).lower())
        return JSONResponse({"success": False, "error": phrase}, status_code=exc.status_code,
                            headers=exc.headers)
    return Response(str(exc.detail), status_code=exc.status_code, headers=exc.headers)


def create_app(state_dir: Path, *, public_url: str | None = None,
               allow_origins: list[str] | None = None) -> Starlette:
    """The whole server as one Starlette app (see the module docstring for ``app.state``)."""
    store = ServerStore(Path(state_dir))
    hub = RunnerHub(store)
    router = Router(store, hub, Path(state_dir))
    routes: list[BaseRoute] = [*admin_api.routes(), *mcp_endpoint.routes(), hub.websocket_route]

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        for part in (hub, router):
            await _maybe_call(part, "start")
        try:
            yield
        finally:
            for part in (router, hub):
                await _maybe_call(part, "stop")
            await _maybe_call(hub, "close_all")

    app = Starlette(routes=routes, middleware=[Middleware(BodyLimit)], lifespan=lifespan,
                    exception_handlers={HTTPException: _api_http_error})
    app.state.store, app.state.hub, app.state.router = store, hub, router
    app.state.state_dir = Path(state_dir)
    app.state.public_url = public_url.rstrip("/") if public_url else None
    app.state.allow_origins = list(allow_origins or [])
    app.state.url = app.state.public_url
    return app


async def _maybe_call(part: Any, name: str) -> None:
    """Call ``part.<name>()`` if the component has it (awaiting a coroutine result)."""
    method = getattr(part, name, None) if part is not None else None
    if callable(method):
        result = method()
        if hasattr(result, "__await__"):
            await result

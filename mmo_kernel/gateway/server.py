"""The gateway HTTP server: one asyncio loop for connections, parsing and writing.

Each ``POST .../responses`` is an :class:`~.exchange.Exchange`: async route
drivers stream on the loop itself; blocking drivers are pumped by a pool
thread. See docs/gateway.md for why.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from mmo_kernel import package_version
from mmo_kernel.gateway import http_io
from mmo_kernel.gateway.errors import GatewayError, error_body, not_found
from mmo_kernel.gateway.exchange import Exchange
from mmo_kernel.gateway.listing import models_payload
from mmo_kernel.gateway.request_log import RequestLog, new_record, now_iso
from mmo_kernel.gateway.sources import CatalogView
from mmo_kernel.gateway.upstream_async import close_idle_connections
from mmo_kernel.plugin.manager import get_driver

SERVICE = "mmo-gateway"
__all__ = ["SERVICE", "GatewayServer", "GatewayThread"]


class GatewayServer:
    """Serves ``/health``, ``/v1/models`` and ``/routes/<id>/v1/{models,responses}``."""

    def __init__(self, catalog: Any = None, log: RequestLog | None = None,
                 driver_for: Callable[[str], Any] | None = None, max_streams: int = 64) -> None:
        self.catalog = catalog or CatalogView()
        self.log = log or RequestLog()
        self._driver_for = driver_for or (lambda name: get_driver("route_drivers", name))
        self._pool = ThreadPoolExecutor(max_workers=max_streams, thread_name_prefix="mmo-gw")
        self._server: asyncio.base_events.Server | None = None
        self.started_at = time.time()
        self.in_flight = 0
        """Requests being answered now (touched on the loop thread only)."""
        self.last_activity = time.monotonic()
        self.exit_reason: str | None = None
        """Why ``watch_lifetime`` ended the gateway (``idle`` or ``orphaned: ...``)."""

    async def start(self, host: str, port: int) -> tuple[str, int]:
        self._server = await asyncio.start_server(self._connection, host, port,
                                                  limit=http_io.MAX_HEAD, reuse_address=True)
        sock_host, sock_port = self._server.sockets[0].getsockname()[:2]
        return sock_host, sock_port

    async def serve_forever(self) -> None:
        assert self._server is not None
        async with self._server:
            await self._server.serve_forever()

    def idle_for(self) -> float:
        """Seconds since the last request ended (0 while one is being answered)."""
        return 0.0 if self.in_flight else time.monotonic() - self.last_activity

    def stop_listening(self) -> None:
        if self._server is not None:
            self._server.close()

    async def watch_lifetime(self, stop: asyncio.Event, *, orphaned: Callable[[], str | None],
                             live_work: Callable[[], bool],
                             claim_idle: Callable[[Callable[[], bool], Callable[[], None]], bool],
                             idle_seconds: float, check_seconds: float) -> None:
        """Set ``stop`` when the gateway has no reason to live (spec 08, issue 13).

        It is orphaned when ``orphaned()`` gives a reason twice in a row (its state
        dir or record is gone); it is idle when no request came for ``idle_seconds``
        (0: never idle) and ``live_work()`` finds no session or job that may still call
        it, confirmed by ``claim_idle`` under the starters' lock.
        """
        misses = 0
        while not stop.is_set():
            await asyncio.sleep(check_seconds)
            reason = await asyncio.to_thread(orphaned)
            misses = misses + 1 if reason else 0
            if misses >= 2:
                self.exit_reason = f"orphaned: {reason}"
                break
            if reason or idle_seconds <= 0 or self.idle_for() < idle_seconds:
                continue
            if await asyncio.to_thread(live_work):
                self.last_activity = time.monotonic()  # look again one idle period later
                continue
            if claim_idle(lambda: self.idle_for() >= idle_seconds, self.stop_listening):
                self.exit_reason = "idle"
                break
        if self.exit_reason:
            print(f"{now_iso()} mmo gateway: exiting, {self.exit_reason}", file=sys.stderr,
                  flush=True)
            stop.set()

    def close(self) -> None:
        """Stop listening and drop pooled upstream connections; call on the server's loop."""
        if self._server is not None:
            self._server.close()
        try:
            close_idle_connections()
        except RuntimeError:
            pass  # called off the loop: its pooled connections die with it
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.log.close()

    # ------------------------------------------------------------ routing --

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    request = await http_io.read_request(reader)
                except http_io.BadRequest as exc:
                    writer.write(http_io.json_response(
                        exc.status, error_body(str(exc), "invalid_request_error"), False))
                    await writer.drain()
                    return
                if request is None:
                    return
                self.in_flight += 1
                try:
                    await self._dispatch(request, writer)
                finally:
                    self.in_flight -= 1
                    self.last_activity = time.monotonic()
                if not request.keep_alive:
                    return
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            return  # client went away, or the server is shutting down
        finally:
            writer.close()

    async def _dispatch(self, request: http_io.Request, writer: asyncio.StreamWriter) -> None:
        parts = [p for p in request.path.split("/") if p]
        keep = request.keep_alive
        if request.method == "GET" and parts == ["health"]:
            writer.write(http_io.json_response(200, self.health(), keep))
        elif request.method == "GET" and parts == ["v1", "models"]:
            writer.write(http_io.json_response(200, self._all_models(), keep))
        elif len(parts) == 4 and parts[0] == "routes" and parts[2] == "v1":
            await self._route_request(request, parts[1], parts[3], writer)
            return
        else:
            err = not_found(f"no gateway endpoint {request.method} {request.path}")
            writer.write(http_io.json_response(err.status, err.body, keep))
        await writer.drain()

    def health(self) -> dict[str, Any]:
        return {"service": SERVICE, "status": "ok", "pid": os.getpid(),
                "version": package_version(), "started_at": self.started_at}

    def _all_models(self) -> dict[str, Any]:
        try:
            _routes, models = self.catalog.current()
        except Exception as exc:  # a broken catalog fragment must not take the gateway down
            return {"object": "list", "data": [], "error": f"catalog unavailable: {exc}"}
        return models_payload(list(models))

    async def _route_request(self, request: http_io.Request, route_id: str, leaf: str,
                             writer: asyncio.StreamWriter) -> None:
        keep = request.keep_alive
        try:
            routes, models = self.catalog.current()
        except Exception as exc:
            await self._refuse(request, route_id, writer, GatewayError(500, error_body(
                f"catalog unavailable: {exc}", "server_error", "catalog_unavailable")))
            return
        route = routes.get(route_id)
        disabled = getattr(self.catalog, "disabled", {})
        if route is None and route_id in disabled:
            # A configuration error Codex should stop on (400), not retry as a 5xx.
            err = GatewayError(400, error_body(
                f"route {route_id!r} is disabled: {disabled[route_id]}",
                "invalid_request_error", "route_disabled"))
        elif route is None:
            err = not_found(f"unknown route {route_id!r}")
        elif request.method == "GET" and leaf == "models":
            ids = [m.id for m in models.values() if m.route == route_id]
            writer.write(http_io.json_response(200, models_payload(ids), keep))
            await writer.drain()
            return
        elif request.method == "POST" and leaf == "responses":
            await Exchange(self, request, route, models, writer).run()
            return
        else:
            err = not_found(f"no gateway endpoint {request.method} {request.path}")
        await self._refuse(request, route_id, writer, err)

    async def _refuse(self, request: http_io.Request, route_id: str,
                      writer: asyncio.StreamWriter, err: GatewayError) -> None:
        """Answer a route request with ``err`` before any driver runs, and log it."""
        record = new_record(route_id[:128], request.headers)
        record.update(status=err.status, latency_ms=0.0, error=err.message)
        self.log.write(record)
        if err.status >= 500:
            print(f"{now_iso()} mmo gateway: {request.method} {request.path}: HTTP {err.status}: "
                  f"{err.message}", file=sys.stderr, flush=True)
        writer.write(http_io.json_response(err.status, err.body, request.keep_alive))
        await writer.drain()

    def submit(self, fn: Callable[[], None]) -> None:
        self._pool.submit(fn)

    def driver(self, name: str) -> Any:
        return self._driver_for(name)


class GatewayThread:
    """A gateway running on its own loop thread (tests, benchmarks, embedding)."""

    def __init__(self, server: GatewayServer, host: str = "127.0.0.1", port: int = 0) -> None:
        self.server = server
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(host, port), daemon=True)
        self.address: tuple[str, int] = ("", 0)

    def _run(self, host: str, port: int) -> None:
        asyncio.set_event_loop(self._loop)
        self.address = self._loop.run_until_complete(self.server.start(host, port))
        self._ready.set()
        try:
            self._loop.run_until_complete(self.server.serve_forever())
        except asyncio.CancelledError:
            pass

    @property
    def url(self) -> str:
        return f"http://{self.address[0]}:{self.address[1]}"

    def __enter__(self) -> GatewayThread:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("gateway thread did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        def stop() -> None:
            self.server.close()
            for task in asyncio.all_tasks(self._loop):
                task.cancel()
        self._loop.call_soon_threadsafe(stop)
        self._thread.join(10)
        self._loop.close()

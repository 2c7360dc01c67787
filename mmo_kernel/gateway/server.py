"""The gateway HTTP server: asyncio for connections, a worker thread per stream.

Connections, parsing and writing live on one asyncio loop. A route driver's
``serve_responses`` is an ordinary (blocking) iterator, so each streamed
response is pumped by a pool thread that hands chunks to the loop; the loop
writes every chunk as soon as it arrives, batching only what is already
queued. See docs/gateway.md for why.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from .. import package_version
from ..plugins import get_driver
from . import http_io
from .errors import GatewayError, bad_request, error_body, not_found
from .faults import FAULT_HEADER, ROUTE_FAULTS, fault_error
from .listing import models_payload
from .notes import LogNote
from .request_log import RequestLog, now_iso
from .responses_stream import ResponsesStream
from .sources import CatalogView, CredentialEnv, credential_value
from .sse import SseDecoder

SERVICE = "mmo-gateway"
SESSION_HEADER = "x-mmo-session"
_END = object()


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

    async def start(self, host: str, port: int) -> tuple[str, int]:
        self._server = await asyncio.start_server(self._connection, host, port,
                                                  limit=http_io.MAX_HEAD, reuse_address=True)
        sock_host, sock_port = self._server.sockets[0].getsockname()[:2]
        return sock_host, sock_port

    async def serve_forever(self) -> None:
        assert self._server is not None
        async with self._server:
            await self._server.serve_forever()

    def close(self) -> None:
        if self._server is not None:
            self._server.close()
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
                await self._dispatch(request, writer)
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
            err = GatewayError(500, error_body(f"catalog unavailable: {exc}", "server_error"))
            writer.write(http_io.json_response(err.status, err.body, keep))
            await writer.drain()
            return
        route = routes.get(route_id)
        if route is None:
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
        writer.write(http_io.json_response(err.status, err.body, keep))
        await writer.drain()

    def submit(self, fn: Callable[[], None]) -> None:
        self._pool.submit(fn)

    def driver(self, name: str) -> Any:
        return self._driver_for(name)


class Exchange:
    """One ``POST .../responses``: validate, call the driver, stream, log."""

    def __init__(self, server: GatewayServer, request: http_io.Request, route: Any,
                 models: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        self.server = server
        self.request = request
        self.route = route
        self.models = models
        self.writer = writer
        self.started = time.perf_counter()
        self.record: dict[str, Any] = {"at": now_iso(), "route": route.id, "model": None,
                                       "status": None, "latency_ms": None, "usage": None,
                                       "provider_metadata": None}
        session = request.headers.get(SESSION_HEADER)
        if session:
            self.record["session"] = session[:128]
        self.supplied: dict[str, str] = {}
        self._cancelled = threading.Event()

    async def run(self) -> None:
        try:
            model, body = self._prepare()
            driver = self.server.driver(self.route.driver)
        except GatewayError as err:
            await self._fail(err)
            return
        await self._stream(driver, model, body)

    def _prepare(self) -> tuple[Any, dict[str, Any]]:
        try:
            body = json.loads(self.request.body or b"null")
        except ValueError:
            raise bad_request("request body is not valid JSON") from None
        if not isinstance(body, dict):
            raise bad_request("request body must be a JSON object")
        model_id = body.get("model")
        self.record["model"] = model_id if isinstance(model_id, str) else None
        model = self.models.get(model_id) if isinstance(model_id, str) else None
        if model is None or model.route != self.route.id:
            raise not_found(f"unknown model {model_id!r} on route {self.route.id!r}")
        fault = self.request.headers.get(FAULT_HEADER.lower())
        if fault:
            if fault not in ROUTE_FAULTS:
                raise bad_request(f"{FAULT_HEADER} must be one of {', '.join(ROUTE_FAULTS)}")
            self.record["fault"] = fault
            raise fault_error(fault, self.route.id)
        for header, env_name in self.route.env_http_headers.items():
            value = self.request.headers.get(header.lower())
            if value:
                self.supplied[env_name] = value
        return model, body

    async def _stream(self, driver: Any, model: Any, body: dict[str, Any]) -> None:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Any] = asyncio.Queue()
        env = CredentialEnv(self.supplied)

        def pump() -> None:
            put = loop.call_soon_threadsafe
            iterator: Iterator[Any] | None = None
            try:
                iterator = iter(driver.serve_responses(self.route, model, body, env))
                for item in iterator:
                    if self._cancelled.is_set():
                        break
                    put(queue.put_nowait, item)
            except GatewayError as err:
                put(queue.put_nowait, err)
            except Exception as exc:  # a driver bug becomes a visible 502, not a hang
                put(queue.put_nowait, GatewayError(502, error_body(
                    f"route driver {self.route.driver!r} failed: {type(exc).__name__}",
                    "server_error", "driver_error")))
            finally:
                close = getattr(iterator, "close", None)
                if close is not None:
                    close()
                put(queue.put_nowait, _END)

        self.server.submit(pump)
        try:
            await self._relay(queue)
        finally:
            self._cancelled.set()

    async def _relay(self, queue: asyncio.Queue[Any]) -> None:
        keep = self.request.keep_alive
        started = False
        tail: list[bytes] = []
        while True:
            item = await queue.get()
            batch = [item]
            while not queue.empty():
                batch.append(queue.get_nowait())
            out = []
            for entry in batch:
                if entry is _END:
                    if not started:
                        await self._fail(GatewayError(502, error_body(
                            "route driver returned an empty stream", "server_error")))
                        return
                    self._finish(200, tail)  # logged before the client can see the end
                    out.append(http_io.LAST_CHUNK)
                    self.writer.write(b"".join(out))
                    await self.writer.drain()
                    return
                if isinstance(entry, LogNote):
                    self.record.update(entry)
                elif isinstance(entry, GatewayError):
                    if not started:
                        await self._fail(entry)
                        return
                    frame = ResponsesStream(self.record["model"] or "").failed(
                        entry.message, _stream_code(entry.status))
                    out.append(http_io.chunk(frame))
                    self.record["error"] = entry.message
                elif isinstance(entry, bytes | bytearray) and entry:
                    if not started:
                        out.append(http_io.stream_head(keep))
                        started = True
                        self.record["ttfb_ms"] = self._elapsed()
                    out.append(http_io.chunk(bytes(entry)))
                    tail = (tail + [bytes(entry)])[-2:]
            if out:
                self.writer.write(b"".join(out))
                await self.writer.drain()

    def _elapsed(self) -> float:
        return round((time.perf_counter() - self.started) * 1000, 3)

    async def _fail(self, err: GatewayError) -> None:
        self.record["error"] = err.message
        self._finish(err.status, [])
        self.writer.write(http_io.json_response(err.status, err.body, self.request.keep_alive,
                                                err.headers))
        await self.writer.drain()

    def _finish(self, status: int, tail: list[bytes]) -> None:
        self.record["status"] = status
        self.record["latency_ms"] = self._elapsed()
        if self.record["usage"] is None and tail:
            self.record["usage"] = _completed_usage(b"".join(tail))
        secrets: list[str] = []
        if self.record.get("error"):
            secrets = list(self.supplied.values())
            if self.route.credential_env:
                secrets.append(credential_value(self.route.credential_env) or "")
        self.server.log.write(self.record, secrets)


def _stream_code(status: int) -> str:
    return {429: "rate_limit_exceeded", 401: "invalid_api_key"}.get(status, "server_error")


def _completed_usage(tail: bytes) -> dict[str, Any] | None:
    """Usage from a ``response.completed`` frame at the end of a stream, if any."""
    if b"response.completed" not in tail:
        return None
    start = tail.find(b"event: response.completed")
    decoder = SseDecoder()
    for frame in decoder.feed(tail[max(start, 0):]) + decoder.close():
        if frame.event == "response.completed" or '"response.completed"' in frame.data[:60]:
            try:
                usage = json.loads(frame.data).get("response", {}).get("usage")
            except (ValueError, AttributeError):
                return None
            return usage if isinstance(usage, dict) else None
    return None


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

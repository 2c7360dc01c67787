"""One ``POST /routes/<id>/v1/responses``: validate, call the route driver, stream, log.

A driver with ``serve_responses_async`` is iterated right on the gateway's
event loop: each chunk is written the moment the driver yields it, with no
thread hand-off (the fast path, used by ``codex_custom``). A driver with only
the blocking ``serve_responses`` is pumped by a pool thread that hands chunks
to the loop; the loop writes whatever is queued in one go. Both paths feed
the same :meth:`Exchange._deliver`, so framing, errors and logging agree.

A request without ``"stream": true`` is answered with JSON: the driver's
events are collected and the final ``response`` object sent (``collect.py``).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

from mmo_kernel.gateway import http_io
from mmo_kernel.gateway.attribution import is_mmo_header
from mmo_kernel.gateway.collect import collected_answer
from mmo_kernel.gateway.errors import GatewayError, bad_request, error_body, not_found
from mmo_kernel.gateway.faults import FAULT_HEADER, ROUTE_FAULTS, fault_error
from mmo_kernel.gateway.json_body import parse_body
from mmo_kernel.gateway.notes import LogNote
from mmo_kernel.gateway.request_log import new_record
from mmo_kernel.gateway.responses_stream import ResponsesStream
from mmo_kernel.gateway.sources import CredentialEnv, credential_value
from mmo_kernel.gateway.sse import SseDecoder

COALESCE_LIMIT = 64 * 1024
_END = object()


class Exchange:
    """One streamed request; ``server`` provides ``driver(name)``, ``submit(fn)`` and ``log``."""

    def __init__(self, server: Any, request: http_io.Request, route: Any,
                 models: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        self.server = server
        self.request = request
        self.route = route
        self.models = models
        self.writer = writer
        self.started = time.perf_counter()
        self.record = new_record(route.id, request.headers)
        self.supplied: dict[str, str] = {}
        self._cancelled = threading.Event()
        self._streaming = False
        self._collect = False
        """The client asked for no stream: driver bytes go to ``_collected``, not the wire."""
        self._collected: list[bytes] = []
        self._tail: list[bytes] = []
        self._coalesce = False
        self._pending: list[bytes] = []
        self._pending_size = 0
        self._flush_scheduled = False

    async def run(self) -> None:
        try:
            model, body = self._prepare()
            driver = self.server.driver(self.route.driver)
        except GatewayError as err:
            await self._fail(err)
            return
        serve_async = getattr(driver, "serve_responses_async", None)
        if callable(serve_async):
            await self._stream_async(serve_async, model, body)
        else:
            await self._stream_threaded(driver, model, body)

    def _prepare(self) -> tuple[Any, dict[str, Any]]:
        try:
            body = parse_body(self.request.body or b"null")
        except ValueError:
            raise bad_request("request body is not valid JSON") from None
        if not isinstance(body, dict):
            raise bad_request("request body must be a JSON object")
        if body.get("stream") is not True:
            self._collect = True
            self.record["stream"] = False
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
            if value and not is_mmo_header(header):  # MMO's own headers end here
                self.supplied[env_name] = value
        return model, body

    def _driver_failure(self, exc: Exception) -> GatewayError:
        """A driver's GatewayError as is; any other exception a visible 502, not a hang."""
        if isinstance(exc, GatewayError):
            return exc
        return GatewayError(502, error_body(
            f"route driver {self.route.driver!r} failed: {type(exc).__name__}",
            "server_error", "driver_error"))

    async def _stream_async(self, serve: Any, model: Any, body: dict[str, Any]) -> None:
        items: Any = None
        self._coalesce = True
        try:
            try:
                items = serve(self.route, model, body, CredentialEnv(self.supplied))
                if inspect.isawaitable(items):
                    items = await items
                items = aiter(items)
            except Exception as exc:
                await self._deliver([self._driver_failure(exc), _END])
                return
            while True:
                try:
                    batch = [await anext(items)]
                except StopAsyncIteration:
                    batch = [_END]
                except Exception as exc:
                    batch = [self._driver_failure(exc), _END]
                if await self._deliver(batch):
                    return
        finally:
            close = getattr(items, "aclose", None)
            if close is not None:
                await close()

    async def _stream_threaded(self, driver: Any, model: Any, body: dict[str, Any]) -> None:
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
            except Exception as exc:
                put(queue.put_nowait, self._driver_failure(exc))
            finally:
                close = getattr(iterator, "close", None)
                if close is not None:
                    close()
                put(queue.put_nowait, _END)

        self.server.submit(pump)
        try:
            while True:
                batch = [await queue.get()]
                while not queue.empty():
                    batch.append(queue.get_nowait())
                if await self._deliver(batch):
                    return
        finally:
            self._cancelled.set()

    async def _deliver(self, batch: list[Any]) -> bool:
        """Write a batch of driver items; True once the response is over."""
        out: list[bytes] = []
        for entry in batch:
            if entry is _END:
                if self._collected:
                    await self._answer_collected()
                    return True
                if not self._streaming:
                    await self._fail(GatewayError(502, error_body(
                        "route driver returned an empty stream", "server_error")))
                    return True
                self._finish(200, self._tail)  # logged before the client can see the end
                out.append(http_io.LAST_CHUNK)
                self._send(out, now=True)
                await self.writer.drain()
                return True
            if isinstance(entry, LogNote):
                self.record.update(entry)
            elif isinstance(entry, GatewayError):
                if not self._streaming:
                    await self._fail(entry)
                    return True
                frame = ResponsesStream(self.record["model"] or "").failed(
                    entry.message, _stream_code(entry.status))
                out.append(http_io.chunk(frame))
                self.record["error"] = entry.message
            elif isinstance(entry, bytes | bytearray) and entry:
                data = bytes(entry)
                if self._collect:
                    self._collected.append(data)
                    continue
                if not self._streaming:
                    out.append(http_io.stream_head(self.request.keep_alive))
                    self._streaming = True
                    self.record["ttfb_ms"] = self._elapsed()
                out.append(http_io.chunk(data))
                self._tail = [self._tail[-1], data] if self._tail else [data]
        if out:
            self._send(out, now=not self._coalesce)
            await self.writer.drain()
        return False

    async def _answer_collected(self) -> None:
        """Answer a non-streamed request with the collected stream's final response."""
        try:
            answer = collected_answer(b"".join(self._collected))
        except GatewayError as err:
            await self._fail(err)
            return
        if self.record["usage"] is None and isinstance(answer.get("usage"), dict):
            self.record["usage"] = answer["usage"]
        self._finish(200, [])
        self.writer.write(http_io.json_response(200, answer, self.request.keep_alive))
        await self.writer.drain()

    def _send(self, out: list[bytes], now: bool) -> None:
        """Write now, or at the end of this loop step so back-to-back items share one send.

        An async driver that yields its last bytes, its log note and its end
        without waiting (a whole upstream burst) costs one syscall and one
        wake-up of the client instead of one per item.
        """
        self._pending.extend(out)
        self._pending_size += sum(len(part) for part in out)
        if now or self._pending_size >= COALESCE_LIMIT:
            self._flush()
        elif not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        if self._pending:
            pending, self._pending, self._pending_size = self._pending, [], 0
            self.writer.write(b"".join(pending) if len(pending) > 1 else pending[0])

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
        if tail and (self.record["usage"] is None or any(b"response.failed" in t for t in tail)):
            usage, failure = _stream_outcome(b"".join(tail))
            self.record["usage"] = self.record["usage"] or usage
            if failure and not self.record.get("error"):
                self.record["error"] = failure
        secrets: list[str] = []
        if self.record.get("error"):
            secrets = list(self.supplied.values())
            if self.route.credential_env:
                secrets.append(_readable_secret(self.route.credential_env))
        self.server.log.write(self.record, secrets)


def _readable_secret(name: str) -> str:
    """The credential to scrub from a logged error; "" when it cannot be read.

    An unreadable ``credentials.env`` (wrong mode, bad line) is often the very
    error being logged; it must not also abort the answer. A value that
    cannot be read was never sent, so there is nothing to scrub.
    """
    try:
        return credential_value(name) or ""
    except (OSError, ValueError, RuntimeError):
        return ""


def _stream_code(status: int) -> str:
    return {429: "rate_limit_exceeded", 401: "invalid_api_key"}.get(status, "server_error")


def _stream_outcome(tail: bytes) -> tuple[dict[str, Any] | None, str | None]:
    """``(usage, failure message)`` from the final frame at the end of a stream, if any."""
    for kind in ("response.completed", "response.failed"):
        if kind.encode() not in tail:
            continue
        start = tail.find(f"event: {kind}".encode())
        decoder = SseDecoder()
        for frame in decoder.feed(tail[max(start, 0):]) + decoder.close():
            if frame.event == kind or f'"{kind}"' in frame.data[:60]:
                try:
                    response = json.loads(frame.data).get("response") or {}
                    usage, error = response.get("usage"), response.get("error") or {}
                    message = error.get("message") if kind == "response.failed" else None
                except (ValueError, AttributeError):
                    return None, None
                return (usage if isinstance(usage, dict) else None,
                        message if isinstance(message, str) else None)
    return None, None

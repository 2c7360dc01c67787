"""The runner hub: the server's end of every runner link (spec 12, "Runner link").

Runners dial in at ``/api/runners/ws``. The runner token is checked before the
upgrade (a bad one gets a plain HTTP 401, never a WebSocket); the first frame must be
a ``hello`` whose ``client_id`` and ``owner`` are the token's own (else close 4403). A
second link for a ``client_id`` replaces the first (close 4409 to the old one). Both
sides ping every ``heartbeat_secs``; a link silent for three intervals is dropped.

:meth:`RunnerHub.call` forwards one tool call and waits for the runner's envelope. It
never raises for link trouble and never re-sends: an offline runner is
``runner_unavailable`` (nothing was sent), a link lost before the reply is
``runner_disconnected`` and a missed deadline ``timeout`` (both with ``state_changed =
"unknown"``: the runner may have acted).
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import logging
import secrets
import time
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from starlette.responses import JSONResponse
from starlette.routing import WebSocketRoute
from starlette.websockets import WebSocket

from mmo_kernel.project_tools.envelope import failure
from mmo_kernel.project_tools.link import (
    CLOSE_HEARTBEAT_TIMEOUT,
    CLOSE_PROTOCOL_ERROR,
    CLOSE_REPLACED,
    CLOSE_REVOKED,
    CLOSE_TOO_BIG,
    CLOSE_WRONG_IDENTITY,
    HEARTBEAT_SECS,
    MAX_FRAME_BYTES,
    RUNNER_WS_PATH,
    SILENT_INTERVALS,
    Call,
    Chunk,
    Hello,
    JobEvent,
    LinkProtocolError,
    Ping,
    Pong,
    Projects,
    Reassembler,
    Reply,
    Welcome,
    dump_frame,
    encode_frames,
    parse_frame,
)

log = logging.getLogger("mmo.serve.hub")

CALL_DEADLINE_SECS = 40.0
"""The server-side tool-call deadline when the caller gives none (spec 12, Limits)."""

Callback = Callable[..., Any]

_DENIED: contextvars.ContextVar[bool] = contextvars.ContextVar("mmo_hub_denied", default=False)


class _DeniedHandshakeFilter(logging.Filter):
    """uvicorn's sans-I/O WebSocket protocol logs "ASGI callable returned without completing
    handshake." at ERROR after every denial response (an HTTP 401 is a finished exchange,
    not an app bug). Drop exactly that record, and only for a connection this hub denied
    (the flag is a context variable of that connection's task)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (_DENIED.get() and "without completing handshake" in record.getMessage())


def _install_denied_filter() -> None:
    uvicorn_log = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, _DeniedHandshakeFilter) for f in uvicorn_log.filters):
        uvicorn_log.addFilter(_DeniedHandshakeFilter())


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _now_ms() -> int:
    return int(time.time() * 1000)


def _close_reason(text: str) -> str:
    """A close reason fits in 123 bytes (RFC 6455)."""
    data = " ".join(text.split()).encode("utf-8")[:123]
    return data.decode("utf-8", errors="ignore")


class _LinkBroken(Exception):
    """Sending on a link failed: it is gone."""


@dataclass
class RunnerRecord:
    """What the server knows about one runner: its last hello (or projects frame)."""

    client_id: str
    owner: str
    projects: list[dict[str, Any]] = field(default_factory=list)
    live_job_ids: list[str] = field(default_factory=list)
    version: str | None = None
    last_seen_at: str | None = None


class _Link:
    """One accepted, greeted WebSocket of a runner."""

    def __init__(self, websocket: WebSocket, client_id: str, token_id: str | None) -> None:
        self.websocket = websocket
        self.client_id = client_id
        self.token_id = token_id
        self.pending: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self.reassembler = Reassembler()
        self.last_heard = time.monotonic()
        self.closed = False
        self._send_lock = asyncio.Lock()

    async def send(self, text: str) -> None:
        if self.closed:
            raise _LinkBroken
        try:
            async with self._send_lock:
                await self.websocket.send_text(text)
        except Exception as exc:  # noqa: BLE001 - any send failure means the link is gone
            self.closed = True
            raise _LinkBroken from exc

    async def close(self, code: int, reason: str) -> None:
        """Close (once) and fail every waiting call as disconnected."""
        if not self.closed:
            self.closed = True
            try:
                await self.websocket.close(code, _close_reason(reason))
            except Exception:  # noqa: BLE001 - the peer may be gone already
                pass
        self.fail_pending()

    def fail_pending(self) -> None:
        self.closed = True
        for call_id, future in list(self.pending.items()):
            if not future.done():
                future.set_result(_disconnected(self.client_id))
            self.pending.pop(call_id, None)


def _disconnected(client_id: str) -> dict[str, Any]:
    return failure("runner_disconnected",
                   f"the link to runner {client_id} dropped before its reply; "
                   "the call may or may not have run", state_changed="unknown")


class RunnerHub:
    """Runner links, the runner registry and call forwarding, inside the server's loop.

    ``store`` authenticates runner tokens (``authenticate_runner``) and, when it offers
    ``record_hello``, keeps the registry across restarts. ``heartbeat_secs`` is 15 in
    production; tests pass a small value.
    """

    def __init__(self, store: Any, *, heartbeat_secs: float = HEARTBEAT_SECS) -> None:
        self.store = store
        self.heartbeat_secs = heartbeat_secs
        self._links: dict[str, _Link] = {}
        self._runners: dict[str, RunnerRecord] = {}
        self._job_event_callbacks: list[Callback] = []
        self._projects_callbacks: list[Callback] = []
        self._hello_callbacks: list[Callback] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        _install_denied_filter()
        self._load_registry()
        if callable(getattr(store, "on_revoke", None)):
            store.on_revoke(self._token_revoked)

    # -- public surface -------------------------------------------------------------

    @property
    def websocket_route(self) -> WebSocketRoute:
        """The starlette route of the runner link."""
        return WebSocketRoute(RUNNER_WS_PATH, self._endpoint, name="runner_link")

    def online(self, client_id: str) -> bool:
        """True while ``client_id`` has a greeted link."""
        link = self._links.get(client_id)
        return link is not None and not link.closed

    def known_runners(self) -> list[dict[str, Any]]:
        """Every runner that ever said hello: ``client_id``, ``owner``, ``online``, ``projects``
        (full project dicts), ``live_job_ids``, ``last_seen_at``; sorted by ``client_id``."""
        return [self._describe(record) for _, record in sorted(self._runners.items())]

    def runner(self, client_id: str) -> dict[str, Any] | None:
        """One runner as :meth:`known_runners` lists it, or None."""
        record = self._runners.get(client_id)
        return None if record is None else self._describe(record)

    def on_job_event(self, callback: Callback) -> None:
        """``callback(client_id, event)`` for each ``job_event`` frame (event: the frame dict)."""
        self._job_event_callbacks.append(callback)

    def on_projects(self, callback: Callback) -> None:
        """``callback(client_id, owner, projects)`` after a hello or a ``projects`` frame."""
        self._projects_callbacks.append(callback)

    def on_hello(self, callback: Callback) -> None:
        """``callback(client_id, hello)`` for each accepted hello (hello: the frame dict)."""
        self._hello_callbacks.append(callback)

    async def call(self, client_id: str, tool: str, arguments: dict[str, Any], user: str,
                   session: str | None, deadline_unix_ms: int | None = None) -> dict[str, Any]:
        """Forward one call and return the runner's envelope (or a link failure envelope)."""
        link = self._links.get(client_id)
        if link is None or link.closed:
            return failure("runner_unavailable", f"runner {client_id} is offline")
        if deadline_unix_ms is None:
            deadline_unix_ms = _now_ms() + int(CALL_DEADLINE_SECS * 1000)
        call_id = f"mmo_call_{secrets.token_hex(8)}"
        frame = Call(call_id=call_id, tool=tool, arguments=arguments, user=user,
                     session=session, deadline_unix_ms=deadline_unix_ms)
        try:
            frames = encode_frames(frame)
        except LinkProtocolError as exc:
            return failure("invalid_arguments", str(exc))
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        link.pending[call_id] = future
        try:
            try:
                for text in frames:
                    await link.send(text)
            except _LinkBroken:
                link.fail_pending()
                return _disconnected(client_id)
            remaining = max(0.0, (deadline_unix_ms - _now_ms()) / 1000)
            try:
                return await asyncio.wait_for(asyncio.shield(future), remaining)
            except TimeoutError:
                return failure("timeout", f"runner {client_id} did not reply to {tool} "
                               "before the call deadline", state_changed="unknown")
        finally:
            link.pending.pop(call_id, None)

    async def start(self) -> None:
        """App start-up: remember the loop (a revocation may arrive from another thread)."""
        self._loop = asyncio.get_running_loop()

    async def stop(self) -> None:
        """App shutdown: close every link."""
        await self.close_all()

    async def drain(self, timeout: float) -> bool:
        """Wait (up to ``timeout`` seconds) until no forwarded call waits for its reply, so a
        graceful shutdown answers in-flight calls before the links close; True if drained."""
        deadline = time.monotonic() + timeout
        while any(link.pending for link in self._links.values()):
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.05)
        return True

    async def close_all(self, code: int = 1001, reason: str = "server shutting down") -> None:
        """Close every link (graceful shutdown); waiting calls fail as disconnected."""
        for link in list(self._links.values()):
            await link.close(code, reason)

    def _token_revoked(self, token_id: str) -> None:
        """A revoked runner token ends its open link at once (close 4401); any thread."""
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._close_token_links, token_id)

    def _close_token_links(self, token_id: str) -> None:
        for link in list(self._links.values()):
            if link.token_id == token_id:
                asyncio.ensure_future(link.close(CLOSE_REVOKED, "runner token revoked"))

    # -- the WebSocket endpoint -----------------------------------------------------

    async def _endpoint(self, websocket: WebSocket) -> None:
        self._loop = asyncio.get_running_loop()
        grant = self._authenticate(websocket)
        if grant is None:
            await self._deny(websocket)
            return
        await websocket.accept()
        hello = await self._receive_hello(websocket)
        if hello is None:
            return
        if hello.client_id != grant.client_id or hello.owner != grant.username:
            log.warning("runner link refused: hello says %s/%s, the token is for %s/%s",
                        hello.owner, hello.client_id, grant.username, grant.client_id)
            await websocket.close(CLOSE_WRONG_IDENTITY,
                                  "client_id or owner does not match the runner token")
            return
        link = _Link(websocket, hello.client_id, getattr(grant, "token_id", None))
        try:
            # welcome first: no call may reach the runner before it
            await link.send(dump_frame(Welcome(heartbeat_secs=self.heartbeat_secs)))
            previous = self._links.get(hello.client_id)
            self._links[hello.client_id] = link
            if previous is not None:
                log.info("runner %s: a new link replaces the old one", hello.client_id)
                await previous.close(CLOSE_REPLACED, "replaced by a newer link for this client_id")
            await self._accept_hello(hello)
            await self._serve(link)
        except _LinkBroken:
            pass
        finally:
            link.fail_pending()
            if self._links.get(link.client_id) is link:
                del self._links[link.client_id]
                self._seen(link.client_id, "touch")
                log.info("runner %s is offline", link.client_id)

    def _authenticate(self, websocket: WebSocket) -> Any:
        scheme, _, token = websocket.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        return self.store.authenticate_runner(token.strip())

    async def _deny(self, websocket: WebSocket) -> None:
        """HTTP 401 before any upgrade (a server without the denial extension sends 403)."""
        response = JSONResponse({"success": False, "error": "unauthorized"}, status_code=401,
                                headers={"WWW-Authenticate": 'Bearer realm="mmo"'})
        _DENIED.set(True)
        try:
            await websocket.send_denial_response(response)
        except RuntimeError:
            await websocket.close(1008)

    async def _receive_hello(self, websocket: WebSocket) -> Hello | None:
        try:
            async with asyncio.timeout(SILENT_INTERVALS * self.heartbeat_secs):
                message = await websocket.receive()
        except TimeoutError:
            await websocket.close(CLOSE_PROTOCOL_ERROR, "no hello")
            return None
        if message["type"] == "websocket.disconnect":
            return None
        try:
            frame = parse_frame(_message_text(message))
        except LinkProtocolError as exc:
            await websocket.close(CLOSE_PROTOCOL_ERROR, str(exc))
            return None
        if not isinstance(frame, Hello):
            await websocket.close(CLOSE_PROTOCOL_ERROR, f"expected hello, got {frame.type}")
            return None
        return frame

    async def _serve(self, link: _Link) -> None:
        """Receive frames and keep the heartbeat until either side ends the link."""
        tasks = [asyncio.create_task(self._receive_loop(link)),
                 asyncio.create_task(self._heartbeat_loop(link))]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _receive_loop(self, link: _Link) -> None:
        while not link.closed:
            message = await link.websocket.receive()
            if message["type"] == "websocket.disconnect":
                link.closed = True
                return
            link.last_heard = time.monotonic()
            try:
                text = _message_text(message)
                if len(text.encode("utf-8")) > MAX_FRAME_BYTES:
                    await link.close(CLOSE_TOO_BIG, f"frame over {MAX_FRAME_BYTES} bytes")
                    return
                await self._handle(link, parse_frame(text))
            except LinkProtocolError as exc:
                log.warning("runner %s: %s; closing its link", link.client_id, exc)
                await link.close(CLOSE_PROTOCOL_ERROR, str(exc))
                return

    async def _heartbeat_loop(self, link: _Link) -> None:
        ping = dump_frame(Ping())
        while not link.closed:
            await asyncio.sleep(self.heartbeat_secs)
            if time.monotonic() - link.last_heard > SILENT_INTERVALS * self.heartbeat_secs:
                log.warning("runner %s: silent for %d heartbeats; dropping its link",
                            link.client_id, SILENT_INTERVALS)
                await link.close(CLOSE_HEARTBEAT_TIMEOUT, "heartbeat timeout")
                return
            await link.send(ping)

    async def _handle(self, link: _Link, frame: Any) -> None:
        if isinstance(frame, Chunk):
            if frame.call_id not in link.pending:  # a late reply: nobody waits, buffer nothing
                link.reassembler.discard(frame.call_id)
                return
            frame = link.reassembler.feed(frame)
            if frame is None:
                return
        if isinstance(frame, Ping):
            await link.send(dump_frame(Pong()))
        elif isinstance(frame, Pong):
            return
        elif isinstance(frame, Reply):
            future = link.pending.get(frame.call_id)
            if future is None or future.done():
                log.info("runner %s: reply to unknown or finished call %s dropped",
                         link.client_id, frame.call_id)
            else:
                future.set_result(frame.envelope)
        elif isinstance(frame, Projects):
            record = self._runners[link.client_id]
            record.projects = [project.model_dump() for project in frame.projects]
            self._seen(link.client_id, "projects")
            await self._notify(self._projects_callbacks, link.client_id, record.owner,
                               list(record.projects))
        elif isinstance(frame, JobEvent):
            await self._notify(self._job_event_callbacks, link.client_id,
                               frame.model_dump(mode="json"))
        else:
            raise LinkProtocolError(f"a runner does not send {frame.type} frames")

    # -- the registry ---------------------------------------------------------------

    async def _accept_hello(self, hello: Hello) -> None:
        self._runners[hello.client_id] = RunnerRecord(
            client_id=hello.client_id, owner=hello.owner,
            projects=[project.model_dump() for project in hello.projects],
            live_job_ids=list(hello.live_job_ids), version=hello.version)
        self._seen(hello.client_id, "hello")
        log.info("runner %s (%s) online with %d projects", hello.client_id, hello.owner,
                 len(hello.projects))
        await self._notify(self._hello_callbacks, hello.client_id, hello.model_dump(mode="json"))
        await self._notify(self._projects_callbacks, hello.client_id, hello.owner,
                           [project.model_dump() for project in hello.projects])

    def _seen(self, client_id: str, persist: str | None = None) -> None:
        record = self._runners.get(client_id)
        if record is None:
            return
        record.last_seen_at = _now_iso()
        if persist is not None:
            self._persist(record, persist)

    def _describe(self, record: RunnerRecord) -> dict[str, Any]:
        if self.online(record.client_id):
            record.last_seen_at = _now_iso()
        return {"client_id": record.client_id, "owner": record.owner,
                "online": self.online(record.client_id),
                "projects": [dict(project) for project in record.projects],
                "live_job_ids": list(record.live_job_ids),
                "last_seen_at": record.last_seen_at}

    def _persist(self, record: RunnerRecord, what: str) -> None:
        """Keep the registry across restarts through the store (hello, projects, touch)."""
        try:
            if what == "hello" and hasattr(self.store, "record_hello"):
                self.store.record_hello(record.client_id, record.owner, record.projects,
                                        record.live_job_ids, version=record.version)
            elif what == "projects" and hasattr(self.store, "record_projects"):
                self.store.record_projects(record.client_id, record.projects)
            elif what == "touch" and hasattr(self.store, "touch_runner"):
                self.store.touch_runner(record.client_id)
        except Exception:  # noqa: BLE001 - a full disk must not take the link down
            log.exception("runner %s: cannot record its %s", record.client_id, what)

    def _load_registry(self) -> None:
        load = getattr(self.store, "runner_registry", None)
        entries = load() if callable(load) else {}
        for client_id, entry in sorted((entries or {}).items()):
            self._runners[client_id] = RunnerRecord(
                client_id=client_id, owner=str(entry.get("owner") or ""),
                projects=list(entry.get("projects") or []),
                live_job_ids=list(entry.get("live_job_ids") or []),
                version=entry.get("version"), last_seen_at=entry.get("last_seen_at"))

    async def _notify(self, callbacks: list[Callback], *args: Any) -> None:
        for callback in callbacks:
            try:
                result = callback(*args)
                if inspect.isawaitable(result):
                    await result
            except Exception:  # noqa: BLE001 - one bad listener must not drop the link
                log.exception("runner link callback %r failed", callback)


def _message_text(message: MutableMapping[str, Any]) -> str:
    text = message.get("text")
    if text is None:
        raise LinkProtocolError("binary frames are not part of the runner link")
    return text

"""The runner's end of the runner link (spec 12, "Runner link").

The runner dials **out** (so a server on the internet reaches a laptop behind NAT),
says ``hello`` with its projects and live process jobs, then keeps the link: it answers
and sends pings, runs each ``call`` in a worker thread (a long tool call never blocks the
heartbeat or other calls) and sends the envelope back, chunked when over 256 KiB. A lost
link is re-dialled forever with backoff (0.5 s doubling to 30 s, jittered, reset after
60 s connected); a reply whose link is gone is dropped, never sent on a later link (the
server has already answered that call ``runner_disconnected`` and never re-sends).

Refusals that retrying cannot fix stop the client instead (``fatal``): HTTP 401/403 (bad
or revoked token), close 4403 (``client_id``/``owner`` not the token's), 4401 (token
revoked while linked) and 4409 (another runner took over this ``client_id``).
"""

from __future__ import annotations

import ipaddress
import logging
import random
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import ClientConnection, connect

from mmo_kernel.project_tools.envelope import failure, is_envelope, one_line
from mmo_kernel.project_tools.link import (
    CLOSE_HEARTBEAT_TIMEOUT,
    CLOSE_PROTOCOL_ERROR,
    CLOSE_REPLACED,
    CLOSE_REVOKED,
    CLOSE_WRONG_IDENTITY,
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
    ProjectInfo,
    Projects,
    Reassembler,
    Reply,
    Welcome,
    dump_frame,
    encode_frames,
    parse_frame,
)

log = logging.getLogger("mmo.runner.link")

BACKOFF_INITIAL_SECS = 0.5
BACKOFF_MAX_SECS = 30.0
BACKOFF_RESET_AFTER_SECS = 60.0
OPEN_TIMEOUT_SECS = 10.0
FATAL_CLOSE_CODES = {
    CLOSE_REVOKED: "the runner token was revoked",
    CLOSE_WRONG_IDENTITY: "client_id or owner does not match the runner token",
    CLOSE_REPLACED: "another runner link took over this client_id",
}

HandleCall = Callable[[dict[str, Any]], dict[str, Any]]


class InsecureTransportError(ValueError):
    """``server_url`` would send the runner token in clear text over a network."""


class LinkRejected(Exception):
    """The server refused this runner for good (retrying cannot help)."""

    def __init__(self, message: str, *, status: int | None = None,
                 close_code: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.close_code = close_code


def is_loopback_host(host: str) -> bool:
    """``localhost`` or a loopback IP (127.0.0.0/8, ::1)."""
    host = host.strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def runner_ws_url(server_url: str, *, allow_insecure_transport: bool = False) -> str:
    """The link URL for ``server_url`` (``http(s)://host:port[/prefix]``): ``ws(s)://`` form
    plus ``/api/runners/ws``. Plain ``http``/``ws`` to a non-loopback host is refused unless
    ``allow_insecure_transport``: the token would cross the network unencrypted."""
    parts = urlsplit(server_url.strip())
    scheme = {"http": "ws", "https": "wss", "ws": "ws", "wss": "wss"}.get(parts.scheme.lower())
    if scheme is None or not parts.hostname:
        raise InsecureTransportError(
            f"server_url must be an http:// or https:// URL, got {server_url[:200]!r}")
    if scheme == "ws" and not allow_insecure_transport and not is_loopback_host(parts.hostname):
        raise InsecureTransportError(
            f"refusing server_url {parts.scheme}://{parts.netloc}: plain http to a non-loopback "
            "host sends the runner token unencrypted; use https:// or set "
            "allow_insecure_transport = true")
    path = parts.path.rstrip("/") + RUNNER_WS_PATH
    return urlunsplit((scheme, parts.netloc, path, "", ""))


class Backoff:
    """Re-dial delays: ``initial`` doubling up to ``maximum``, each drawn in [d/2, d]
    (jitter, so many runners of a restarted server do not dial in lockstep)."""

    def __init__(self, initial: float = BACKOFF_INITIAL_SECS,
                 maximum: float = BACKOFF_MAX_SECS) -> None:
        self.initial = initial
        self.maximum = maximum
        self.current = initial

    def next(self) -> float:
        """The wait before the next dial; the one after is twice as long (capped)."""
        wait = random.uniform(self.current / 2, self.current)
        self.current = min(self.current * 2, self.maximum)
        return wait

    def reset(self) -> None:
        self.current = self.initial


class _Link:
    """One open, greeted connection: sends are serialized, replies are bound to it."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.reassembler = Reassembler()
        self.closed = False
        self._send_lock = threading.Lock()

    def send(self, text: str) -> None:
        with self._send_lock:
            self.ws.send(text)

    def close(self, code: int = 1000, reason: str = "") -> None:
        self.closed = True
        try:
            self.ws.close(code, reason)
        except Exception:  # noqa: BLE001 - already gone
            pass


class LinkClient:
    """Keeps one runner's link to the server alive; see the module docstring.

    ``handle_call(call)`` gets the ``call`` frame as a dict and returns the envelope; it
    runs in a worker thread. ``projects()`` and ``live_job_ids()`` are asked at each
    hello. :meth:`start` runs the link in a background thread, :meth:`run` in the
    caller's; :meth:`stop` ends it.
    """

    def __init__(self, server_url: str, token: str, client_id: str, owner: str, *,
                 handle_call: HandleCall,
                 projects: Callable[[], Iterable[Mapping[str, Any] | ProjectInfo]] = list,
                 live_job_ids: Callable[[], Iterable[str]] = list,
                 version: str | None = None,
                 allow_insecure_transport: bool = False,
                 max_workers: int = 16,
                 backoff_initial: float = BACKOFF_INITIAL_SECS,
                 backoff_max: float = BACKOFF_MAX_SECS,
                 backoff_reset_after: float = BACKOFF_RESET_AFTER_SECS,
                 open_timeout: float = OPEN_TIMEOUT_SECS,
                 on_fatal: Callable[[LinkRejected], None] | None = None) -> None:
        self.url = runner_ws_url(server_url, allow_insecure_transport=allow_insecure_transport)
        self._token = token
        self.client_id = client_id
        self.owner = owner
        self.handle_call = handle_call
        self._projects = projects
        self._live_job_ids = live_job_ids
        if version is None:
            from mmo_kernel import package_version

            version = package_version()
        self.version = version
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.backoff_reset_after = backoff_reset_after
        self.open_timeout = open_timeout
        self.on_fatal = on_fatal
        self.connected = threading.Event()
        """Set while a link is greeted (welcome received)."""
        self.links_opened = 0
        """Greeted links so far (a reconnect adds one)."""
        self.links_closed = 0
        """Greeted links that have ended (incremented after ``connected`` is cleared)."""
        self.fatal: LinkRejected | None = None
        self.last_error: str | None = None
        self.heartbeat_secs: float | None = None
        self._link: _Link | None = None
        self._stop = threading.Event()
        self._pool = ThreadPoolExecutor(max_workers=max_workers,
                                        thread_name_prefix="mmo-link-call")
        self._thread: threading.Thread | None = None

    # -- lifecycle ------------------------------------------------------------------

    def start(self) -> None:
        """Run the link in a background thread."""
        self._thread = threading.Thread(target=self.run, name="mmo-runner-link", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """End the link (close 1000) and stop re-dialling; calls in flight are abandoned."""
        self._stop.set()
        link = self._link
        if link is not None:
            link.close(1000, "runner stopping")
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)
        self._pool.shutdown(wait=False, cancel_futures=True)

    @property
    def stopped(self) -> bool:
        """True once stop() was called or the server refused the runner for good."""
        return self._stop.is_set()

    def run(self) -> None:
        """Dial, serve, re-dial with backoff until :meth:`stop` or a fatal refusal."""
        backoff = Backoff(self.backoff_initial, self.backoff_max)
        while not self._stop.is_set():
            greeted_for = 0.0
            try:
                greeted_for = self._session()
            except LinkRejected as exc:
                self._give_up(exc)
                return
            except Exception as exc:  # noqa: BLE001 - any network trouble: dial again
                self.last_error = one_line(f"{type(exc).__name__}: {exc}")
                if not self._stop.is_set():
                    log.warning("runner link: %s", self.last_error)
            if self._stop.is_set():
                return
            if greeted_for >= self.backoff_reset_after:
                backoff.reset()
            wait = backoff.next()
            log.info("runner link: reconnecting in %.1f s", wait)
            if self._stop.wait(wait):
                return

    def _give_up(self, exc: LinkRejected) -> None:
        self.fatal = exc
        self.last_error = str(exc)
        log.error("runner link refused: %s; not reconnecting", exc)
        self._stop.set()
        if self.on_fatal is not None:
            try:
                self.on_fatal(exc)
            except Exception:  # noqa: BLE001
                log.exception("on_fatal callback failed")

    # -- sending from the runner ----------------------------------------------------

    def send_projects(self, projects: Iterable[Mapping[str, Any] | ProjectInfo]) -> bool:
        """Announce a rescanned project list; False when offline (the next hello has it)."""
        frame = Projects(projects=[ProjectInfo.model_validate(p) if not isinstance(p, ProjectInfo)
                                   else p for p in projects])
        return self._send_now(dump_frame(frame))

    def send_job_event(self, event: Mapping[str, Any]) -> bool:
        """Report a process job's change (``job_id``, ``status``, ...); False when offline."""
        frame = JobEvent.model_validate({**event, "type": "job_event"})
        return self._send_now(dump_frame(frame))

    def _send_now(self, text: str) -> bool:
        link = self._link
        if link is None or link.closed:
            return False
        try:
            link.send(text)
            return True
        except Exception:  # noqa: BLE001 - the link dropped under us
            return False

    # -- one link -------------------------------------------------------------------

    def _hello(self) -> str:
        projects = [p if isinstance(p, ProjectInfo) else ProjectInfo.model_validate(p)
                    for p in self._projects()]
        return dump_frame(Hello(client_id=self.client_id, owner=self.owner,
                                version=self.version, projects=projects,
                                live_job_ids=list(self._live_job_ids())))

    def _dial(self) -> ClientConnection:
        try:
            # a loopback server is never reached through a proxy of the environment
            proxy = None if is_loopback_host(urlsplit(self.url).hostname or "") else True
            return connect(self.url, additional_headers={"Authorization": f"Bearer {self._token}"},
                           open_timeout=self.open_timeout, close_timeout=2, proxy=proxy,
                           max_size=MAX_FRAME_BYTES, ping_interval=None,
                           user_agent_header=f"mmo-runner/{self.version}")
        except InvalidStatus as exc:
            status = exc.response.status_code
            if status in (401, 403):
                raise LinkRejected(f"the server refused the runner token (HTTP {status})",
                                   status=status) from None
            raise ConnectionError(f"the server answered HTTP {status} to the upgrade") from None

    def _session(self) -> float:
        """One link from dial to drop; returns how long it was greeted (seconds)."""
        with self._dial() as ws:
            link = _Link(ws)
            greeted_at: float | None = None
            try:
                link.send(self._hello())
                welcome = parse_frame(ws.recv(timeout=self.open_timeout))
                if not isinstance(welcome, Welcome):
                    raise LinkProtocolError(f"expected welcome, got {welcome.type}")
                self.heartbeat_secs = welcome.heartbeat_secs
                greeted_at = time.monotonic()
                self._link = link
                self.links_opened += 1
                self.connected.set()
                log.info("runner link up (%s)", self.client_id)
                self._pump(link, welcome.heartbeat_secs)
            except ConnectionClosed as exc:
                code = exc.rcvd.code if exc.rcvd is not None else None
                if code in FATAL_CLOSE_CODES:
                    raise LinkRejected(f"{FATAL_CLOSE_CODES[code]} (close {code})",
                                       close_code=code) from None
                raise
            except LinkProtocolError as exc:
                link.close(CLOSE_PROTOCOL_ERROR, str(exc)[:120])
                raise
            finally:
                self.connected.clear()
                if greeted_at is not None:
                    self.links_closed += 1
                if self._link is link:
                    self._link = None
                link.close()
        return 0.0 if greeted_at is None else time.monotonic() - greeted_at

    def _pump(self, link: _Link, heartbeat: float) -> None:
        """Receive and heartbeat until the link ends (then raise ConnectionClosed)."""
        last_heard = time.monotonic()
        next_ping = last_heard + heartbeat
        while not self._stop.is_set():
            try:
                text = link.ws.recv(timeout=max(0.0, next_ping - time.monotonic()))
            except TimeoutError:
                text = None
            now = time.monotonic()
            if text is not None:
                last_heard = now
                self._handle(link, parse_frame(text))
            if now >= next_ping:
                if now - last_heard > SILENT_INTERVALS * heartbeat:
                    link.close(CLOSE_HEARTBEAT_TIMEOUT, "heartbeat timeout")
                    raise ConnectionError("the server was silent for 3 heartbeats")
                link.send(dump_frame(Ping()))
                next_ping = now + heartbeat

    def _handle(self, link: _Link, frame: Any) -> None:
        if isinstance(frame, Chunk):
            frame = link.reassembler.feed(frame)
            if frame is None:
                return
        if isinstance(frame, Ping):
            link.send(dump_frame(Pong()))
        elif isinstance(frame, Pong | Welcome):
            return
        elif isinstance(frame, Call):
            try:
                self._pool.submit(self._run_call, link, frame)
            except RuntimeError:  # stopping: the pool is shut down
                pass
        else:
            raise LinkProtocolError(f"a server does not send {frame.type} frames")

    def _run_call(self, link: _Link, call: Call) -> None:
        """Worker thread: execute, then reply on the link the call came on (if still up)."""
        try:
            envelope = self.handle_call(call.model_dump(mode="json"))
            if not is_envelope(envelope):
                raise TypeError("handle_call returned no envelope")
        except Exception as exc:  # noqa: BLE001 - one line back, the traceback to the log
            log.exception("call %s (%s) failed on the runner", call.call_id, call.tool)
            envelope = failure("runner_unavailable",
                               f"{call.tool} failed on the runner: {type(exc).__name__}",
                               state_changed="unknown")
        try:
            frames = encode_frames(Reply(call_id=call.call_id, envelope=envelope))
        except LinkProtocolError as exc:
            frames = encode_frames(Reply(call_id=call.call_id, envelope=failure(
                "runner_unavailable", f"{call.tool}: {exc}", state_changed="unknown")))
        for text in frames:
            if link.closed or self._link is not link:
                log.info("reply to call %s dropped: its link is gone", call.call_id)
                return
            try:
                link.send(text)
            except Exception:  # noqa: BLE001 - dropped mid-reply: the server reports it
                log.info("reply to call %s dropped: its link failed", call.call_id)
                return


class LinkWatch:
    """The link's ups and downs since the last look, read from the client's counters.

    Sampling ``connected`` misses a link that came up and dropped between two looks
    (a server stopped right after a call): the runner would leave its sessions
    ``running`` while unlinked. Counters never miss one; a quick re-dial reads as a
    drop followed by an up.
    """

    def __init__(self, client: LinkClient) -> None:
        self._client = client
        self._opened = 0
        self._closed = 0

    def changes(self) -> list[bool]:
        """``[False]`` for a drop, ``[True]`` for a new link, both in order, or ``[]``."""
        closed, opened = self._client.links_closed, self._client.links_opened
        up = self._client.connected.is_set()
        seen: list[bool] = []
        if closed != self._closed:
            seen.append(False)
        if opened != self._opened and up:
            seen.append(True)
        self._closed, self._opened = closed, opened
        return seen

"""A JSON-RPC client for one ``codex app-server`` process over stdio.

The client owns the process: it spawns it as its own process-group leader,
publishes ``pid``/``pgid``/``start_token`` before any handshake (so a host can
record them first), reads stdout on a thread, and on ``close()`` retires the
whole group. Every message in either direction goes to the event recorder
before it is acted on, so ``events.jsonl`` is complete evidence.

Routing follows codex-app-server.md §1: a line with ``method`` is the server
speaking (request if it has ``id``, else notification); a line without it
answers one of our requests. Every server request gets exactly one answer:
the approval policy's automatic answer, else the request handler's, else an
error reply, unless the handler keeps it pending for a later ``respond``.
"""

from __future__ import annotations

import itertools
import logging
import os
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import psutil
from pydantic import ValidationError

from mmo_kernel import package_version
from mmo_kernel.host_api import kill_processes, process_start_token, terminate_process_groups

from .approvals import ApprovalPolicy
from .errors import AppServerError, TransportLost
from .launch import spawn_app_server
from .messages import (
    EventRecord,
    Kind,
    RequestId,
    RpcError,
    ServerRequest,
    classify,
    encode,
    parse_line,
)

log = logging.getLogger("mmo.app_server")

CLIENT_NAME = "mmo"
DEFAULT_TIMEOUT = 30.0
DEFAULT_GRACE_SECONDS = 2.0
_KILL_WAIT_SECONDS = 2.0

# JSON-RPC error codes the client uses when it answers a server request itself.
METHOD_NOT_HANDLED = -32601
HANDLER_FAILED = -32603

Recorder = Callable[[dict[str, Any]], None]
"""Receives every ``{"recorded_at", "direction", "message"}`` row, in order."""
NotificationListener = Callable[[dict[str, Any]], None]
LossListener = Callable[[TransportLost], None]


class _KeepPending:
    def __repr__(self) -> str:
        return "KEEP_PENDING"


KEEP_PENDING: Any = _KeepPending()
"""Returned by a request handler to leave a server request for a later ``respond``."""

RequestHandler = Callable[[ServerRequest], Any]
"""Returns the result dict to send, or ``KEEP_PENDING``; raising sends an error reply."""


@dataclass
class _Pending:
    method: str
    done: threading.Event = field(default_factory=threading.Event)
    response: dict[str, Any] | None = None
    lost: TransportLost | None = None


class AppServerClient:
    """One live app-server process and the JSON-RPC conversation with it."""

    def __init__(self, popen: subprocess.Popen[bytes], *, recorder: Recorder | None = None,
                 approvals: ApprovalPolicy | None = None,
                 request_handler: RequestHandler | None = None,
                 stderr_path: Path | None = None) -> None:
        """Wrap an already spawned process; use :meth:`spawn` to start one."""
        if popen.stdin is None or popen.stdout is None:
            raise ValueError("app-server process needs piped stdin and stdout")
        self._popen = popen
        self.pid: int = popen.pid
        self.pgid: int = popen.pid  # start_new_session makes the child its group's leader
        self.start_token: str | None = process_start_token(popen.pid)
        self.stderr_path = stderr_path
        self._recorder = recorder
        self._approvals = approvals
        self._handler = request_handler
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._record_lock = threading.Lock()
        self._pending: dict[RequestId, _Pending] = {}
        self._server_requests: dict[RequestId, ServerRequest] = {}
        self._listeners: list[NotificationListener] = []
        self._loss_listeners: list[LossListener] = []
        self._lost: TransportLost | None = None
        self._closed = False
        self._reader = threading.Thread(target=self._read_loop, name=f"app-server-{self.pid}",
                                        daemon=True)
        self._reader.start()

    @classmethod
    def spawn(cls, argv: Sequence[str], *, cwd: str | os.PathLike[str], env: Mapping[str, str],
              stderr_path: Path | None = None, recorder: Recorder | None = None,
              approvals: ApprovalPolicy | None = None,
              request_handler: RequestHandler | None = None) -> AppServerClient:
        """Start ``argv`` (e.g. ``[codex, "app-server"]``) and begin reading its stdout."""
        popen = spawn_app_server(argv, cwd=cwd, env=env, stderr_path=stderr_path)
        return cls(popen, recorder=recorder, approvals=approvals,
                   request_handler=request_handler, stderr_path=stderr_path)

    # ------------------------------------------------------------ state --

    @property
    def returncode(self) -> int | None:
        return self._popen.poll()

    @property
    def transport_lost(self) -> TransportLost | None:
        """Why the conversation ended, or ``None`` while it is alive."""
        return self._lost

    def pending_server_requests(self) -> list[dict[str, Any]]:
        """Server requests still waiting for an answer, oldest first."""
        with self._lock:
            return [request.public() for request in self._server_requests.values()]

    def add_notification_listener(self, listener: NotificationListener) -> None:
        """Call ``listener(message)`` (on the reader thread) for every notification."""
        self._listeners.append(listener)

    def add_loss_listener(self, listener: LossListener) -> None:
        """Call ``listener(error)`` once when the transport is lost (now, if it already is)."""
        with self._lock:
            lost = self._lost
            if lost is None:
                self._loss_listeners.append(listener)
        if lost is not None:
            listener(lost)

    def set_request_handler(self, handler: RequestHandler | None) -> None:
        self._handler = handler

    # ---------------------------------------------------------- sending --

    def request(self, method: str, params: dict[str, Any] | None = None,
                timeout: float = DEFAULT_TIMEOUT) -> Any:
        """Send a request and wait for its result.

        Raises ``AppServerError`` for an error response, ``TransportLost`` at
        once if the process dies first, ``TimeoutError`` after ``timeout``.
        """
        pending = _Pending(method)
        with self._lock:
            if self._lost is not None:
                raise self._lost
            request_id = next(self._ids)
            self._pending[request_id] = pending
        message: dict[str, Any] = {"id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        try:
            self._send(message)
            answered = pending.done.wait(timeout)
        finally:
            with self._lock:
                self._pending.pop(request_id, None)
        if not answered:
            raise TimeoutError(f"app-server did not answer {method} within {timeout:g} s")
        if pending.lost is not None:
            raise pending.lost
        return _result_of(method, pending.response or {})

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        """Send a notification (no answer expected)."""
        message: dict[str, Any] = {"method": method}
        if params is not None:
            message["params"] = params
        self._send(message)

    def respond(self, request_id: RequestId, result: dict[str, Any]) -> None:
        """Answer a pending server request with a result."""
        self._answer(request_id, {"id": request_id, "result": result})

    def respond_error(self, request_id: RequestId, code: int, message: str,
                      data: Any = None) -> None:
        """Answer a pending server request with a JSON-RPC error."""
        error: dict[str, Any] = {"code": code, "message": message}
        if data is not None:
            error["data"] = data
        self._answer(request_id, {"id": request_id, "error": error})

    def initialize(self, *, version: str | None = None, experimental_api: bool = False,
                   opt_out_notifications: Sequence[str] = (),
                   timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
        """The handshake: ``initialize`` as client ``mmo``, then ``initialized``."""
        params: dict[str, Any] = {
            "clientInfo": {"name": CLIENT_NAME, "title": "MMO",
                           "version": version or package_version()},
        }
        capabilities: dict[str, Any] = {}
        if experimental_api:
            capabilities["experimentalApi"] = True
        if opt_out_notifications:
            capabilities["optOutNotificationMethods"] = list(opt_out_notifications)
        if capabilities:
            params["capabilities"] = capabilities
        result = self.request("initialize", params, timeout)
        self.notify("initialized")
        return result

    def _answer(self, request_id: RequestId, message: dict[str, Any]) -> None:
        with self._lock:
            if request_id not in self._server_requests:
                raise ValueError(f"no pending app-server request with id {request_id!r}")
            del self._server_requests[request_id]
        self._send(message)

    def _send(self, message: dict[str, Any]) -> None:
        line = encode(message)
        with self._write_lock:
            if self._lost is not None:
                raise self._lost
            self._record("sent", message)
            try:
                assert self._popen.stdin is not None
                self._popen.stdin.write(line)
                self._popen.stdin.flush()
            except (BrokenPipeError, ConnectionResetError, ValueError, OSError) as exc:
                lost = self._mark_lost(f"app-server pid {self.pid} stopped reading stdin ({exc})")
                raise lost from None

    def _record(self, direction: Literal["sent", "received"], message: dict[str, Any]) -> None:
        if self._recorder is None:
            return
        row = EventRecord.now(direction, message).model_dump()
        with self._record_lock:
            try:
                self._recorder(row)
            except Exception:  # evidence loss must not also kill the conversation
                log.exception("could not record an app-server %s message", direction)

    # ---------------------------------------------------------- reading --

    def _read_loop(self) -> None:
        stdout = self._popen.stdout
        assert stdout is not None
        try:
            for raw in iter(stdout.readline, b""):
                message = parse_line(raw)
                if message is None:
                    if raw.strip():
                        log.warning("app-server pid %s wrote a non-JSON line: %.200r",
                                    self.pid, raw)
                    continue
                self._record("received", message)
                try:
                    self._dispatch(message)
                except Exception:  # one bad message must not stop the reader
                    log.exception("failed to handle an app-server message")
        except (OSError, ValueError) as exc:
            log.warning("app-server pid %s stdout failed: %s", self.pid, exc)
        self._mark_lost(self._eof_reason())

    def _eof_reason(self) -> str:
        if self._closed:
            return f"app-server pid {self.pid} was closed by MMO"
        try:
            code = self._popen.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            return f"app-server pid {self.pid} closed its stdout"
        return f"app-server pid {self.pid} exited with status {code}"

    def _dispatch(self, message: dict[str, Any]) -> None:
        kind = classify(message)
        if kind is Kind.RESPONSE:
            self._on_response(message)
        elif kind is Kind.NOTIFICATION:
            for listener in list(self._listeners):
                try:
                    listener(message)
                except Exception:
                    log.exception("notification listener failed on %s", message.get("method"))
        elif kind is Kind.SERVER_REQUEST:
            self._on_server_request(message)
        else:
            log.warning("app-server pid %s sent an unroutable message: %.200r", self.pid, message)

    def _on_response(self, message: dict[str, Any]) -> None:
        with self._lock:
            pending = self._pending.get(message["id"])
        if pending is None:
            log.warning("app-server answered unknown request id %r", message["id"])
            return
        pending.response = message
        pending.done.set()

    def _on_server_request(self, message: dict[str, Any]) -> None:
        try:
            request = ServerRequest.model_validate(
                {"id": message["id"], "method": message["method"],
                 "params": message.get("params") or {}})
        except ValidationError as exc:
            self._send({"id": message["id"],
                        "error": {"code": -32600, "message": f"invalid request params: {exc}"}})
            return
        with self._lock:
            self._server_requests[request.id] = request
        auto = self._approvals.auto_reply(request) if self._approvals else None
        if auto is not None:
            self.respond(request.id, auto)
            return
        self._ask_handler(request)

    def _ask_handler(self, request: ServerRequest) -> None:
        if self._handler is None:
            self.respond_error(request.id, METHOD_NOT_HANDLED,
                               f"mmo does not handle server request {request.method}")
            return
        try:
            result = self._handler(request)
        except Exception as exc:
            log.exception("request handler failed on %s", request.method)
            self.respond_error(request.id, HANDLER_FAILED,
                               f"mmo could not answer {request.method}: {exc}")
            return
        if result is KEEP_PENDING:
            return
        if not isinstance(result, dict):
            self.respond_error(request.id, HANDLER_FAILED,
                               f"mmo produced no answer for {request.method}")
            return
        self.respond(request.id, result)

    def _mark_lost(self, reason: str) -> TransportLost:
        with self._lock:
            if self._lost is not None:
                return self._lost
            self._lost = TransportLost(reason, self._popen.poll())
            pending = list(self._pending.values())
            listeners, self._loss_listeners = self._loss_listeners, []
        for waiting in pending:
            waiting.lost = self._lost
            waiting.done.set()
        for listener in listeners:
            try:
                listener(self._lost)
            except Exception:
                log.exception("transport-loss listener failed")
        return self._lost

    # ---------------------------------------------------------- closing --

    def close(self, grace_seconds: float = DEFAULT_GRACE_SECONDS) -> None:
        """Retire the whole process group (SIGTERM, grace, SIGKILL) and reap the server.

        Descendants that left the group (their own session) are killed too.

        Idempotent. Raises ``RuntimeError`` (``process groups did not
        terminate``) only if something in the group survives SIGKILL.
        """
        if self._closed:
            return
        self._closed = True
        try:
            if self._popen.stdin is not None:
                self._popen.stdin.close()
        except OSError:
            pass
        strays = _descendants(self.pid)
        try:
            terminate_process_groups([self.pgid], grace_seconds)
            kill_processes(strays, _KILL_WAIT_SECONDS)  # escaped the group (own sessions)
        finally:
            self._popen.wait()
            if threading.current_thread() is not self._reader:
                self._reader.join(timeout=5.0)
            self._mark_lost(f"app-server pid {self.pid} was closed by MMO")
            if self._popen.stdout is not None:
                self._popen.stdout.close()

    def __enter__(self) -> AppServerClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def _result_of(method: str, response: dict[str, Any]) -> Any:
    if "error" in response:
        try:
            error = RpcError.model_validate(response["error"])
        except ValidationError:
            malformed = f"malformed error: {response['error']!r}"
            raise AppServerError(method, -32603, malformed) from None
        raise AppServerError(method, error.code, error.message, error.data)
    return response.get("result")


__all__ = [
    "CLIENT_NAME",
    "KEEP_PENDING",
    "AppServerClient",
    "LossListener",
    "NotificationListener",
    "Recorder",
    "RequestHandler",
]

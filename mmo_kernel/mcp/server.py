"""The ``mmo_mesh`` stdio MCP server (``mmo mcp``, ``python -m mmo_kernel.mcp``).

Start-up imports only the stdlib JSON-RPC layer; identity, pydantic models
and ``mmo_kernel.api`` load on the first request that needs them, so the
``initialize`` reply comes fast. ``tools/call`` runs on worker threads: Codex
may issue parallel calls, and one long ``agents_wait`` must not block a
``agent_status``. A ``notifications/cancelled`` ends a running
``agents_wait`` and drops the cancelled call's reply. At end of input the
server finishes in-flight calls and exits 0.
"""

from __future__ import annotations

import os
import sys
import threading
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any, BinaryIO

from mmo_kernel.mcp import jsonrpc as rpc

PROTOCOL_VERSION = "2025-06-18"
SUPPORTED_PROTOCOL_VERSIONS = ("2025-11-25", PROTOCOL_VERSION)
"""Versions answered as asked; any other request is answered with ``2025-06-18``."""
SERVER_NAME = "mmo_mesh"
MAX_PARALLEL_CALLS = 8
INSTRUCTIONS = (
    "Delegate bounded tasks to the team's worker agents and control them. "
    "Read a finished job's full result with agent_result before accepting or rejecting it."
)


class Output:
    """Serialized writes of one JSON-RPC message per line to the protocol stream."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        self._lock = threading.Lock()
        self.closed = False

    def send(self, message: dict[str, Any]) -> None:
        data = rpc.encode(message)
        with self._lock:
            if self.closed:
                return
            try:
                self._stream.write(data)
                self._stream.flush()
            except (BrokenPipeError, OSError):
                self.closed = True


class InFlight:
    """Tool calls still running, by request id, each with the event that cancels it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._calls: dict[str | int | None, list[threading.Event]] = {}

    def start(self, request_id: str | int | None) -> threading.Event:
        event = threading.Event()
        with self._lock:
            self._calls.setdefault(request_id, []).append(event)
        return event

    def cancel(self, request_id: str | int) -> None:
        with self._lock:
            for event in self._calls.get(request_id, ()):
                event.set()

    def finish(self, request_id: str | int | None, event: threading.Event) -> bool:
        """Forget the call; True when it was cancelled (its reply must not be sent)."""
        with self._lock:
            events = self._calls.get(request_id, [])
            if event in events:
                events.remove(event)
            if not events:
                self._calls.pop(request_id, None)
        return event.is_set()


def invalid_params(request_id: str | int | None, reason: str) -> dict[str, Any]:
    """``-32602`` with the reason in ``message`` too: clients such as the Inspector show only it."""
    return rpc.failure(request_id, rpc.INVALID_PARAMS, f"invalid params: {reason}", reason)


class MeshServer:
    """MCP lifecycle, method routing and tool dispatch for one client connection."""

    def __init__(self, output: Output, environ: Mapping[str, str], state_dir: Path) -> None:
        self.output = output
        self.environ = environ
        self.state_dir = state_dir
        self.initialized = False
        self._pool: Any = None
        self._in_flight = InFlight()

    # -- input ---------------------------------------------------------------

    def handle_line(self, raw: bytes) -> None:
        """Answer (or deliberately ignore) one input line."""
        if not raw.strip():
            return
        try:
            message = rpc.classify(rpc.decode_line(raw))
        except rpc.ParseError as exc:
            self.output.send(rpc.failure(None, rpc.PARSE_ERROR, "parse error", str(exc)))
            return
        except rpc.InvalidRequest as exc:
            self.output.send(
                rpc.failure(exc.request_id, rpc.INVALID_REQUEST, "invalid request", str(exc))
            )
            return
        if isinstance(message, rpc.Response):
            return
        if message.is_notification:
            if message.method == "notifications/cancelled":
                self._cancel(message.params)
            return
        try:
            self._route(message)
        except Exception:  # a server bug must not kill the connection
            traceback.print_exc(file=sys.stderr)
            self.output.send(rpc.failure(message.request_id, rpc.INTERNAL_ERROR, "internal error"))

    def _route(self, request: rpc.Request) -> None:
        rid = request.request_id
        if request.method == "initialize":
            self.output.send(self._initialize(request))
        elif request.method == "ping":  # MCP allows a ping at any time, also before initialize
            self.output.send(rpc.success(rid, {}))
        elif not self.initialized:
            self.output.send(rpc.failure(rid, rpc.INVALID_REQUEST, "server not initialized"))
        elif request.method == "tools/list":
            self.output.send(self._list_tools(rid))
        elif request.method == "tools/call":
            self._submit(request)
        else:
            self.output.send(
                rpc.failure(rid, rpc.METHOD_NOT_FOUND, "method not found", request.method)
            )

    def _cancel(self, params: dict[str, Any]) -> None:
        """Cancel an in-flight call (unknown, finished or malformed ids are ignored, per MCP)."""
        request_id = params.get("requestId")
        if rpc.valid_id(request_id):
            self._in_flight.cancel(request_id)

    # -- lifecycle -----------------------------------------------------------

    def _initialize(self, request: rpc.Request) -> dict[str, Any]:
        rid = request.request_id
        if self.initialized:
            return rpc.failure(rid, rpc.INVALID_REQUEST, "server already initialized")
        asked = request.params.get("protocolVersion")
        if not isinstance(asked, str):
            return invalid_params(rid, "protocolVersion must be a string")
        from mmo_kernel import package_version

        self.initialized = True
        return rpc.success(
            rid,
            {
                "protocolVersion": asked
                if asked in SUPPORTED_PROTOCOL_VERSIONS
                else PROTOCOL_VERSION,
                "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": {"name": SERVER_NAME, "version": package_version()},
                "instructions": INSTRUCTIONS,
            },
        )

    # -- tools ---------------------------------------------------------------

    def _context(self) -> tuple[Any, list[str], tuple[str, ...]]:
        """Verify the caller and work out its tools; raises IdentityError."""
        from mmo_kernel.mesh.identity import verify_caller
        from mmo_kernel.mesh.surface import tools_for
        from mmo_kernel.mesh.team import load_team

        caller = verify_caller(self.environ, self.state_dir)
        team = load_team(self.state_dir, caller.snapshot_hash)
        spawnable = team.role(caller.agent).can_spawn
        offered = tools_for(
            caller.kind,
            spawnable=spawnable,
            depth=caller.depth,
            max_depth=team.max_depth,
            tainted=caller.tainted,
        )
        return caller, offered, spawnable

    def _context_error(self, rid: str | int | None, exc: Exception) -> dict[str, Any] | None:
        from mmo_kernel.mesh.identity import IdentityError

        if isinstance(exc, IdentityError):
            return rpc.failure(rid, rpc.UNAUTHORIZED, str(exc))
        if isinstance(exc, (OSError, ValueError, LookupError)):
            return rpc.failure(rid, rpc.INTERNAL_ERROR, f"cannot load the caller's team: {exc}")
        return None

    def _list_tools(self, rid: str | int | None) -> dict[str, Any]:
        try:
            _caller, offered, spawnable = self._context()
        except Exception as exc:
            reply = self._context_error(rid, exc)
            if reply is None:
                raise
            return reply
        from mmo_kernel.mesh.tools import definitions

        return rpc.success(rid, {"tools": definitions(offered, spawnable)})

    def _submit(self, request: rpc.Request) -> None:
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(MAX_PARALLEL_CALLS, thread_name_prefix="mesh-call")
        cancelled = self._in_flight.start(request.request_id)
        self._pool.submit(self._call_tool_safely, request, cancelled)

    def _call_tool_safely(self, request: rpc.Request, cancelled: threading.Event) -> None:
        try:
            reply = self._call_tool(request, cancelled)
        except Exception:
            traceback.print_exc(file=sys.stderr)
            reply = rpc.failure(request.request_id, rpc.INTERNAL_ERROR, "internal error")
        if not self._in_flight.finish(request.request_id, cancelled):
            self.output.send(reply)  # a cancelled request gets no reply (MCP)

    def _call_tool(self, request: rpc.Request, cancelled: threading.Event) -> dict[str, Any]:
        from mmo_kernel.mcp.tool_results import error_result, success_result

        rid = request.request_id
        name = request.params.get("name")
        arguments = request.params.get("arguments", {})
        if not isinstance(name, str):
            return invalid_params(rid, "unknown tool: name must be a string")
        try:
            caller, offered, spawnable = self._context()
        except Exception as exc:
            reply = self._context_error(rid, exc)
            if reply is None:
                raise
            return reply
        from mmo_kernel.mcp.handlers import ToolArgumentError, UnknownTool, call

        try:
            result = call(caller, name, arguments, offered, spawnable, cancelled=cancelled)
        except (ToolArgumentError, UnknownTool) as exc:
            return invalid_params(rid, str(exc))
        except Exception as exc:  # the tool refused or failed: a normal, isError result
            return rpc.success(rid, error_result(exc))
        return rpc.success(rid, success_result(result))

    def drain(self) -> None:
        """Finish in-flight tool calls (their replies are still owed)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)


def _claim_stdio() -> tuple[BinaryIO, BinaryIO]:
    """Keep private copies of stdin/stdout for the protocol; point fds 0/1 at /dev/null and stderr.

    A stray ``print`` (ours, a library's, or a child process's) then lands on
    stderr instead of corrupting the JSON-RPC stream, and no child can read
    protocol input.
    """
    sys.stdout.flush()
    proto_in, proto_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(proto_in, "rb"), os.fdopen(proto_out, "wb")


def main(argv: list[str] | None = None) -> int:
    """Serve MCP on stdio until end of input; returns the exit code (0)."""
    from mmo_kernel.state.paths import state_dir

    reader, writer = _claim_stdio()
    server = MeshServer(Output(writer), os.environ, state_dir())
    try:
        for raw in reader:
            server.handle_line(raw)
            if server.output.closed:
                break
    except KeyboardInterrupt:
        pass
    finally:
        server.drain()
    return 0

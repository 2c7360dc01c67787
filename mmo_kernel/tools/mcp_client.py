"""A small MCP client for third-party tool servers: stdio and streamable HTTP, stdlib only.

The ``switchyard`` bridge talks to the tool MCP servers of ``tool-mcp.d``
itself (spec 09), so it needs exactly four things from a client: the
``initialize`` handshake, ``tools/list``, ``tools/call`` and a shutdown that
leaves no process behind. Stdio servers are newline-delimited JSON-RPC 2.0
and lead their own process group (closing kills the group, grandchildren
included); streamable HTTP servers get one POST per message and may answer
with JSON or a server-sent-event stream.
"""

from __future__ import annotations

import abc
import itertools
import json
import logging
import os
import subprocess
import threading
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mmo_kernel import package_version
from mmo_kernel.state.processes import terminate_process_groups
from mmo_kernel.state.redaction import pump_redacted
from mmo_kernel.tools.servers import ToolServer, check_http_header_value

log = logging.getLogger("mmo.mcp_client")

PROTOCOL_VERSION = "2025-06-18"
SUPPORTED_PROTOCOL_VERSIONS = ("2025-06-18", "2025-03-26", "2024-11-05")
DEFAULT_STARTUP_TIMEOUT = 10.0
DEFAULT_TOOL_TIMEOUT = 60.0
CLOSE_GRACE_SECONDS = 1.0
BASE_ENV_NAMES = ("HOME", "LOGNAME", "PATH", "SHELL", "USER", "LANG", "LC_ALL", "TERM",
                  "TMPDIR", "TZ")
"""What every stdio server inherits (as Codex does); anything else must be in ``env_vars``."""


class McpError(RuntimeError):
    """A tool MCP server could not do what was asked; the message names the server."""

    def __init__(self, server: str, message: str) -> None:
        super().__init__(f"tool MCP server {server}: {message}")
        self.server = server


class McpRpcError(McpError):
    """The server answered a request with a JSON-RPC error."""

    def __init__(self, server: str, method: str, code: int, message: str,
                 data: Any = None) -> None:
        super().__init__(server, f"{method} failed with JSON-RPC error {code}: {message}")
        self.method = method
        self.code = code
        self.rpc_message = message
        self.data = data


class McpTransportError(McpError):
    """The server is gone or unreachable (exited, closed stdout, HTTP failure)."""


class McpTimeout(McpError, TimeoutError):
    """The server did not answer in time (the request was cancelled)."""


class McpTool(BaseModel):
    """One entry of ``tools/list``."""

    model_config = ConfigDict(extra="allow")

    name: str = Field(min_length=1)
    description: str | None = None
    inputSchema: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})


class McpToolResult(BaseModel):
    """A ``tools/call`` result; ``isError`` is a tool failure, not a protocol one."""

    model_config = ConfigDict(extra="allow")

    content: list[dict[str, Any]] = Field(default_factory=list)
    isError: bool = False
    structuredContent: dict[str, Any] | None = None


@dataclass
class _Pending:
    done: threading.Event = field(default_factory=threading.Event)
    response: dict[str, Any] | None = None


class McpClient(abc.ABC):
    """The MCP conversation; subclasses move JSON-RPC messages over one transport."""

    def __init__(self, server: ToolServer) -> None:
        self.server = server
        self.name = server.name
        self.server_info: dict[str, Any] = {}
        self.protocol_version: str | None = None
        self._ids = itertools.count(1)

    # ------------------------------------------------------------- MCP --

    def initialize(self, timeout: float | None = None) -> dict[str, Any]:
        """The handshake: ``initialize`` then ``notifications/initialized``."""
        wait = timeout or float(self.server.startup_timeout_sec or DEFAULT_STARTUP_TIMEOUT)
        result = self.request("initialize", {
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "mmo", "version": package_version()},
        }, wait)
        version = result.get("protocolVersion") if isinstance(result, dict) else None
        if version not in SUPPORTED_PROTOCOL_VERSIONS:
            raise McpError(self.name, f"unsupported MCP protocol version {version!r} "
                                      f"(MMO speaks {', '.join(SUPPORTED_PROTOCOL_VERSIONS)})")
        self.protocol_version = version
        self.server_info = dict(result.get("serverInfo") or {})
        self.notify("notifications/initialized")
        return result

    def list_tools(self, timeout: float | None = None) -> list[McpTool]:
        """Every tool the server lists, following ``nextCursor`` pages."""
        wait = timeout or float(self.server.startup_timeout_sec or DEFAULT_STARTUP_TIMEOUT)
        tools: list[McpTool] = []
        cursor: str | None = None
        for _ in range(1000):
            page = self.request("tools/list", {"cursor": cursor} if cursor else {}, wait)
            try:
                tools.extend(McpTool.model_validate(t) for t in (page or {}).get("tools", []))
            except (ValidationError, AttributeError) as exc:
                raise McpError(self.name, f"tools/list returned a malformed tool: {exc}") from None
            cursor = (page or {}).get("nextCursor")
            if not cursor:
                return tools
        raise McpError(self.name, "tools/list never stopped paging (1000 pages)")

    def call_tool(self, tool: str, arguments: Mapping[str, Any] | None = None,
                  timeout: float | None = None) -> McpToolResult:
        """One ``tools/call``; a tool-level failure comes back with ``isError``."""
        wait = timeout or float(self.server.tool_timeout_sec or DEFAULT_TOOL_TIMEOUT)
        result = self.request("tools/call", {"name": tool, "arguments": dict(arguments or {})},
                              wait)
        try:
            return McpToolResult.model_validate(result)
        except ValidationError as exc:
            raise McpError(self.name, f"tools/call {tool} returned a malformed result: "
                                      f"{exc.errors()[0]['msg']}") from None

    # ------------------------------------------------------- transport --

    def request(self, method: str, params: dict[str, Any], timeout: float) -> Any:
        """Send a request and return its result (raises the ``Mcp*`` errors)."""
        request_id = next(self._ids)
        response = self._exchange({"jsonrpc": "2.0", "id": request_id, "method": method,
                                   "params": params}, timeout)
        error = response.get("error")
        if error is not None:
            if not isinstance(error, dict):
                raise McpError(self.name, f"{method} answered a malformed error: {error!r}")
            raise McpRpcError(self.name, method, int(error.get("code", -32603)),
                              str(error.get("message", "")), error.get("data"))
        if "result" not in response:
            raise McpError(self.name, f"{method} answered neither result nor error")
        return response["result"]

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self._send_notification(message)

    @abc.abstractmethod
    def _exchange(self, message: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Deliver one request and return the JSON-RPC response to it."""

    @abc.abstractmethod
    def _send_notification(self, message: dict[str, Any]) -> None:
        """Deliver one notification."""

    @abc.abstractmethod
    def close(self) -> None:
        """End the conversation; idempotent."""

    def __enter__(self) -> McpClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class StdioMcpClient(McpClient):
    """A server process speaking newline-delimited JSON-RPC on stdin/stdout."""

    def __init__(self, server: ToolServer, env: Mapping[str, str],
                 stderr_path: Path | None = None) -> None:
        super().__init__(server)
        argv = [str(server.command), *server.args]
        # the server holds credentials: its stderr reaches the log redacted, through a pump
        stderr_target: Any = subprocess.DEVNULL if stderr_path is None else subprocess.PIPE
        try:
            self._popen = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr_target,
                cwd=server.cwd or None, env=dict(env), start_new_session=True)
        except OSError as exc:
            raise McpTransportError(
                self.name, f"cannot start {argv[0]!r}: {exc.strerror or exc}") from None
        if stderr_path is not None:
            assert self._popen.stderr is not None
            pump_redacted(self._popen.stderr, stderr_path, name=f"mcp-{self.name}-stderr")
        self.pid = self._popen.pid
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._pending: dict[int, _Pending] = {}
        self._lost: str | None = None
        self._closed = False
        self._reader = threading.Thread(target=self._read_loop, daemon=True,
                                        name=f"mcp-{self.name}-{self.pid}")
        self._reader.start()

    def _write(self, message: dict[str, Any]) -> None:
        line = (json.dumps(message, separators=(",", ":")) + "\n").encode("utf-8")
        with self._write_lock:
            if self._lost is not None:
                raise McpTransportError(self.name, self._lost)
            try:
                assert self._popen.stdin is not None
                self._popen.stdin.write(line)
                self._popen.stdin.flush()
            except (OSError, ValueError):
                raise McpTransportError(self.name, self._mark_lost()) from None

    def _exchange(self, message: dict[str, Any], timeout: float) -> dict[str, Any]:
        pending = _Pending()
        with self._lock:
            if self._lost is not None:
                raise McpTransportError(self.name, self._lost)
            self._pending[message["id"]] = pending
        try:
            self._write(message)
            answered = pending.done.wait(timeout)
        finally:
            with self._lock:
                self._pending.pop(message["id"], None)
        if pending.response is not None:
            return pending.response
        if not answered:
            self._cancel(message["id"], timeout)
            raise McpTimeout(self.name, f"{message['method']} got no answer within {timeout:g} s")
        raise McpTransportError(self.name, self._lost or "connection lost")

    def _cancel(self, request_id: int, timeout: float) -> None:
        try:
            self.notify("notifications/cancelled", {
                "requestId": request_id, "reason": f"no answer within {timeout:g} s"})
        except McpTransportError:
            pass

    def _send_notification(self, message: dict[str, Any]) -> None:
        self._write(message)

    def _read_loop(self) -> None:
        stdout = self._popen.stdout
        assert stdout is not None
        try:
            for raw in iter(stdout.readline, b""):
                self._dispatch(raw)
        except (OSError, ValueError):
            pass
        self._mark_lost()

    def _dispatch(self, raw: bytes) -> None:
        try:
            message = json.loads(raw)
        except ValueError:
            if raw.strip():
                log.warning("tool MCP server %s wrote a non-JSON line: %.200r", self.name, raw)
            return
        if not isinstance(message, dict):
            return
        if isinstance(message.get("method"), str):
            if "id" in message:
                self._answer_server_request(message)
            return
        with self._lock:
            pending = self._pending.get(message.get("id"))  # type: ignore[arg-type]
        if pending is not None:
            pending.response = message
            pending.done.set()

    def _answer_server_request(self, message: dict[str, Any]) -> None:
        """Servers may ping us; MMO offers no other client capability (sampling, roots)."""
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": message["id"]}
        if message["method"] == "ping":
            reply["result"] = {}
        else:
            reply["error"] = {"code": -32601,
                              "message": f"mmo does not support {message['method']}"}
        try:
            self._write(reply)
        except McpTransportError:
            pass

    def _mark_lost(self) -> str:
        reason = "closed by MMO"
        if not self._closed and self._lost is None:
            try:  # outside the lock: callers must not wait for a dying server's exit
                reason = f"exited with status {self._popen.wait(timeout=1.0)}"
            except subprocess.TimeoutExpired:
                reason = "closed its stdout"
        with self._lock:
            if self._lost is None:
                self._lost = reason
            pending = list(self._pending.values())
        for waiting in pending:
            waiting.done.set()
        return self._lost

    def close(self) -> None:
        """Close stdin, give the server a moment, then retire its whole process group."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._popen.stdin is not None:
                self._popen.stdin.close()
        except OSError:
            pass
        try:
            self._popen.wait(timeout=CLOSE_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            pass
        try:
            terminate_process_groups([self.pid], CLOSE_GRACE_SECONDS)
        finally:
            self._popen.wait()
            self._reader.join(timeout=5.0)
            self._mark_lost()
            if self._popen.stdout is not None:
                self._popen.stdout.close()


class HttpMcpClient(McpClient):
    """A streamable-HTTP server: each message is one POST; answers are JSON or SSE."""

    def __init__(self, server: ToolServer, env: Mapping[str, str]) -> None:
        super().__init__(server)
        self.url = str(server.url)
        self._headers = {"Content-Type": "application/json",
                         "Accept": "application/json, text/event-stream"}
        name = server.bearer_token_env_var
        if name:
            token = env.get(name, "")
            if not token:
                raise McpError(self.name, f"environment variable {name} "
                                          "(bearer_token_env_var) is not set")
            self._headers["Authorization"] = f"Bearer {check_http_header_value(name, token)}"
        self._session_id: str | None = None

    def _headers_now(self) -> dict[str, str]:
        headers = dict(self._headers)
        if self._session_id:
            headers["Mcp-Session-Id"] = self._session_id
        if self.protocol_version:
            headers["MCP-Protocol-Version"] = self.protocol_version
        return headers

    def _post(self, message: dict[str, Any], timeout: float) -> Any:
        body = json.dumps(message).encode("utf-8")
        request = urllib.request.Request(self.url, data=body, headers=self._headers_now(),
                                         method="POST")
        what = message.get("method", "request")
        try:
            return urllib.request.urlopen(request, timeout=timeout)  # noqa: S310 - http(s) only
        except urllib.error.HTTPError as exc:
            detail = exc.read(300).decode("utf-8", "replace").strip()
            exc.close()
            hint = ""
            if exc.code in (401, 403):
                hint = f" (check {self.server.bearer_token_env_var or 'the server credentials'})"
            raise McpTransportError(
                self.name, f"{what}: HTTP {exc.code} from {self.url}{hint}: {detail}") from None
        except TimeoutError:
            raise McpTimeout(self.name, f"{what} got no answer within {timeout:g} s") from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise McpTransportError(self.name, f"cannot reach {self.url}: {reason}") from None

    def _exchange(self, message: dict[str, Any], timeout: float) -> dict[str, Any]:
        with self._post(message, timeout) as response:
            if message["method"] == "initialize":
                self._session_id = response.headers.get("Mcp-Session-Id") or None
            ctype = (response.headers.get("Content-Type") or "").split(";")[0].strip()
            try:
                if ctype == "text/event-stream":
                    found = _response_from_sse(response, message["id"])
                else:
                    found = json.loads(response.read() or b"null")
            except TimeoutError:
                raise McpTimeout(self.name, f"{message['method']} got no answer within "
                                            f"{timeout:g} s") from None
            except ValueError:
                raise McpError(self.name, f"{message['method']} answered invalid JSON") from None
        if not isinstance(found, dict) or found.get("id") != message["id"]:
            raise McpError(self.name, f"{message['method']} got no JSON-RPC response "
                                      f"for request {message['id']}")
        return found

    def _send_notification(self, message: dict[str, Any]) -> None:
        with self._post(message, DEFAULT_STARTUP_TIMEOUT) as response:
            response.read()

    def close(self) -> None:
        """End the server-side session (best effort: the server may already be gone)."""
        if not self._session_id:
            return
        request = urllib.request.Request(self.url, headers=self._headers_now(), method="DELETE")
        self._session_id = None
        try:
            with urllib.request.urlopen(request, timeout=CLOSE_GRACE_SECONDS):  # noqa: S310
                pass
        except (urllib.error.URLError, OSError):
            pass


def _response_from_sse(stream: Any, request_id: int) -> Any:
    """Read ``data:`` events until the JSON-RPC response to ``request_id`` arrives."""
    data: list[str] = []
    for raw in stream:
        line = raw.decode("utf-8").rstrip("\r\n")
        if line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
            continue
        if line or not data:
            continue
        event = json.loads("\n".join(data))
        data = []
        if isinstance(event, dict) and "method" not in event and event.get("id") == request_id:
            return event
    return json.loads("\n".join(data)) if data else None


def stdio_environment(server: ToolServer, source: Mapping[str, str]) -> dict[str, str]:
    """The base variables plus the server's ``env_vars`` that are set in ``source``."""
    names = [*BASE_ENV_NAMES, *server.env_vars]
    return {name: source[name] for name in names if name in source}


def connect(server: ToolServer, env: Mapping[str, str] | None = None, *,
            stderr_path: Path | None = None, timeout: float | None = None) -> McpClient:
    """Start or reach ``server`` and complete the handshake; a failure leaves nothing running.

    ``env`` is where credential values come from (default: this process's environment).
    """
    source = os.environ if env is None else env
    client: McpClient
    if server.transport == "stdio":
        client = StdioMcpClient(server, stdio_environment(server, source), stderr_path)
    else:
        client = HttpMcpClient(server, source)
    try:
        client.initialize(timeout)
    except BaseException:
        client.close()
        raise
    return client


__all__ = [
    "McpClient",
    "McpError",
    "McpRpcError",
    "McpTimeout",
    "McpTool",
    "McpToolResult",
    "McpTransportError",
    "connect",
]

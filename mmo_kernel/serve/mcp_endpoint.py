"""``POST /mcp``: the stateless MCP endpoint of ``mmo serve`` (spec 12 "MCP endpoint").

Each request stands alone: one JSON-RPC request per body, one JSON reply (never SSE), no
``Mcp-Session-Id`` issued or read. The order of checks is the order of trust: the
``Origin`` guard (a browser page must not reach a loopback server through DNS
rebinding), the bearer (PATs only), then the message, its protocol version and routing
headers. Every ``tools/call`` ends in ``app.state.router.call`` - the one entry shared with
``/api/tools/call`` - and its envelope is wrapped as the MCP tool result, cut to the 1 MiB
response bound if needed.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import re
from importlib import resources
from typing import Any
from urllib.parse import urlsplit

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from mmo_kernel import package_version
from mmo_kernel.project_tools import catalog
from mmo_kernel.project_tools.envelope import compact_json, failure, mcp_result
from mmo_kernel.serve.response_bound import MAX_RESPONSE_BYTES, fit_envelope

log = logging.getLogger("mmo.serve.mcp")

SUPPORTED_VERSIONS: tuple[str, ...] = ("2025-06-18", "2025-11-25", "2026-07-28")
DEFAULT_VERSION = "2025-06-18"
INITIALIZE_FALLBACK = "2025-11-25"
STATELESS_VERSION = "2026-07-28"
META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
SERVER_NAME = "mmo"
INSTRUCTIONS = (
    "Project tools on the user's local projects. Start with list_projects, then "
    "work_on_project to open a session; pass its session_id to every later call. Tools not "
    "listed here are reached through call_project_tool. Follow a suggested_call whose "
    "follow_up_kind is mechanically_followable exactly as given."
)

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602
INTERNAL_ERROR, UNAUTHORIZED, RESOURCE_NOT_FOUND = -32603, -32001, -32002

UI_RESOURCES: dict[str, tuple[str, str, str]] = {
    catalog.GOAL_UI: ("goal-plan.html", "Goal plan", "The goal plan card of present_goal_plan."),
    catalog.WORK_RESULT_UI: ("work-result.html", "Work result",
                             "The work-result view of get_work_result_state."),
}
_NO_CACHE = {"ttlMs": 0, "cacheScope": "private"}
STATELESS_RESULT_FIELDS: dict[str, dict[str, Any]] = {
    method: _NO_CACHE for method in ("tools/list", "resources/list", "resources/read",
                                     "server/discover")}
"""2026-07-28 results carry ``resultType``; its cacheable ones ``ttlMs``/``cacheScope`` too.
Nothing is cacheable here: a listing depends on the request's capabilities."""
_B64_HEADER = re.compile(r"^=\?base64\?(?P<payload>.*)\?=$")
_LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1"})


class RpcError(Exception):
    """A JSON-RPC error reply, with the HTTP status it travels with."""

    def __init__(self, code: int, message: str, status: int = 200,
                 data: Any = None, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.code, self.message, self.status = code, message, status
        self.data, self.headers = data, headers or {}


def routes() -> list[Route]:
    """The ``/mcp`` route (POST; GET and DELETE answer 405: no SSE stream, no sessions)."""
    return [Route("/mcp", endpoint, methods=["GET", "POST", "DELETE"])]


async def endpoint(request: Request) -> Response:
    if request.method != "POST":
        return Response(status_code=405, headers={"Allow": "POST"})
    request_id: Any = None
    try:
        check_origin(request)
        principal = await authenticate(request)
        message = parse_message(await request.body())
        if "method" not in message or "id" not in message:
            return Response(status_code=202)  # a notification or a response: nothing to say
        request_id = message["id"]
        result = await handle(request, principal, message)
    except RpcError as exc:
        return rpc_reply(request_id, error=exc)
    return rpc_reply(request_id, result=result)


def rpc_reply(request_id: Any, *, result: Any = None, error: RpcError | None = None) -> Response:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id}
    if error is not None:
        body["error"] = {"code": error.code, "message": error.message}
        if error.data is not None:
            body["error"]["data"] = error.data
    else:
        body["result"] = result
    return Response(compact_json(body).encode("utf-8"), status_code=error.status if error else 200,
                    media_type="application/json", headers=error.headers if error else None)


# --- transport checks --------------------------------------------------------------------

def _origin_key(origin: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of an origin or URL, default ports filled in; None if malformed."""
    try:
        parts = urlsplit(origin.strip())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    return parts.scheme, parts.hostname.lower(), port or (443 if parts.scheme == "https" else 80)


def own_origins(request: Request) -> list[tuple[str, str, int]]:
    """The server's own origin: its configured URL, else the address the socket is bound to
    (never the ``Host`` header, which a rebinding page controls)."""
    state = request.app.state
    keys: list[tuple[str, str, int]] = []
    for url in (getattr(state, "public_url", None), getattr(state, "url", None)):
        key = _origin_key(url) if url else None
        if key is not None:
            keys.append(key)
    server = request.scope.get("server")
    if not keys and server:
        keys.append(("http", str(server[0]).lower(), int(server[1])))
    return keys


def origin_allowed(origin: str, own: list[tuple[str, str, int]], allowed: list[str]) -> bool:
    key = _origin_key(origin)
    if key is None:
        return False
    for scheme, host, port in own:
        if key == (scheme, host, port):
            return True
        if host in _LOOPBACK and key[1] in _LOOPBACK and key[0] == scheme and key[2] == port:
            return True  # http://localhost:P and http://127.0.0.1:P are the same loopback server
    return any(_origin_key(entry) == key for entry in allowed)


def check_origin(request: Request) -> None:
    origin = request.headers.get("origin")
    if origin is None:
        return
    allowed = list(getattr(request.app.state, "allow_origins", None) or [])
    if not origin_allowed(origin, own_origins(request), allowed):
        raise RpcError(INVALID_REQUEST, "forbidden origin", status=403)


async def authenticate(request: Request) -> Any:
    """The PAT's principal; the admin token and anything else → 401 (``-32001``)."""
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    principal = None
    if scheme.lower() == "bearer" and token.strip():
        store = request.app.state.store
        principal = await run_in_threadpool(store.authenticate_bearer, token.strip())
    if principal is None or getattr(principal, "is_admin", False):
        raise RpcError(UNAUTHORIZED, "unauthorized", status=401,
                       headers={"WWW-Authenticate": 'Bearer realm="mmo"'})
    return principal


def parse_message(body: bytes) -> dict[str, Any]:
    try:
        message = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: nested too deep
        raise RpcError(PARSE_ERROR, "parse error", status=400) from None
    if isinstance(message, list):
        raise RpcError(INVALID_REQUEST, "batch requests are not supported", status=400)
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        raise RpcError(INVALID_REQUEST, "invalid request", status=400)
    if "method" in message:
        if not isinstance(message["method"], str):
            raise RpcError(INVALID_REQUEST, "invalid request", status=400)
        request_id = message.get("id", 0)
        if request_id is None or isinstance(request_id, bool) or not isinstance(
                request_id, (str, int)):
            raise RpcError(INVALID_REQUEST, "invalid request", status=400)
        if "params" in message and not isinstance(message["params"], dict):
            raise RpcError(INVALID_REQUEST, "invalid request: params must be an object",
                           status=400)
    return message


def decode_header(value: str | None) -> str | None:
    """A header value, decoding the ``=?base64?...?=`` form MCP clients use for non-ASCII."""
    if value is None:
        return None
    match = _B64_HEADER.fullmatch(value)
    if match is None:
        return value
    try:
        return base64.b64decode(match.group("payload"), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None


def resolve_version(request: Request, params: dict[str, Any]) -> str:
    """The request's protocol version: ``_meta``, else the header, else ``2025-06-18``."""
    meta = params.get("_meta")
    meta_version = meta.get(META_VERSION) if isinstance(meta, dict) else None
    header_version = request.headers.get("mcp-protocol-version")
    if meta_version is not None and header_version is not None and meta_version != header_version:
        raise RpcError(INVALID_REQUEST, "protocol version mismatch", status=400)
    version = meta_version if meta_version is not None else header_version
    if version is None:
        return DEFAULT_VERSION
    if version not in SUPPORTED_VERSIONS:
        raise RpcError(INVALID_REQUEST, "unsupported protocol version", status=400,
                       data={"supported": list(SUPPORTED_VERSIONS), "requested": version})
    return str(version)


def check_routing_headers(request: Request, version: str, method: str,
                          params: dict[str, Any]) -> None:
    """``MCP-Method`` and (for ``tools/call``) ``MCP-Name``: required in ``2026-07-28``,
    checked when present in older revisions."""
    required = version == STATELESS_VERSION
    header_method = decode_header(request.headers.get("mcp-method"))
    if (header_method is not None or required) and header_method != method:
        raise RpcError(INVALID_REQUEST, "MCP-Method header mismatch", status=400)
    if method == "tools/call":
        header_name = decode_header(request.headers.get("mcp-name"))
        if (header_name is not None or required) and header_name != params.get("name"):
            raise RpcError(INVALID_REQUEST, "MCP-Name header mismatch", status=400)


def client_is_ui_capable(method: str, params: dict[str, Any]) -> bool:
    """UI capability of this request: its ``_meta`` client capabilities (stateless: nothing
    an earlier ``initialize`` said is remembered)."""
    meta = params.get("_meta")
    capabilities = meta.get(META_CAPABILITIES) if isinstance(meta, dict) else None
    if capabilities is None and method == "initialize":
        capabilities = params.get("capabilities")
    return catalog.ui_capable(capabilities)


# --- methods -----------------------------------------------------------------------------

async def handle(request: Request, principal: Any, message: dict[str, Any]) -> Any:
    method: str = message["method"]
    params: dict[str, Any] = message.get("params") or {}
    version = resolve_version(request, params)
    check_routing_headers(request, version, method, params)
    result = await dispatch(request, principal, message, method, params)
    if version == STATELESS_VERSION and method != "ping":
        result = {**result, **STATELESS_RESULT_FIELDS.get(method, {}), "resultType": "complete"}
    return result


async def dispatch(request: Request, principal: Any, message: dict[str, Any], method: str,
                   params: dict[str, Any]) -> dict[str, Any]:
    ui = client_is_ui_capable(method, params)
    if method == "initialize":
        return initialize_result(params)
    if method == "server/discover":
        return discover_result()
    if method == "ping":
        return {}
    if method == "tools/list":
        return {"tools": catalog.listed_tools(ui)}
    if method == "tools/call":
        id_size = len(compact_json(message["id"]).encode("utf-8"))
        return await call_tool(request, principal, params, ui, id_size)
    if method == "resources/list":
        return {"resources": [resource_entry(uri) for uri in UI_RESOURCES]}
    if method == "resources/read":
        return read_resource(params)
    raise RpcError(METHOD_NOT_FOUND, "method not found")


def server_capabilities() -> dict[str, Any]:
    return {"tools": {"listChanged": False},
            "resources": {"listChanged": False, "subscribe": False},
            "extensions": {catalog.UI_EXTENSION: {"mimeTypes": [catalog.UI_MIME_TYPE]}}}


def initialize_result(params: dict[str, Any]) -> dict[str, Any]:
    asked = params.get("protocolVersion")
    version = asked if asked in SUPPORTED_VERSIONS else INITIALIZE_FALLBACK
    return {"protocolVersion": version, "capabilities": server_capabilities(),
            "serverInfo": {"name": SERVER_NAME, "version": package_version()},
            "instructions": INSTRUCTIONS}


def discover_result() -> dict[str, Any]:
    """``server/discover`` (2026-07-28): what the official SDK probes before it picks a version."""
    return {"supportedVersions": list(SUPPORTED_VERSIONS), "capabilities": server_capabilities(),
            "serverInfo": {"name": SERVER_NAME, "version": package_version()},
            "instructions": INSTRUCTIONS}


async def call_tool(request: Request, principal: Any, params: dict[str, Any],
                    ui: bool, id_size: int) -> dict[str, Any]:
    name = params.get("name")
    if not isinstance(name, str) or catalog.direct_tool(name, ui) is None:
        raise RpcError(INVALID_PARAMS, "unknown tool")
    arguments = params.get("arguments", {})
    if arguments is None:
        arguments = {}
    tool, tool_arguments = name, arguments
    if not isinstance(arguments, dict):
        envelope = failure("invalid_arguments",
                           f"invalid arguments for {name}: arguments must be an object")
    elif name == catalog.DISPATCHER and isinstance(arguments.get("tool"), str) and \
            catalog.client_tool(arguments["tool"], ui) is None:
        envelope = failure("unknown_tool", f"unknown tool: {arguments['tool'][:100]}")
    else:
        if name == catalog.DISPATCHER and isinstance(arguments.get("tool"), str):
            tool = arguments["tool"]
            inner = arguments.get("arguments")
            tool_arguments = inner if isinstance(inner, dict) else {}
        envelope = await route(request, principal, name, arguments, ui)
    return mcp_result(bounded(envelope, tool, tool_arguments, id_size))


async def route(request: Request, principal: Any, name: str, arguments: dict[str, Any],
                ui: bool) -> dict[str, Any]:
    router = getattr(request.app.state, "router", None)
    if router is None:
        raise RpcError(INTERNAL_ERROR, "tool router unavailable")
    try:
        return await router.call(principal, name, arguments, ui_capable=ui)
    except Exception:
        log.exception("tools/call %s failed", name)
        raise RpcError(INTERNAL_ERROR, "internal error") from None


def bounded(envelope: dict[str, Any], tool: str, arguments: dict[str, Any],
            id_size: int) -> dict[str, Any]:
    """The envelope cut so the whole JSON-RPC response stays within 1 MiB."""
    overhead = len(b'{"jsonrpc":"2.0","id":,"result":,"resultType":"complete"}') + id_size

    def measure(candidate: dict[str, Any]) -> int:
        return len(compact_json(mcp_result(candidate)).encode("utf-8")) + overhead

    return fit_envelope(envelope, tool, arguments, measure, MAX_RESPONSE_BYTES)


def resource_entry(uri: str) -> dict[str, Any]:
    _, name, description = UI_RESOURCES[uri]
    return {"uri": uri, "name": name, "description": description,
            "mimeType": catalog.UI_MIME_TYPE}


def ui_html(uri: str) -> str:
    filename = UI_RESOURCES[uri][0]
    return (resources.files("mmo_kernel.serve") / "ui" / filename).read_text(encoding="utf-8")


def read_resource(params: dict[str, Any]) -> dict[str, Any]:
    uri = params.get("uri")
    if not isinstance(uri, str) or uri not in UI_RESOURCES:
        raise RpcError(RESOURCE_NOT_FOUND, "unknown resource")
    return {"contents": [{"uri": uri, "mimeType": catalog.UI_MIME_TYPE, "text": ui_html(uri)}]}

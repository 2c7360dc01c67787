"""Raw MCP-over-HTTP requests to ``POST /mcp`` (spec 12), in the stateless ``2026-07-28``
form or an older revision, plus a recording stand-in for the server's tool router.

    reply = mcp_call(base_url, pat, "tools/call", {"name": "list_projects", "arguments": {}})
    assert reply.json()["result"]["structuredContent"]["success"]
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from typing import Any

import httpx2 as httpx

from mmo_kernel.project_tools.envelope import success

STATELESS = "2026-07-28"
UI_CAPABILITIES = {"extensions": {"io.modelcontextprotocol/ui": {
    "mimeTypes": ["text/html;profile=mcp-app"]}}}
_ids = itertools.count(1)
_client: httpx.Client | None = None


def client() -> httpx.Client:
    """One shared HTTP client: building one costs far more than a request (TLS context)."""
    global _client
    if _client is None:
        _client = httpx.Client(timeout=60.0)
    return _client


def stateless_request(method: str, params: dict[str, Any] | None = None, *,
                      capabilities: dict[str, Any] | None = None,
                      version: str = STATELESS) -> tuple[dict[str, Any], dict[str, str]]:
    """(body, headers) of one request in the 2026-07-28 form: per-request ``_meta`` and the
    ``MCP-Protocol-Version`` / ``MCP-Method`` / ``MCP-Name`` headers."""
    params = dict(params or {})
    params["_meta"] = {**params.get("_meta", {}),
                       "io.modelcontextprotocol/protocolVersion": version,
                       "io.modelcontextprotocol/clientCapabilities": capabilities or {},
                       "io.modelcontextprotocol/clientInfo": {"name": "mmo-tests",
                                                              "version": "1"}}
    headers = {"MCP-Protocol-Version": version, "MCP-Method": method}
    if method == "tools/call":
        headers["MCP-Name"] = str(params.get("name"))
    return {"jsonrpc": "2.0", "id": next(_ids), "method": method, "params": params}, headers


def post(base_url: str, token: str | None, body: Any, headers: dict[str, str] | None = None,
         *, content: bytes | None = None, timeout: float = 60.0) -> httpx.Response:
    """POST ``body`` (JSON) or raw ``content`` to ``/mcp`` with an optional bearer."""
    sent = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    sent.update(headers or {})
    if content is None:
        content = json.dumps(body).encode("utf-8")
    return client().post(base_url + "/mcp", content=content, headers=sent, timeout=timeout)


def mcp_call(base_url: str, token: str | None, method: str,
             params: dict[str, Any] | None = None, *,
             capabilities: dict[str, Any] | None = None) -> httpx.Response:
    """One stateless (2026-07-28) request."""
    body, headers = stateless_request(method, params, capabilities=capabilities)
    return post(base_url, token, body, headers)


class RecordingRouter:
    """Stands in for ``serve/router.py`` where a test needs to see or choose what
    ``tools/call`` hands the router: records each call and answers with ``reply``."""

    def __init__(self, reply: Callable[[Any, str, dict[str, Any]], dict[str, Any]] | None = None
                 ) -> None:
        self.calls: list[tuple[str | None, str, dict[str, Any]]] = []
        self.ui_capable: list[bool] = []
        self.reply = reply or (lambda principal, tool, arguments: success(
            {"called": tool, "arguments": arguments}))

    async def call(self, principal: Any, tool: str, arguments: dict[str, Any], *,
                   ui_capable: bool = True) -> dict[str, Any]:
        self.calls.append((principal.username, tool, arguments))
        self.ui_capable.append(ui_capable)
        return self.reply(principal, tool, arguments)

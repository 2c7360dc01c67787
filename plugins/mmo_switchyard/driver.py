"""The ``switchyard`` driver: tool MCP servers exposed as app-server dynamic tools (spec 09).

For hosts or models without native MCP, MMO connects to the tool servers
itself. The agent's thread is started with :meth:`SwitchyardBridge.dynamic_tools`
(``thread/start.dynamicTools``, which needs ``experimentalApi``); each
``item/tool/call`` the app-server sends is forwarded by
:meth:`SwitchyardBridge.handle_tool_call` to the right server. Servers start
on first use, are reused for every later call and are shut down by
:meth:`SwitchyardBridge.close`.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mmo_kernel import tools  # the MCP client (and its HTTP stack) loads once a bridge runs
from mmo_kernel.plugin import ToolBridge, ToolOptIn

if TYPE_CHECKING:
    from mmo_kernel.tools import McpClient, ToolServer

from .convert import dynamic_output, failure
from .names import alias_table, bridged_pairs

log = logging.getLogger("mmo.switchyard")

TOOL_CALL_METHOD = "item/tool/call"


class SwitchyardBridge(ToolBridge):
    """Bridges opted-in tool MCP servers into one agent's thread as dynamic tools.

    It writes nothing into Codex's config: the host starts the thread with
    :meth:`dynamic_tools`. ``stderr_dir`` keeps each stdio server's stderr as
    ``<server>.stderr.log``; the other constructor arguments are the base's.
    """

    name = "switchyard"

    def __init__(self, *, preserve_tool_media: bool = False,
                 env: Mapping[str, str] | None = None,
                 stderr_dir: Path | None = None) -> None:
        super().__init__(env=env, stderr_dir=stderr_dir,
                         preserve_tool_media=preserve_tool_media)
        self._servers: dict[str, ToolServer] = {}
        self._routes: dict[str, tuple[str, str]] = {}
        self._clients: dict[str, McpClient] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()
        self._closed = False
        self.unavailable: dict[str, str] = {}
        """Optional (``required = false``) servers left out, with the reason."""

    # ------------------------------------------------------------ names --

    @staticmethod
    def alias_table(servers: Mapping[str, ToolServer],
                    opt_ins: Mapping[str, ToolOptIn]) -> dict[str, str]:
        """Dynamic tool name -> ``server.tool`` (no server is started)."""
        return alias_table(servers, opt_ins)

    # ------------------------------------------------------------ tools --

    def dynamic_tools(self, servers: Mapping[str, ToolServer],
                      opt_ins: Mapping[str, ToolOptIn]) -> list[dict[str, Any]]:
        """``thread/start.dynamicTools`` specs for the tools the agent opted into.

        Each spec carries the server's own ``inputSchema``. A required server
        that cannot start, or that does not list an opted tool, raises
        ``McpError``; an optional one is left out and noted in ``unavailable``.
        """
        specs: list[dict[str, Any]] = []
        by_server: dict[str, list[tuple[str, str]]] = {}
        for name, server_name, tool in bridged_pairs(servers, opt_ins):
            by_server.setdefault(server_name, []).append((name, tool))
        for server_name, wanted in by_server.items():
            required = bool(getattr(opt_ins[server_name], "required", True))
            try:
                specs.extend(self._server_specs(servers[server_name], wanted))
            except tools.McpError as exc:
                if required:
                    raise
                log.warning("switchyard leaves out optional %s", exc)
                self.unavailable[server_name] = str(exc)
        return specs

    def _server_specs(self, server: ToolServer, wanted: list[tuple[str, str]]
                      ) -> list[dict[str, Any]]:
        with self._lock:
            self._servers[server.name] = server
        listed = {t.name: t for t in self._client(server.name).list_tools()}
        missing = [tool for _, tool in wanted if tool not in listed]
        if missing:
            raise tools.McpError(server.name, f"does not list tools {missing} "
                                        f"(it lists {sorted(listed)})")
        specs = []
        for name, tool in wanted:
            found = listed[tool]
            description = found.description or f"Tool {tool} of MCP server {server.name}."
            specs.append({"type": "function", "name": name,
                          "description": f"[MCP {server.name}] {description}",
                          "inputSchema": found.inputSchema})
            with self._lock:
                self._routes[name] = (server.name, tool)
        return specs

    # ------------------------------------------------------------ calls --

    def handle_tool_call(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """Answer one ``item/tool/call``: ``{"contentItems": [...], "success": bool}``.

        Never raises: every failure (unknown tool, bad arguments, tool error,
        JSON-RPC error, dead or silent server) is ``success: false`` with a
        text the model can read. A dead server is restarted on the next call.
        """
        tool_name = params.get("tool")
        with self._lock:
            route = self._routes.get(tool_name) if isinstance(tool_name, str) else None
        if route is None:
            known = ", ".join(sorted(self._routes)) or "none"
            return failure(f"unknown dynamic tool {tool_name!r} (bridged tools: {known})")
        server_name, tool = route
        arguments = params.get("arguments")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            return failure(f"arguments for {tool_name} must be a JSON object, "
                           f"got {type(arguments).__name__}")
        try:
            result = self._client(server_name).call_tool(tool, arguments)
        except tools.McpTransportError as exc:
            self._drop(server_name)
            return failure(f"{exc}; the server will be restarted on the next call")
        except tools.McpError as exc:
            return failure(str(exc))
        return dynamic_output(result, self.preserve_tool_media)

    def handle_request(self, request: Any) -> dict[str, Any]:
        """An ``AppServerClient`` request handler for ``item/tool/call`` requests only."""
        if request.method != TOOL_CALL_METHOD:
            raise ValueError(f"the switchyard bridge answers {TOOL_CALL_METHOD} only, "
                             f"not {request.method}")
        return self.handle_tool_call(request.params)

    # ---------------------------------------------------------- servers --

    def _client(self, server_name: str) -> McpClient:
        """The live client for ``server_name``, started on first use (one start at a time)."""
        with self._lock:
            if self._closed:
                raise tools.McpError(server_name, "the switchyard bridge is closed")
            lock = self._locks.setdefault(server_name, threading.Lock())
        with lock:
            with self._lock:
                client = self._clients.get(server_name)
                server = self._servers[server_name]
            if client is not None:
                return client
            stderr = (self.stderr_dir / f"{server_name}.stderr.log"
                      if self.stderr_dir is not None else None)
            client = tools.connect(server, self.env if self.env is not None else os.environ,
                             stderr_path=stderr)
            with self._lock:
                if self._closed:
                    client.close()
                    raise tools.McpError(server_name, "the switchyard bridge is closed")
                self._clients[server_name] = client
            return client

    def _drop(self, server_name: str) -> None:
        with self._lock:
            client = self._clients.pop(server_name, None)
        if client is not None:
            client.close()

    def close(self) -> None:
        """Shut every started server down (stdio process groups included); idempotent."""
        with self._lock:
            self._closed = True
            clients, self._clients = list(self._clients.values()), {}
        errors = []
        for client in clients:
            try:
                client.close()
            except Exception as exc:  # close the others before reporting
                errors.append(f"{client.name}: {exc}")
        if errors:
            raise RuntimeError("switchyard could not stop tool MCP servers: " + "; ".join(errors))

    def __enter__(self) -> SwitchyardBridge:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

"""The ``native_mcp`` bridge: tool MCP servers written into Codex's ``[mcp_servers]``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mmo_kernel.plugin import ToolBridge, ToolOptIn

if TYPE_CHECKING:
    from mmo_kernel.tools import ToolServer


class NativeMcpBridge(ToolBridge):
    """Codex speaks MCP itself: every declared server appears in every agent's config,
    enabled only for the agents that opted in, so Codex's view of the servers is stable."""

    name = "native_mcp"

    def render_servers(self, servers: Mapping[str, ToolServer],
                       opt_ins: Mapping[str, ToolOptIn]) -> dict[str, dict[str, Any]]:
        """``mcp_servers`` entries (names of env vars only, never values).

        Every declared server is listed, enabled only when the agent opted into
        it through this bridge; the environment the agent needs for them is the
        base class's ``env_names``.
        """
        return {name: self._entry(server, opt_ins.get(name)) for name, server in servers.items()}

    @staticmethod
    def _entry(server: ToolServer, opt_in: ToolOptIn | None) -> dict[str, Any]:
        entry: dict[str, Any] = {}
        if server.transport == "stdio":
            entry["command"] = server.command
            if server.args:
                entry["args"] = list(server.args)
            if server.cwd:
                entry["cwd"] = server.cwd
            if server.env_vars:
                entry["env_vars"] = list(server.env_vars)
        else:
            entry["url"] = server.url
            if server.bearer_token_env_var:
                entry["bearer_token_env_var"] = server.bearer_token_env_var
        chosen = list(opt_in.enabled_tools) if opt_in and opt_in.enabled_tools else None
        entry["enabled"] = opt_in is not None
        entry["required"] = bool(opt_in.required) if opt_in is not None else False
        entry["enabled_tools"] = list(server.enabled_tools)
        entry["disabled_tools"] = (
            [t for t in server.enabled_tools if t not in chosen] if chosen is not None else [])
        entry["default_tools_approval_mode"] = server.default_tools_approval_mode
        if server.startup_timeout_sec:
            entry["startup_timeout_sec"] = server.startup_timeout_sec
        if server.tool_timeout_sec:
            entry["tool_timeout_sec"] = server.tool_timeout_sec
        return entry

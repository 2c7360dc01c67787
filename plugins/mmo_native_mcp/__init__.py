"""MMO built-in plugin ``native_mcp``.

Tool MCP servers written into the agent's Codex ``[mcp_servers]``.
"""

from __future__ import annotations

from mmo_kernel import hookimpl

from .driver import NativeMcpBridge


@hookimpl
def mmo_register_tool_bridges(register):
    register(NativeMcpBridge)

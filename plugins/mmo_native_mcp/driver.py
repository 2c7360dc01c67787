"""The ``native_mcp`` driver."""

from __future__ import annotations

from mmo_kernel.drivers import ToolBridge


class NativeMcpBridge(ToolBridge):
    """Tool MCP servers written into the agent's Codex ``[mcp_servers]``."""

    name = "native_mcp"

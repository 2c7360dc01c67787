"""The ``switchyard`` driver."""

from __future__ import annotations

from mmo_kernel.drivers import ToolBridge


class SwitchyardBridge(ToolBridge):
    """Tool MCP servers exposed as app-server dynamic tools."""

    name = "switchyard"

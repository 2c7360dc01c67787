"""MMO built-in plugin ``switchyard``: Tool MCP servers exposed as app-server dynamic tools."""

from __future__ import annotations

from mmo_kernel import hookimpl

from .driver import SwitchyardBridge


@hookimpl
def mmo_register_tool_bridges(register):
    register(SwitchyardBridge)

"""Dynamic tool names for bridged MCP tools, and the table that maps them back (spec 09)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

DYNAMIC_PREFIX = "mmo_mcp"
_VALID_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
"""What a Responses ``function`` tool name may be; Codex passes the name through as is."""


def dynamic_tool_name(server: str, tool: str) -> str:
    """``mmo_mcp__<server>__<tool>`` with dots as underscores (``repo.search``/``query`` ->
    ``mmo_mcp__repo_search__query``); names a model could not call are refused."""
    name = f"{DYNAMIC_PREFIX}__{server.replace('.', '_')}__{tool.replace('.', '_')}"
    if not _VALID_NAME.match(name):
        raise ValueError(
            f"tool {tool!r} of tool MCP server {server!r} cannot be a dynamic tool: {name!r} "
            "must be at most 64 characters of letters, digits, '_' and '-'")
    return name


def opted_tools(server: Any, opt_in: Any) -> list[str]:
    """The tools an agent opted into: its subset, or all of the server's enabled tools."""
    chosen = getattr(opt_in, "enabled_tools", None)
    if not chosen:
        return list(server.enabled_tools)
    extra = [t for t in chosen if t not in server.enabled_tools]
    if extra:
        raise ValueError(f"tools {extra} are not enabled tools of tool MCP server "
                         f"{server.name!r} ({server.enabled_tools})")
    return list(chosen)


def bridged_pairs(servers: Mapping[str, Any], opt_ins: Mapping[str, Any]
                  ) -> list[tuple[str, str, str]]:
    """``(dynamic name, server, tool)`` for every opted-in tool, in opt-in order.

    Two tools whose names collide once dots become underscores are an error,
    because a call could not be routed back to exactly one of them.
    """
    pairs: list[tuple[str, str, str]] = []
    seen: dict[str, str] = {}
    for server_name, opt_in in opt_ins.items():
        server = servers.get(server_name)
        if server is None:
            raise ValueError(f"tool MCP server {server_name!r} is not declared in tool-mcp.d "
                             f"(declared: {', '.join(sorted(servers)) or 'none'})")
        for tool in opted_tools(server, opt_in):
            name = dynamic_tool_name(server_name, tool)
            dotted = f"{server_name}.{tool}"
            if name in seen:
                raise ValueError(f"{seen[name]} and {dotted} would both be dynamic tool {name}")
            seen[name] = dotted
            pairs.append((name, server_name, tool))
    return pairs


def alias_table(servers: Mapping[str, Any], opt_ins: Mapping[str, Any]) -> dict[str, str]:
    """Dynamic tool name -> ``server.tool``, for smoke evidence and audit."""
    return {name: f"{server}.{tool}" for name, server, tool in bridged_pairs(servers, opt_ins)}

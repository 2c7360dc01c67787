"""The tool-bridge kit: everything a tool-MCP bridge driver imports (spec 09).

A bridge (``ToolBridge`` from :mod:`mmo_kernel.plugin`) gives agents the tools
of the third-party MCP servers declared in ``tool-mcp.d/*.toml``. This
package is its public surface:

- the declarations: :class:`ToolServer` (one ``[tool_mcp_servers.<name>]``)
  and :func:`load_tool_servers`;
- the MCP client: :func:`connect` (stdio or streamable HTTP, handshake done)
  returning an :class:`McpClient` whose ``list_tools``/``call_tool`` give
  :class:`McpTool` and :class:`McpToolResult`; failures are :class:`McpError`
  (:class:`McpRpcError`, :class:`McpTransportError`, :class:`McpTimeout`).

Names load on first use: the kernel reads declarations through
``tools.servers`` on paths that never talk MCP, and this ``__init__`` runs
for each such import.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mmo_kernel import lazy_exports

if TYPE_CHECKING:
    from mmo_kernel.tools.mcp_client import (
        McpClient,
        McpError,
        McpRpcError,
        McpTimeout,
        McpTool,
        McpToolResult,
        McpTransportError,
        connect,
    )
    from mmo_kernel.tools.servers import ToolServer, load_tool_servers

__all__ = [
    "McpClient",
    "McpError",
    "McpRpcError",
    "McpTimeout",
    "McpTool",
    "McpToolResult",
    "McpTransportError",
    "ToolServer",
    "connect",
    "load_tool_servers",
]

__getattr__ = lazy_exports(__name__, {
    "mmo_kernel.tools.mcp_client": (
        "McpClient", "McpError", "McpRpcError", "McpTimeout", "McpTool", "McpToolResult",
        "McpTransportError", "connect",
    ),
    "mmo_kernel.tools.servers": ("ToolServer", "load_tool_servers"),
})

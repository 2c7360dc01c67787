"""The MCP front door: the ``mmo_mesh`` stdio server, its handlers, JSON-RPC framing and tool
results.

Kept import-free so ``mmo mcp`` starts fast; import submodules directly.
"""

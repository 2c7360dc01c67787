"""``python -m mmo_kernel.mcp``: the mesh MCP server on stdio."""

from mmo_kernel.mcp.server import main

raise SystemExit(main())

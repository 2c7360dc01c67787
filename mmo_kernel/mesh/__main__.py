"""``python -m mmo_kernel.mesh``: the mesh MCP server on stdio."""

from mmo_kernel.mesh.server import main

raise SystemExit(main())

"""The ``mmo_mesh`` MCP server through which agents delegate and control (spec 07).

Kept import-free so ``mmo mcp`` starts fast; import submodules directly:
``mmo_kernel.mesh.server.main``, ``mmo_kernel.mesh.config.mesh_server_config``,
``mmo_kernel.mesh.surface.tools_for`` / ``AGENT_MCP_CONTROL_TOOLS``,
``mmo_kernel.mesh.tokens.mint_token`` / ``token_hash``,
``mmo_kernel.mesh.capabilities.write_capabilities`` / ``read_capabilities``.
"""

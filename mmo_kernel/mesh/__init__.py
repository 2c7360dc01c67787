"""The ``mmo_mesh`` contract: tools, surface, arguments, identity, tokens, capabilities, config,
team (spec 07).

The server that speaks it is ``mmo_kernel.mcp``. Kept import-free so ``mmo mcp``
starts fast; import submodules directly (``mmo_kernel.mesh.surface.tools_for``,
``mmo_kernel.mesh.tokens.mint_token``, ``mmo_kernel.mesh.capabilities.read_capabilities``).
"""

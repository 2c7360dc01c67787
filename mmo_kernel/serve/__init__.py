"""`mmo serve` (spec 12): accounts, tokens, the admin API, the MCP endpoint and the runner hub."""

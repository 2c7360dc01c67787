"""The ``native_schema_projection`` contract transport."""

from __future__ import annotations

from typing import Any

from mmo_kernel.plugin.drivers import ContractTransport


class NativeSchemaProjection(ContractTransport):
    """Strict contracts sent as the ``outputSchema`` of the turn that must produce the result.

    ``outputSchema`` applies to one turn only (codex-app-server.md §3), so goal
    work turns run unconstrained and a final turn serializes the result.
    """

    name = "native_schema_projection"

    def turn_overrides(self, schema: dict[str, Any], *, final: bool) -> dict[str, Any]:
        return {"outputSchema": schema} if final else {}

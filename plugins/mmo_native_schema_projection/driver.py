"""The ``native_schema_projection`` contract transport."""

from __future__ import annotations

from typing import Any

from mmo_kernel import contracts  # its names load on first use: jsonschema only once a fit is asked
from mmo_kernel.plugin import ContractTransport, TransportFit


class NativeSchemaProjection(ContractTransport):
    """Strict contracts sent as the ``outputSchema`` of the turn that must produce the result.

    ``outputSchema`` applies to one turn only (codex-app-server.md §3), so goal
    work turns run unconstrained and a final turn serializes the result. It
    constrains generation, so it is preferred whenever the schema fits the
    strict structured-output subset.
    """

    name = "native_schema_projection"
    enforcements = frozenset({"strict"})
    priority = 10

    def fit(self, enforcement: str, schema: dict[str, Any]) -> TransportFit:
        found = contracts.projection_problem(schema)
        if found:
            return TransportFit(
                False, f"{enforcement} schema cannot be projected as an outputSchema: {found}")
        return TransportFit(True, f"{enforcement} contract with a projectable schema")

    def turn_overrides(self, schema: dict[str, Any], *, final: bool) -> dict[str, Any]:
        return {"outputSchema": schema} if final else {}

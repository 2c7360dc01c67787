"""The ``native_schema_projection`` driver."""

from __future__ import annotations

from mmo_kernel.drivers import ContractTransport


class NativeSchemaProjection(ContractTransport):
    """Strict contracts sent as the turn's ``outputSchema``."""

    name = "native_schema_projection"

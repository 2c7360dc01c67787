"""MMO built-in plugin ``native_schema_projection``.

Strict contracts sent as the turn's ``outputSchema``.
"""

from __future__ import annotations

from mmo_kernel import hookimpl

from .driver import NativeSchemaProjection


@hookimpl
def mmo_register_contract_transports(register):
    register(NativeSchemaProjection)

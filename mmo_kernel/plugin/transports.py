"""Choosing an agent's contract transport from what the installed transports declare.

The choice is made when a profile is compiled and recorded in the snapshot
(``contract_transport`` and ``contract_transport_reason``), so a running
session never re-chooses. No transport is preferred by name: each declares
the enforcements it serves, its priority and whether it fits a schema.
"""

from __future__ import annotations

from typing import Any, cast

from mmo_kernel.plugin.drivers import ContractTransport
from mmo_kernel.plugin.manager import plugin_system


def _serving(enforcement: str) -> list[ContractTransport]:
    registry = plugin_system().registry
    classes = [cast(type[ContractTransport], registry.driver_class("contract_transports", name))
               for name in registry.names("contract_transports")]
    ordered = sorted((c for c in classes if enforcement in c.enforcements),
                     key=lambda c: (-c.priority, c.name))
    return [cls() for cls in ordered]


def choose_transport(enforcement: str, schema: dict[str, Any]) -> tuple[str, str]:
    """``(transport name, reason)`` for one agent's contract (spec 05).

    The first serving transport that fits wins. Its reason is its own when it
    was the first choice, else the refusals of the preferred transports (they
    say why generation is not constrained the preferred way).
    """
    serving = _serving(enforcement)
    refusals: list[str] = []
    for transport in serving:
        fit = transport.fit(enforcement, schema)
        if fit.carries:
            return transport.name, "; ".join(refusals) if refusals else fit.reason
        refusals.append(fit.reason)
    if not serving:
        raise ValueError(f"no installed contract transport serves {enforcement!r} contracts; "
                         "run `mmo plugins` to see the installed ones")
    raise ValueError(f"no installed contract transport can carry this {enforcement} "
                     f"contract: {'; '.join(refusals)}")

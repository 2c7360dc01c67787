"""MMO built-in plugin ``codex_custom``: Any external provider, reached by Codex through
the local gateway."""

from __future__ import annotations

from mmo_kernel import hookimpl

from .driver import CodexCustomRoute


@hookimpl
def mmo_register_route_drivers(register):
    register(CodexCustomRoute)

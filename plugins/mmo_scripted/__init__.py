"""MMO built-in plugin ``scripted``: The offline deterministic model ``local_scripted`` served by the gateway."""

from __future__ import annotations

from mmo_kernel import hookimpl

from .driver import ScriptedRoute


@hookimpl
def mmo_register_route_drivers(register):
    register(ScriptedRoute)

"""MMO built-in plugin ``scripted``: the offline deterministic model ``local_scripted``.

The gateway serves it on route ``local_scripted``; see docs/scripted-model.md.
"""

from __future__ import annotations

from mmo_kernel import hookimpl

from .driver import ScriptedRoute


@hookimpl
def mmo_register_route_drivers(register):
    register(ScriptedRoute)

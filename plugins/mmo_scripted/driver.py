"""The ``scripted`` driver."""

from __future__ import annotations

from mmo_kernel.drivers import RouteDriver


class ScriptedRoute(RouteDriver):
    """The offline deterministic model ``local_scripted`` served by the gateway."""

    name = "scripted"

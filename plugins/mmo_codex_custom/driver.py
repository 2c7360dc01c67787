"""The ``codex_custom`` driver."""

from __future__ import annotations

from mmo_kernel.drivers import RouteDriver


class CodexCustomRoute(RouteDriver):
    """Any external provider, reached by Codex through the local gateway."""

    name = "codex_custom"

"""The ``app_server`` driver."""

from __future__ import annotations

from mmo_kernel.drivers import ExecutionHost


class AppServerHost(ExecutionHost):
    """Runs an agent in a Codex app-server owned by a detached runner process."""

    name = "app_server"

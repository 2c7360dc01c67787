"""MMO built-in plugin ``app_server``.

Runs an agent in a Codex app-server owned by a detached runner process.
"""

from __future__ import annotations

from mmo_kernel import hookimpl

from .driver import AppServerHost


@hookimpl
def mmo_register_execution_hosts(register):
    register(AppServerHost)

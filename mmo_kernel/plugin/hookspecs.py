"""Every extension point of MMO, at a glance.

MMO has five concerns; each has one registration hook. A plugin is any
module or object registered under the ``mmo.plugins`` entry-point group that
implements some of these hooks with ``@mmo_kernel.hookimpl``. The kernel calls
each hook through pluggy once per implementing plugin, when the plugin manager
is first built, and freezes the resulting name -> driver-class tables
(``mmo_kernel.plugin.manager``). Profiles and the catalog then select drivers
by name. Hook wrappers see every call; ``MMO_TRACE_PLUGINS=1`` logs them.

Every hook receives ``register``, a callable taking a driver class (a
subclass of the concern's base class in ``mmo_kernel.plugin.drivers``); it returns
nothing, and names the plugin it registers for (``register.plugin``).
Registering a name twice stops start-up with an error that names both plugins.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import pluggy

from mmo_kernel import PROJECT_NAME

if TYPE_CHECKING:
    from mmo_kernel.plugin.drivers import (
        ContractTransport,
        ExecutionHost,
        RouteDriver,
        ToolBridge,
        WorkspaceIsolator,
    )

hookspec = pluggy.HookspecMarker(PROJECT_NAME)


# ---------------------------------------------------------------- routes ---


@hookspec
def mmo_register_route_drivers(register: Callable[[type[RouteDriver]], None]) -> None:
    """Register route drivers: ways to reach a family of model providers.

    Called once when the plugin manager is built. A route driver validates
    the catalog routes and models that name it (``[routes.<id>] driver``),
    reports a route's availability for a session, renders the provider block
    of an agent's Codex config, and serves the route's gateway traffic.

    :param register: call with each ``RouteDriver`` subclass.
    """


# ----------------------------------------------------------------- hosts ---


@hookspec
def mmo_register_execution_hosts(register: Callable[[type[ExecutionHost]], None]) -> None:
    """Register execution hosts: owners of the process that runs an agent.

    Called once when the plugin manager is built. A host starts, supervises
    and recovers the agent's turn loop (e.g. a Codex app-server) for roots
    and jobs; profiles select it with ``[agents.<id>] host``.

    :param register: call with each ``ExecutionHost`` subclass.
    """


# ------------------------------------------------------------- contracts ---


@hookspec
def mmo_register_contract_transports(
    register: Callable[[type[ContractTransport]], None],
) -> None:
    """Register contract transports: ways to make a result satisfy a schema.

    Called once when the plugin manager is built. The kernel picks a
    transport per agent from what each declares (the ``contract_enforcement``
    values it serves, its priority, whether it fits the schema; spec 05); the
    transport decides which turns carry an ``outputSchema`` and whether a
    repair turn is due.

    :param register: call with each ``ContractTransport`` subclass.
    """


# ------------------------------------------------------------- workspace ---


@hookspec
def mmo_register_workspace_isolators(
    register: Callable[[type[WorkspaceIsolator]], None],
) -> None:
    """Register workspace isolators: private workspaces for writers.

    Called once when the plugin manager is built. An isolator creates a
    writer's workspace, captures its patch, enforces its write scope and
    integrates or reverses the patch; profiles select it with
    ``[coordination] isolation``.

    :param register: call with each ``WorkspaceIsolator`` subclass.
    """


# ----------------------------------------------------------------- tools ---


@hookspec
def mmo_register_tool_bridges(register: Callable[[type[ToolBridge]], None]) -> None:
    """Register tool-MCP bridges: ways to give agents third-party MCP tools.

    Called once when the plugin manager is built. A bridge serves the tool
    MCP server opt-ins that name it (``[agents.<id>.tool_mcp_servers]``,
    ``bridge = "<name>"``) as Codex config, run-time dynamic tools, or both.

    :param register: call with each ``ToolBridge`` subclass.
    """


REGISTRATION_HOOKS: dict[str, str] = {
    "route_drivers": "mmo_register_route_drivers",
    "execution_hosts": "mmo_register_execution_hosts",
    "contract_transports": "mmo_register_contract_transports",
    "workspace_isolation": "mmo_register_workspace_isolators",
    "tool_bridges": "mmo_register_tool_bridges",
}
"""Concern -> the hook that fills its driver table."""

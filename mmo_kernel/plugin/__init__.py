"""The extension points, as plugin authors import them (``from mmo_kernel.plugin import ...``).

- the five driver base classes (``RouteDriver``, ``ExecutionHost``,
  ``ContractTransport``, ``WorkspaceIsolator``, ``ToolBridge``), their common
  ``Driver`` base, ``NoOptions``, ``TransportFit`` (a transport's answer) and
  ``ToolOptIn`` (what a bridge reads of an agent's tool-server opt-in) with
  ``opt_ins_by_bridge`` (an agent's opt-ins grouped by the bridge each names);
- ``hookimpl``, the marker of a plugin's registration hooks;
- the accessors: ``get_driver``, ``driver_names``, ``plugin_system`` and the
  typed ``route_driver``, ``tool_bridge``, ``workspace_isolator``,
  ``contract_transport``, ``execution_host``; ``choose_transport`` (which
  transport carries a contract).

Names load on first use: importing this package costs nothing, the base
classes load pydantic, and only the accessors load the plugin manager
(stevedore, entry-point discovery).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mmo_kernel import lazy_exports

if TYPE_CHECKING:
    from mmo_kernel import hookimpl
    from mmo_kernel.plugin.drivers import (
        ContractTransport,
        Driver,
        ExecutionHost,
        NoOptions,
        RouteDriver,
        ToolBridge,
        ToolOptIn,
        TransportFit,
        WorkspaceIsolator,
        opt_ins_by_bridge,
    )
    from mmo_kernel.plugin.manager import (
        contract_transport,
        driver_names,
        execution_host,
        get_driver,
        plugin_system,
        route_driver,
        tool_bridge,
        workspace_isolator,
    )
    from mmo_kernel.plugin.transports import choose_transport

__all__ = [
    "ContractTransport",
    "Driver",
    "ExecutionHost",
    "NoOptions",
    "RouteDriver",
    "ToolBridge",
    "ToolOptIn",
    "TransportFit",
    "WorkspaceIsolator",
    "choose_transport",
    "contract_transport",
    "driver_names",
    "execution_host",
    "get_driver",
    "hookimpl",
    "opt_ins_by_bridge",
    "plugin_system",
    "route_driver",
    "tool_bridge",
    "workspace_isolator",
]

__getattr__ = lazy_exports(__name__, {
    "mmo_kernel": ("hookimpl",),
    "mmo_kernel.plugin.drivers": (
        "ContractTransport", "Driver", "ExecutionHost", "NoOptions", "RouteDriver", "ToolBridge",
        "ToolOptIn", "TransportFit", "WorkspaceIsolator", "opt_ins_by_bridge",
    ),
    "mmo_kernel.plugin.manager": (
        "contract_transport", "driver_names", "execution_host", "get_driver", "plugin_system",
        "route_driver", "tool_bridge", "workspace_isolator",
    ),
    "mmo_kernel.plugin.transports": ("choose_transport",),
})

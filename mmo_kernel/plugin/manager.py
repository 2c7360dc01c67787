"""The plugin manager: one discovery pass, then frozen name -> driver tables.

Discovery is a single mechanism: stevedore enumerates and imports the
``mmo.plugins`` entry points (built-in and third-party alike), each loaded
object is registered with pluggy under its entry-point name, pluggy checks
every hookimpl against ``hookspecs.py`` (``check_pending``), and the five
registration hooks fill the driver tables. Nothing else looks for drivers.

Hooks are called through pluggy (a subset hook caller per plugin, so every
driver is attributed to the plugin that registered it), which is what makes
hook wrappers and ``MMO_TRACE_PLUGINS=1`` see each call.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, TextIO, cast

import pluggy
from stevedore import ExtensionManager

from mmo_kernel import PROJECT_NAME
from mmo_kernel.errors import DuplicateDriverError, PluginLoadError, UnknownDriverError
from mmo_kernel.plugin import hookspecs
from mmo_kernel.plugin.drivers import (
    BASE_CLASSES,
    CONCERNS,
    ContractTransport,
    Driver,
    ExecutionHost,
    RouteDriver,
    ToolBridge,
    WorkspaceIsolator,
)

ENTRY_POINT_GROUP = "mmo.plugins"
DISABLE_ENV = "MMO_DISABLE_PLUGINS"
TRACE_ENV = "MMO_TRACE_PLUGINS"
"""Set to 1: every hook call and every registered driver is logged to stderr."""
TRACE_PREFIX = "mmo plugins:"


@dataclass(frozen=True)
class PluginInfo:
    """What ``mmo plugins`` shows about one registered plugin."""

    name: str
    distribution: str
    version: str
    drivers: dict[str, list[str]] = field(default_factory=dict)


class DriverRegistry:
    """Name -> driver class per concern; filled once, then read-only."""

    def __init__(self) -> None:
        self._tables: dict[str, dict[str, tuple[type[Driver], str]]] = {c: {} for c in CONCERNS}

    def add(self, concern: str, cls: type[Driver], plugin: str) -> None:
        base = BASE_CLASSES[concern]
        if not (isinstance(cls, type) and issubclass(cls, base)):
            raise PluginLoadError(
                f"plugin {plugin!r} registered {cls!r} as a {concern} driver, "
                f"but it is not a subclass of {base.__name__}"
            )
        name = getattr(cls, "name", None)
        if not isinstance(name, str) or not name:
            raise PluginLoadError(f"plugin {plugin!r} registered {cls.__name__} without a name")
        table = self._tables[concern]
        if name in table:
            raise DuplicateDriverError(
                f"{concern} driver {name!r} is registered by both plugin "
                f"{table[name][1]!r} and plugin {plugin!r}; uninstall or disable one "
                f"({DISABLE_ENV}=<plugin>)"
            )
        table[name] = (cls, plugin)

    def names(self, concern: str) -> list[str]:
        return sorted(self._tables[concern])

    def driver_class(self, concern: str, name: str, where: str = "") -> type[Driver]:
        try:
            return self._tables[concern][name][0]
        except KeyError:
            raise UnknownDriverError(concern, name, self._tables[concern], where) from None

    def get(self, concern: str, name: str, where: str = "") -> Driver:
        """A fresh driver instance for ``name``; unknown names list the installed ones."""
        return self.driver_class(concern, name, where)()

    def drivers_of(self, plugin: str) -> dict[str, list[str]]:
        return {
            c: sorted(n for n, (_, p) in table.items() if p == plugin)
            for c, table in self._tables.items()
            if any(p == plugin for _, p in table.values())
        }


class PluginSystem:
    """The built pluggy manager plus the frozen driver registry."""

    def __init__(self, pm: pluggy.PluginManager, registry: DriverRegistry,
                 modules: dict[str, str]) -> None:
        self.pm = pm
        self.registry = registry
        self._modules = modules

    def plugins(self) -> list[PluginInfo]:
        """Every registered plugin with the distribution that ships it."""
        owners = metadata.packages_distributions()
        infos = []
        for name, _plugin in sorted(self.pm.list_name_plugin()):
            top = self._modules.get(name, "").split(".")[0]
            dist = (owners.get(top) or [""])[0]
            version = metadata.version(dist) if dist else ""
            infos.append(PluginInfo(name, dist, version, self.registry.drivers_of(name)))
        return infos


def _blocked_names() -> set[str]:
    raw = os.environ.get(DISABLE_ENV, "")
    return {part.strip() for part in raw.split(",") if part.strip()}


def _raise_load_failure(_manager: Any, entry_point: Any, exc: BaseException) -> None:
    raise PluginLoadError(
        f"error importing MMO plugin {entry_point.name!r} ({entry_point.value}): {exc}"
    ) from exc


class Registrar:
    """The ``register`` callable one plugin's registration hook receives.

    It knows which plugin it asks, so the registry can attribute every driver
    (a duplicate name names both plugins) and a hook wrapper can see who is
    registering (``register.plugin``, ``register.concern``).
    """

    def __init__(self, registry: DriverRegistry, concern: str, plugin: str,
                 trace: TextIO | None = None) -> None:
        self.registry = registry
        self.concern = concern
        self.plugin = plugin
        self._trace = trace

    def __call__(self, cls: type[Driver]) -> None:
        self.registry.add(self.concern, cls, self.plugin)
        if self._trace is not None:
            print(f"{TRACE_PREFIX} {self.plugin} registered {self.concern} driver "
                  f"{cls.name!r} ({cls.__module__}.{cls.__qualname__})", file=self._trace)

    def __repr__(self) -> str:
        return f"<register for {self.plugin}>"


def _trace_hook_calls(pm: pluggy.PluginManager, out: TextIO) -> None:
    """One line per hook call, naming the implementations pluggy runs (MMO_TRACE_PLUGINS)."""
    def before(hook_name: str, impls: Sequence[pluggy.HookImpl],
               kwargs: Mapping[str, object]) -> None:
        names = ", ".join(impl.plugin_name for impl in impls) or "no implementation"
        args = ", ".join(f"{key}={value!r}" for key, value in kwargs.items())
        print(f"{TRACE_PREFIX} call {hook_name}({args}) on {names}", file=out)

    def after(_outcome: object, _hook_name: str, _impls: object, _kwargs: object) -> None:
        return None

    pm.add_hookcall_monitoring(before, after)


def _call_registration_hooks(pm: pluggy.PluginManager, registry: DriverRegistry,
                             trace: TextIO | None) -> None:
    """Call each plugin's registration hooks through pluggy, one plugin at a time.

    A subset hook caller per implementing plugin keeps attribution exact while
    pluggy still runs the call: hook wrappers and tracing see every
    registration call (wrappers stay in every subset).
    """
    for concern, hook_name in hookspecs.REGISTRATION_HOOKS.items():
        impls = getattr(pm.hook, hook_name).get_hookimpls()
        plain = [impl for impl in impls if not (impl.hookwrapper or impl.wrapper)]
        for impl in plain:
            others = [other.plugin for other in plain if other.plugin is not impl.plugin]
            caller = pm.subset_hook_caller(hook_name, others)
            caller(register=Registrar(registry, concern, impl.plugin_name, trace))


def build_plugin_system(extra_plugins: dict[str, object] | None = None) -> PluginSystem:
    """Discover, validate and register every plugin; ``extra_plugins`` serves tests."""
    pm = pluggy.PluginManager(PROJECT_NAME)
    pm.add_hookspecs(hookspecs)
    trace = sys.stderr if os.environ.get(TRACE_ENV, "") not in ("", "0") else None
    if trace is not None:
        _trace_hook_calls(pm, trace)
    blocked = _blocked_names()
    for name in blocked:
        pm.set_blocked(name)
    extensions = ExtensionManager(
        namespace=ENTRY_POINT_GROUP,
        invoke_on_load=False,
        on_load_failure_callback=_raise_load_failure,
    )
    modules: dict[str, str] = {}
    for ext in extensions:
        if ext.name in blocked or pm.get_plugin(ext.name) is not None:
            continue
        pm.register(ext.plugin, name=ext.name)
        modules[ext.name] = ext.module_name
    for name, plugin in (extra_plugins or {}).items():
        pm.register(plugin, name=name)
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as exc:
        raise PluginLoadError(f"MMO plugin failed validation: {exc}") from exc

    registry = DriverRegistry()
    _call_registration_hooks(pm, registry, trace)
    return PluginSystem(pm, registry, modules)


_lock = threading.Lock()
_system: PluginSystem | None = None


def plugin_system() -> PluginSystem:
    """The process-wide plugin system, built lazily on first use."""
    global _system
    with _lock:
        if _system is None:
            _system = build_plugin_system()
        return _system


def reset_plugin_system() -> None:
    """Forget the built system (tests that install or block plugins)."""
    global _system
    with _lock:
        _system = None


def get_driver(concern: str, name: str, where: str = "") -> Driver:
    """Resolve a driver by its TOML name; unknown names list the installed choices."""
    return plugin_system().registry.get(concern, name, where)


def driver_names(concern: str) -> list[str]:
    return plugin_system().registry.names(concern)


def execution_host(name: str, where: str = "") -> ExecutionHost:
    """The execution-host driver ``name`` (typed: hosts launch roots and jobs)."""
    return cast(ExecutionHost, get_driver("execution_hosts", name, where))


def route_driver(name: str, where: str = "") -> RouteDriver:
    """The route driver ``name`` (typed: routes render provider config and serve turns)."""
    return cast(RouteDriver, get_driver("route_drivers", name, where))


def tool_bridge(name: str, where: str = "", *, env: Mapping[str, str] | None = None,
                stderr_dir: Path | None = None, preserve_tool_media: bool = False) -> ToolBridge:
    """The tool bridge ``name``; an execution host passes the agent process's context."""
    cls = cast(type[ToolBridge], plugin_system().registry.driver_class("tool_bridges", name, where))
    return cls(env=env, stderr_dir=stderr_dir, preserve_tool_media=preserve_tool_media)


def workspace_isolator(name: str, where: str = "",
                       options: Mapping[str, Any] | None = None) -> WorkspaceIsolator:
    """The workspace isolator ``name`` with a profile's ``isolation_options`` (typed: isolators
    prepare, capture and apply)."""
    cls = plugin_system().registry.driver_class("workspace_isolation", name, where)
    return cast(type[WorkspaceIsolator], cls)(options)


def contract_transport(name: str, where: str = "") -> ContractTransport:
    """The contract transport ``name`` (typed: transports shape output-contract turns)."""
    return cast(ContractTransport, get_driver("contract_transports", name, where))

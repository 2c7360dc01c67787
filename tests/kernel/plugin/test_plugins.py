"""The plugin system: discovery through entry points, validation, lookup by name."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mmo_kernel import hookimpl
from mmo_kernel.errors import (
    DriverConfigError,
    DuplicateDriverError,
    PluginLoadError,
    UnknownDriverError,
)
from mmo_kernel.plugin import hookspecs
from mmo_kernel.plugin.drivers import CONCERNS, RouteDriver, WorkspaceIsolator
from mmo_kernel.plugin.manager import build_plugin_system

BUILTIN_DRIVERS = {
    "route_drivers": {"codex_builtin", "codex_custom", "scripted"},
    "execution_hosts": {"app_server"},
    "contract_transports": {"native_schema_projection", "validated_text"},
    "workspace_isolation": {"git_worktree", "copy"},
    "tool_bridges": {"native_mcp", "switchyard"},
}


def test_every_builtin_driver_is_discovered_through_entry_points():
    system = build_plugin_system()
    for concern, expected in BUILTIN_DRIVERS.items():
        assert expected <= set(system.registry.names(concern)), concern
    names = {info.name for info in system.plugins()}
    assert {"app_server", "git_worktree", "scripted", "switchyard"} <= names
    assert all(info.distribution == "mmo" for info in system.plugins() if info.name in names)


def test_unknown_driver_names_the_installed_choices():
    system = build_plugin_system()
    with pytest.raises(UnknownDriverError) as err:
        system.registry.get("workspace_isolation", "svn_checkout",
                            "profile.toml: coordination.isolation")
    message = str(err.value)
    assert "svn_checkout" in message and "profile.toml: coordination.isolation" in message
    assert "copy, git_worktree" in message


def test_duplicate_driver_name_stops_startup_naming_both_plugins():
    class Clash(WorkspaceIsolator):
        name = "git_worktree"

    class ClashPlugin:
        @hookimpl
        def mmo_register_workspace_isolators(self, register):
            register(Clash)

    with pytest.raises(DuplicateDriverError, match="'git_worktree'.*'git_worktree'.*'clash'"):
        build_plugin_system(extra_plugins={"clash": ClashPlugin()})


def test_registering_a_non_driver_is_refused():
    class NotADriver:
        name = "bogus"

    class Bad:
        @hookimpl
        def mmo_register_route_drivers(self, register):
            register(NotADriver)

    with pytest.raises(PluginLoadError, match="not a subclass of RouteDriver"):
        build_plugin_system(extra_plugins={"bad": Bad()})


def test_hookimpl_without_a_spec_fails_validation():
    class Typo:
        @hookimpl
        def mmo_register_route_driver(self, register):  # missing "s"
            pass

    with pytest.raises(PluginLoadError, match="unknown hook"):
        build_plugin_system(extra_plugins={"typo": Typo()})


def test_disabled_plugins_are_not_loaded(monkeypatch):
    monkeypatch.setenv("MMO_DISABLE_PLUGINS", "copy, switchyard")
    system = build_plugin_system()
    assert "copy" not in system.registry.names("workspace_isolation")
    assert "switchyard" not in system.registry.names("tool_bridges")


def test_driver_options_are_validated_strictly():
    from pydantic import BaseModel, ConfigDict

    class Opts(BaseModel):
        model_config = ConfigDict(extra="forbid")
        depth: int = 1

    class Opinionated(RouteDriver):
        name = "opinionated"
        Options = Opts

    with pytest.raises(DriverConfigError, match=r"catalog.toml: routes.x.options: depth: "):
        Opinionated.validate_options({"depth": "deep"}, "catalog.toml: routes.x.options")
    with pytest.raises(DriverConfigError, match="colour: Extra inputs are not permitted"):
        Opinionated.validate_options({"colour": 1}, "catalog.toml: routes.x.options")
    assert Opinionated.validate_options({"depth": 3}, "w").depth == 3


def test_every_concern_has_one_documented_registration_hook():
    assert set(hookspecs.REGISTRATION_HOOKS) == set(CONCERNS)
    for hook_name in hookspecs.REGISTRATION_HOOKS.values():
        spec = getattr(hookspecs, hook_name)
        doc = spec.__doc__ or ""
        assert "Called once" in doc and ":param register:" in doc, hook_name


def test_a_hook_wrapper_sees_every_registration_call():
    """Hooks run through pluggy, so a wrapper wraps each plugin's registration call and
    can tell who registers (``register.plugin``) and what (``register.concern``)."""
    seen = []

    class Watcher:
        @hookimpl(wrapper=True)
        def mmo_register_route_drivers(self, register):
            seen.append((register.concern, register.plugin))
            return (yield)

    system = build_plugin_system(extra_plugins={"watcher": Watcher()})
    assert sorted(seen) == [("route_drivers", "codex_builtin"), ("route_drivers", "codex_custom"),
                            ("route_drivers", "scripted")]
    assert system.registry.names("route_drivers") == ["codex_builtin", "codex_custom", "scripted"]


def _mmo_plugins(env_extra: dict[str, str], tmp_path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "MMO_TRACE_PLUGINS"}
    env.update({"MMO_STATE_DIR": str(tmp_path / "state"),
                "MMO_CONFIG_DIR": str(tmp_path / "config"), **env_extra})
    return subprocess.run([str(Path(sys.executable).with_name("mmo")), "plugins"],
                          capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL,
                          timeout=60, check=True)


def test_mmo_trace_plugins_logs_each_hook_call_and_registration(tmp_path):
    traced = _mmo_plugins({"MMO_TRACE_PLUGINS": "1"}, tmp_path)
    lines = traced.stderr.splitlines()
    assert ("mmo plugins: call mmo_register_route_drivers(register=<register for scripted>) "
            "on scripted") in lines
    assert ("mmo plugins: scripted registered route_drivers driver 'scripted' "
            "(mmo_scripted.driver.ScriptedRoute)") in lines
    assert ("mmo plugins: switchyard registered tool_bridges driver 'switchyard' "
            "(mmo_switchyard.driver.SwitchyardBridge)") in lines
    calls = [line for line in lines if line.startswith("mmo plugins: call ")]
    registrations = [line for line in lines if " registered " in line]
    assert len(calls) == len(registrations) == sum(len(v) for v in BUILTIN_DRIVERS.values())

    quiet = _mmo_plugins({}, tmp_path)
    assert "mmo plugins:" not in quiet.stderr
    assert quiet.stdout == traced.stdout


def test_the_public_surface_imports_cheaply_and_resolves_every_name():
    """``import mmo_kernel.plugin`` loads neither pydantic nor the manager's stevedore; each
    exported name loads its module on first use."""
    script = (
        "import sys, mmo_kernel.plugin as p\n"
        "assert not {'stevedore', 'pydantic', 'pluggy'} & set(sys.modules), sorted(sys.modules)\n"
        "from mmo_kernel.plugin import RouteDriver, ToolBridge, hookimpl\n"
        "assert 'stevedore' not in sys.modules\n"
        "assert hookimpl is __import__('mmo_kernel').hookimpl\n"
        "for name in p.__all__: getattr(p, name)\n"
        "assert isinstance(p.tool_bridge('native_mcp'), ToolBridge)\n"
        "assert issubclass(type(p.route_driver('scripted')), RouteDriver)\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60,
                   stdin=subprocess.DEVNULL)

"""Agent homes: the private ``CODEX_HOME`` each agent of a session runs in (spec 02).

A home holds a generated ``config.toml`` (never a secret: env var *names*
only; its ``shell_environment_policy`` keeps credentials, MMO's capabilities
and the config dir out of the agent's shell), the agent's guidance as
``AGENTS.md``, the team's orchestration skill, a model catalog describing
its model (read by Codex only where the route asks: slugs Codex does not
know), ``auth.json`` for Codex's own login, and native-agent definition files.
The session records every file's sha256 so a resume can verify and restore
the home.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import tomlkit

from mmo_kernel.config.catalog import Model, Route
from mmo_kernel.gateway.attribution import attribution_headers
from mmo_kernel.plugin.drivers import RouteDriver, opt_ins_by_bridge
from mmo_kernel.plugin.manager import driver_names, route_driver, tool_bridge
from mmo_kernel.profiles.schema import PROFILE_SKILL_RELATIVE_PATH, agent_guidance_relative_path
from mmo_kernel.profiles.snapshots import CATALOG_JSON, snapshot_profile
from mmo_kernel.state import redaction
from mmo_kernel.state.files import atomic_write_bytes
from mmo_kernel.state.paths import user_codex_home
from mmo_kernel.tools.servers import ToolServer

MODEL_CATALOG_FILE = "model-catalog.json"
NATIVE_AGENTS_DIR = "native-agents"
SHELL_EXCLUDES = ("*KEY*", "*TOKEN*", "*SECRET*", "*PASSWORD*", "*PASSWD*", "*CREDENTIAL*",
                  "MMO_CONFIG_DIR", "MMO_CALLER_*", "MMO_NATIVE_CALLER_*")
"""Variables Codex keeps out of the agent's shell (case-insensitive globs): credential-like
names, the config dir (``credentials.env`` lives there; the ``mmo_mesh`` server gets it
from its own ``env``) and MMO's capabilities (the server gets them through ``env_vars``)."""


@dataclass(frozen=True)
class HomeContext:
    """What a home depends on beyond the snapshot."""

    session_id: str
    run_id: str
    gateway_url: str
    tainted: bool = False
    auth_link_mode: str = "shared"
    lifecycle_timeout_seconds: float = 1200
    tool_servers: dict[str, ToolServer] = field(default_factory=dict)
    native_tokens: dict[str, dict[str, str]] = field(default_factory=dict)
    route_faults: dict[str, str] = field(default_factory=dict)


def sha256_file(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def snapshot_catalog(snapshot: dict[str, Any]) -> tuple[dict[str, Route], dict[str, Model]]:
    data = json.loads((Path(snapshot["directory"]) / CATALOG_JSON).read_bytes())
    routes = {rid: Route.model_validate(r) for rid, r in data.get("routes", {}).items()}
    models = {mid: Model.model_validate(m) for mid, m in data.get("models", {}).items()}
    redaction.register_names(name for route in routes.values()
                             for name in (route.credential_env, *route.env_http_headers.values())
                             if name)
    return routes, models


def shell_environment_policy(credential_names: list[str]) -> dict[str, Any]:
    """Codex's ``[shell_environment_policy]``: everything passes except ``SHELL_EXCLUDES``
    and the credentials this agent's process holds (its route's and tool servers')."""
    return {"inherit": "all", "ignore_default_excludes": False,
            "exclude": [*SHELL_EXCLUDES, *sorted(set(credential_names))]}


def _agent_depth(profile: Any, agent: str) -> int:
    return 0 if agent == profile.root_agent else 1


def mesh_block(profile: Any, agent: str, ctx: HomeContext, *, native_token: str | None = None,
               native_agent: str | None = None) -> dict[str, Any]:
    """The ``[mcp_servers.mmo_mesh]`` table whose tools equal what ``tools/list`` returns.

    For a native agent of ``agent`` (``native_agent`` with its ``native_token``) the
    table has the parent's tools and forwarded capability under the native's own id.
    """
    from mmo_kernel.mesh.config import mesh_server_config
    from mmo_kernel.mesh.surface import tools_for

    spec = profile.agents[agent]
    kind: Literal["root", "worker"] = "root" if agent == profile.root_agent else "worker"
    tools = tools_for(kind, spawnable=list(spec.can_spawn), depth=_agent_depth(profile, agent),
                      max_depth=profile.coordination.max_depth, tainted=ctx.tainted)
    return mesh_server_config(
        kind, session_id=ctx.session_id, run_id=ctx.run_id, agent=agent,
        native=native_token is not None, native_token=native_token, native_agent=native_agent,
        lifecycle_timeout_seconds=ctx.lifecycle_timeout_seconds, enabled_tools=tools)


def _tool_blocks(spec: Any, ctx: HomeContext) -> tuple[dict[str, Any], list[str], list[str]]:
    """``mcp_servers`` entries for declared tool servers, plus env names, from every bridge.

    Each installed bridge is asked with the opt-ins that name it (possibly none,
    so a bridge may list servers the agent did not opt into). An entry for a
    server comes from the bridge the agent opted into it through, if that
    bridge renders one; otherwise from the first bridge (by name) that does.
    """
    if not ctx.tool_servers:
        return {}, [], []
    grouped = opt_ins_by_bridge(spec.tool_mcp_servers)
    entries: dict[str, Any] = {}
    envs: set[str] = set()
    http_envs: set[str] = set()
    for name in sorted(set(driver_names("tool_bridges")) | set(grouped)):
        bridge = tool_bridge(name)
        opt_ins = grouped.get(name, {})
        for server, entry in bridge.render_servers(ctx.tool_servers, opt_ins).items():
            if server in opt_ins or server not in entries:
                entries[server] = entry
        stdio, http = bridge.env_names(ctx.tool_servers, opt_ins)
        envs.update(stdio)
        http_envs.update(http)
    return dict(sorted(entries.items())), sorted(envs), sorted(http_envs)


def _provider(driver: RouteDriver, route: Route, model: Model, ctx: HomeContext
              ) -> dict[str, Any]:
    """The driver's provider keys; ``fault=`` is passed only when one is injected."""
    fault = ctx.route_faults.get(route.id)
    if fault is None:
        return driver.provider_config(route, model, ctx.gateway_url)
    if not driver.takes_faults():
        raise ValueError(f"route fault {fault!r} cannot be injected on route {route.id}: "
                         f"its driver {route.driver!r} does not support route faults")
    return driver.provider_config(route, model, ctx.gateway_url, fault=fault)


def _attributed(provider: dict[str, Any], profile: Any, agent: str, ctx: HomeContext
                ) -> dict[str, Any]:
    """``provider`` with the session/agent (and, for a worker, job) headers in its block.

    The gateway records them per request. Only a block whose ``base_url`` is
    MMO's gateway gets them (they never go to a provider directly); the
    driver's own headers (a fault) are kept.
    """
    provider_id = provider.get("model_provider")
    block = (provider.get("model_providers") or {}).get(provider_id)
    gateway = ctx.gateway_url.rstrip("/")
    if not (gateway and isinstance(block, dict)
            and str(block.get("base_url", "")).startswith(gateway + "/")):
        return provider
    static, from_env = attribution_headers(ctx.session_id, agent,
                                           worker=agent != profile.root_agent)
    block = {**block, "http_headers": {**(block.get("http_headers") or {}), **static}}
    if from_env:
        block["env_http_headers"] = {**(block.get("env_http_headers") or {}), **from_env}
    return {**provider, "model_providers": {**provider["model_providers"], provider_id: block}}


def render_config(profile: Any, agent: str, routes: dict[str, Route], models: dict[str, Model],
                  home: Path, ctx: HomeContext) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """The agent's ``config.toml`` as data, and the env var names its process needs."""
    spec = profile.agents[agent]
    model = models[spec.model]
    route = routes[model.route]
    driver = route_driver(route.driver)
    config: dict[str, Any] = {}
    provider = _attributed(_provider(driver, route, model, ctx), profile, agent, ctx)
    config.update({k: v for k, v in provider.items() if k != "model_providers"})
    if model.has_reasoning and spec.reasoning:
        config["model_reasoning_effort"] = spec.reasoning
        config["plan_mode_reasoning_effort"] = spec.reasoning
    config["approval_policy"] = spec.approval_policy
    config["sandbox_mode"] = spec.permissions
    config["cli_auth_credentials_store"] = "file"
    if driver.codex_reads_model_catalog:
        config["model_catalog_json"] = str(home / MODEL_CATALOG_FILE)
    config["sandbox_workspace_write"] = {"network_access": False}
    features: dict[str, Any] = {"plugins": False, "remote_plugin": False, "shell_snapshot": False}
    if spec.native_agents:
        features["multi_agent"] = True
    config["features"] = features
    skill = home / PROFILE_SKILL_RELATIVE_PATH
    config["skills"] = {"config": [{"path": str(skill), "enabled": True}]}
    agents_table: dict[str, Any] = {}
    if ctx.tainted:
        agents_table["enabled"] = False
    for native in spec.native_agents:
        agents_table[native] = {
            "description": f"MMO native agent {native} of {agent}",
            "config_file": str(home / NATIVE_AGENTS_DIR / f"{native}.toml"),
        }
    if agents_table:
        config["agents"] = agents_table
    mcp_servers = {"mmo_mesh": mesh_block(profile, agent, ctx)}
    tool_servers, tool_envs, tool_http_envs = _tool_blocks(spec, ctx)
    mcp_servers.update(tool_servers)
    config["mcp_servers"] = mcp_servers
    if "model_providers" in provider:
        config["model_providers"] = provider["model_providers"]
    envs = {
        "route": sorted(set(driver.env_names(route))),
        "direct_header_envs": sorted(set(route.env_http_headers.values())),
        "tool_mcp_envs": tool_envs,
        "tool_mcp_http_envs": tool_http_envs,
    }
    config["shell_environment_policy"] = shell_environment_policy(
        [name for names in envs.values() for name in names])
    return config, envs


def _native_config(profile: Any, parent: str, native: str, snapshot_dir: Path,
                   parent_skill: Path, ctx: HomeContext) -> dict[str, Any]:
    """A Codex-native subagent's config layer: its guidance, the parent's mesh tools
    under its own token, no network, tool servers by its own opt-ins."""
    spec = profile.agents[native]
    token = ctx.native_tokens.get(parent, {}).get(native)
    guidance = (snapshot_dir / agent_guidance_relative_path(native)).read_text(encoding="utf-8")
    config: dict[str, Any] = {
        "developer_instructions": guidance,
        "sandbox_mode": spec.permissions,
        "sandbox_workspace_write": {"network_access": False},
        "skills": {"config": [{"path": str(parent_skill),
                               "enabled": bool(profile.coordination.native_nested_delegation)}]},
    }
    mcp = {}
    if token is not None:
        mcp["mmo_mesh"] = mesh_block(profile, parent, ctx, native_token=token,
                                     native_agent=native)
    tool_servers, _, _ = _tool_blocks(spec, ctx)
    mcp.update(tool_servers)
    if mcp:
        config["mcp_servers"] = mcp
    return config


def _write(path: Path, data: bytes, mode: int = 0o600) -> str:
    """Write a home file (credential values redacted) and return the digest of what was written."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    data = redaction.redact_bytes(data)
    atomic_write_bytes(path, data, mode=mode, redact=False)
    return hashlib.sha256(data).hexdigest()


def _link_auth(home: Path, mode: str, route: Route) -> None:
    """Codex's own login: link (``shared``) or copy (``copy``, ``0600``) the user's auth.json."""
    source = user_codex_home() / "auth.json"
    target = home / "auth.json"
    if target.is_symlink() or target.exists():
        target.unlink()
    if not source.is_file():
        raise RuntimeError(f"route {route.id} uses Codex's own login and needs {source} "
                           "(run `codex login` first)")
    if mode == "copy":
        shutil.copyfile(source, target)
        os.chmod(target, 0o600)
    else:
        os.symlink(source, target)


def materialize_home(snapshot: dict[str, Any], agent: str, home: Path, ctx: HomeContext
                     ) -> dict[str, Any]:
    """Write one agent's home and return its ``homes[agent]`` record."""
    profile = snapshot_profile(snapshot)
    routes, models = snapshot_catalog(snapshot)
    snap_dir = Path(snapshot["directory"])
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(home, 0o700)
    config, envs = render_config(profile, agent, routes, models, home, ctx)
    record: dict[str, Any] = {"home": str(home)}
    guidance = (snap_dir / agent_guidance_relative_path(agent)).read_bytes()
    record["agents_md"] = str(home / "AGENTS.md")
    record["agents_md_sha256"] = _write(home / "AGENTS.md", guidance)
    skill_path = home / PROFILE_SKILL_RELATIVE_PATH
    record["orchestration_skill"] = str(skill_path)
    record["orchestration_skill_sha256"] = _write(
        skill_path, (snap_dir / PROFILE_SKILL_RELATIVE_PATH).read_bytes())
    spec = profile.agents[agent]
    model = models[spec.model]
    route = routes[model.route]
    driver = route_driver(route.driver)
    entry = driver.model_catalog_entry(route, model)
    catalog = json.dumps({"models": [entry]}, indent=2, sort_keys=True).encode()
    record["model_catalog_json"] = str(home / MODEL_CATALOG_FILE)
    record["model_catalog_sha256"] = _write(home / MODEL_CATALOG_FILE, catalog)
    if driver.uses_codex_login:
        _link_auth(home, ctx.auth_link_mode, route)
    natives = {}
    for native in spec.native_agents:
        native_cfg = _native_config(profile, agent, native, snap_dir, skill_path, ctx)
        path = home / NATIVE_AGENTS_DIR / f"{native}.toml"
        _write(path, tomlkit.dumps(native_cfg).encode())
        natives[native] = str(path)
        _, native_envs, native_http = _tool_blocks(profile.agents[native], ctx)
        envs["tool_mcp_envs"] = sorted(set(envs["tool_mcp_envs"]) | set(native_envs))
        envs["tool_mcp_http_envs"] = sorted(set(envs["tool_mcp_http_envs"]) | set(native_http))
    record["native_agent_files"] = natives
    if spec.native_agents:  # their tool servers' credentials are in this process too
        config["shell_environment_policy"] = shell_environment_policy(
            [name for names in envs.values() for name in names])
    record["config_toml"] = str(home / "config.toml")
    record["config_sha256"] = _write(home / "config.toml", tomlkit.dumps(config).encode())
    record["direct_header_envs"] = envs["direct_header_envs"]
    record["tool_mcp_envs"] = envs["tool_mcp_envs"]
    record["tool_mcp_http_envs"] = envs["tool_mcp_http_envs"]
    record["route_envs"] = envs["route"]
    return record


def verify_home(snapshot: dict[str, Any], agent: str, record: dict[str, Any]) -> list[str]:
    """Re-validate a home on resume: restore edited guidance/skill from the snapshot,
    refuse a drifted model catalog. Returns the restored file names."""
    snap_dir = Path(snapshot["directory"])
    restored = []
    pairs = (("agents_md", agent_guidance_relative_path(agent)),
             ("orchestration_skill", PROFILE_SKILL_RELATIVE_PATH))
    for key, rel in pairs:
        path = Path(record[key])
        if not path.is_file() or sha256_file(path) != record[f"{key}_sha256"]:
            _write(path, (snap_dir / rel).read_bytes())
            restored.append(path.name)
    catalog, digest = record.get("model_catalog_json"), record.get("model_catalog_sha256")
    if not (isinstance(catalog, str) and catalog and isinstance(digest, str) and digest):
        raise RuntimeError(f"model catalog failed integrity validation for agent {agent}: "
                           "its home records no model catalog and digest")
    path = Path(catalog)
    if not path.is_file() or sha256_file(path) != digest:
        raise RuntimeError(f"model catalog failed integrity validation for agent {agent}: {path}")
    return restored


"""``create_session``: snapshot, pinned Codex, gateway, route availability, homes, run (spec 03).

An ``external`` session (spec 12) has its root seat held by an external MCP host through
``mmo runner``: it is created without a Codex binary, gateway or agent homes, and
``materialize_external`` adds them at its first worker spawn.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mmo_kernel.config.settings import load_settings, resolve_codex_binary
from mmo_kernel.plugin.manager import route_driver, workspace_isolator
from mmo_kernel.profiles.snapshots import compile_profile, load_snapshot, snapshot_profile
from mmo_kernel.sessions.homes import HomeContext, materialize_home, snapshot_catalog
from mmo_kernel.sessions.records import (
    CREATING_MARKER,
    new_record_id,
    read_session_record,
    session_dir,
    session_file,
    utc_now,
    write_run_record,
    write_session_record,
)
from mmo_kernel.sessions.state import transition, update_session
from mmo_kernel.state.audit import append_audit
from mmo_kernel.state.files import ensure_state_layout, lifecycle_lock, runtime_lock
from mmo_kernel.state.paths import ensure_private_dir, state_dir

ROUTE_FAULTS = ("rate_limit", "timeout", "server_error", "auth_error", "transport")
SESSION_KINDS = ("noninteractive", "interactive", "external")
EXTERNAL_FIELDS = frozenset({"root_client_pid", "root_client_start_token", "external_client_id",
                             "external_lead"})
"""What the creator of an ``external`` session records about its host (the runner, held
as the session's *client*: MMO never signals it) and its lead."""


def resolve_snapshot(profile: Any, snapshot_hash: str | None,
                     bindings: Mapping[str, str] | None) -> dict[str, Any]:
    """Exactly one of ``profile`` / ``snapshot_hash``; sessions never run a live profile."""
    if profile is not None and snapshot_hash is not None:
        raise ValueError("profile and snapshot_hash cannot be combined: pass exactly one")
    if profile is None and snapshot_hash is None:
        raise ValueError("create_session needs a profile or a snapshot_hash")
    if snapshot_hash is not None:
        if bindings:
            raise ValueError("bindings cannot be combined with snapshot_hash (compile a profile)")
        return load_snapshot(snapshot_hash)
    return compile_profile(profile, bindings=bindings)


def check_route_faults(route_faults: Any, known_routes: set[str]) -> dict[str, str]:
    if route_faults is None:
        return {}
    if not isinstance(route_faults, Mapping):
        raise ValueError("route_faults must map route ids to faults")
    checked = {}
    for route_id, fault in route_faults.items():
        if route_id not in known_routes:
            raise ValueError(f"unknown route {route_id!r} in route_faults; this session's routes: "
                             f"{', '.join(sorted(known_routes))}")
        if fault not in ROUTE_FAULTS:
            raise ValueError(f"route fault {fault!r} for {route_id} must be one of "
                             f"{', '.join(ROUTE_FAULTS)}")
        checked[route_id] = fault
    return checked


def route_availability(routes: Mapping[str, Any], faults: Mapping[str, str]) -> dict[str, Any]:
    """``route -> {available, reason?, fault?}``; a fault makes a route unavailable."""
    result = {}
    for route_id, route in sorted(routes.items()):
        if route_id in faults:
            fault = faults[route_id]
            result[route_id] = {"available": False, "fault": fault,
                                "reason": f"injected route fault: {fault}"}
            continue
        driver = route_driver(route.driver)
        result[route_id] = dict(driver.availability(route, dict(os.environ)))
    return result


def _warnings(profile: Any, models: Mapping[str, Any], availability: Mapping[str, Any],
              homes: Mapping[str, Any]) -> list[str]:
    warnings = []
    for agent, spec in profile.agents.items():
        route_id = models[spec.model].route
        state = availability[route_id]
        if not state["available"] and agent != profile.root_agent:
            warnings.append(f"optional route {route_id} of agent {agent} is unavailable: "
                            f"{state.get('reason', 'unavailable')}")
    for agent, home in homes.items():
        names = sorted({*home.get("tool_mcp_envs", []), *home.get("tool_mcp_http_envs", [])})
        if names:
            warnings.append(f"tool MCP credentials {', '.join(names)} are loaded for agent {agent}")
    return warnings


def _mint_tokens(profile: Any) -> tuple[str, str, dict[str, dict[str, str]]]:
    from mmo_kernel.mesh.tokens import mint_token

    root_token, root_hash = mint_token()
    natives = {agent: {native: mint_token()[0] for native in spec.native_agents}
               for agent, spec in profile.agents.items() if spec.native_agents}
    return root_token, root_hash, natives


def check_workspace(resolved: Any, workdir: Path) -> None:
    """A team with writers needs a workspace its isolator can serve: refused before the
    session exists, not at its first writer."""
    if not any(a.permissions == "workspace-write" for a in resolved.agents.values()):
        return
    coordination = resolved.coordination
    isolator = workspace_isolator(coordination.isolation, "coordination.isolation",
                                  coordination.isolation_options)
    try:
        isolator.check_workspace(workdir)
    except ValueError as exc:
        raise ValueError(f"profile {resolved.id!r} has writers: {exc}") from None


def _gateway() -> dict[str, Any]:
    from mmo_kernel.gateway.process import ensure_gateway

    return ensure_gateway()


def create_session(profile: Any = None, cwd: str | os.PathLike[str] | None = None,
                   snapshot_hash: str | None = None, bindings: Mapping[str, str] | None = None,
                   session_kind: str = "noninteractive",
                   route_faults: Mapping[str, str] | None = None,
                   check_writers_workspace: bool = False,
                   external: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Create a ``starting`` session with its run, capabilities, homes and ``run_started`` audit.

    ``check_writers_workspace`` (what ``mmo run`` and ``mmo start`` ask for) refuses a
    ``cwd`` the team's isolator cannot give writers, before anything is created.
    ``session_kind="external"`` needs ``external`` (``EXTERNAL_FIELDS``: the runner's pid
    and start token, its client id and the lead's name) and creates a ``running``
    session with no Codex binary, gateway or homes yet (``materialize_external``).
    """
    if session_kind not in SESSION_KINDS:
        raise ValueError(f"session_kind must be one of {', '.join(SESSION_KINDS)}")
    if (session_kind == "external") != (external is not None):
        raise ValueError("external fields are given exactly for session_kind external")
    unknown = sorted(set(external or ()) - EXTERNAL_FIELDS)
    if unknown:
        raise ValueError(f"unknown external fields: {', '.join(unknown)}")
    workdir = Path(cwd if cwd is not None else os.getcwd()).resolve()
    if not workdir.is_dir():
        raise ValueError(f"cwd {workdir} is not a directory")
    snapshot = resolve_snapshot(profile, snapshot_hash, bindings)
    resolved = snapshot_profile(snapshot)
    if check_writers_workspace:
        check_workspace(resolved, workdir)
    routes, models = snapshot_catalog(snapshot)
    faults = check_route_faults(route_faults, set(routes))
    lazy = session_kind == "external"  # file and process tools never need Codex
    codex_binary = None if lazy else str(resolve_codex_binary())
    settings = load_settings()
    gateway = None if lazy else _gateway()
    availability = route_availability(routes, faults)
    ensure_state_layout()

    session_id = new_record_id(resolved.id)
    run_id = new_record_id("run")
    root_token, root_hash, native_tokens = _mint_tokens(resolved)
    directory = session_dir(session_id)
    # the directory appears (one rename) with its marker already inside, so a reader
    # listing sessions never sees it half-made (readers skip hidden names)
    staging = directory.with_name(f".{session_id}.new")
    staging.mkdir(mode=0o700)
    (staging / CREATING_MARKER).touch(mode=0o600)
    os.rename(staging, directory)
    try:
        record = _populate(directory, session_id, run_id, snapshot, resolved, models, workdir,
                           session_kind, codex_binary, settings, gateway, availability, faults,
                           root_token, root_hash, native_tokens, dict(external or {}))
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)  # a failed create leaves nothing behind
        raise
    (directory / CREATING_MARKER).unlink()
    try:
        append_audit(session_file(session_id, "audit.jsonl"), "run_started", run_id,
                     profile_id=resolved.id, snapshot_hash=record["snapshot_hash"],
                     session_kind=session_kind,
                     **({"external_lead": record.get("external_lead"),
                         "external_client_id": record.get("external_client_id")}
                        if lazy else {}))
    except Exception as exc:
        transition(session_id, "failed", error=f"initial audit event could not be written: {exc}")
        raise
    return record


def _populate(directory: Path, session_id: str, run_id: str, snapshot: dict[str, Any],
              resolved: Any, models: Mapping[str, Any], workdir: Path, session_kind: str,
              codex_binary: str | None, settings: Any, gateway: dict[str, Any] | None,
              availability: dict[str, Any], faults: dict[str, str], root_token: str,
              root_hash: str, native_tokens: dict[str, dict[str, str]],
              external: dict[str, Any]) -> dict[str, Any]:
    from mmo_kernel.mesh.capabilities import write_capabilities

    write_capabilities(directory, root_mcp_token=root_token, native_agent_tokens=native_tokens)
    ensure_private_dir(directory / "homes")
    homes = ({} if gateway is None else
             _homes(directory, session_id, run_id, snapshot, resolved, settings, gateway["url"],
                    native_tokens, faults))
    now = utc_now()
    status = "running" if session_kind == "external" else "starting"
    record = {
        "session_id": session_id, "status": status, "profile_id": resolved.id,
        "snapshot_hash": snapshot["manifest"]["snapshot_hash"], "cwd": str(workdir),
        "session_kind": session_kind, "root_agent": resolved.root_agent, "homes": homes,
        "codex_binary": codex_binary, "route_availability": availability,
        "route_faults": faults, "gateway_pid": gateway["pid"] if gateway else None,
        "gateway_url": gateway["url"] if gateway else None,
        "profile_warnings": _warnings(resolved, models, availability, homes),
        "audit_path": str(session_file(session_id, "audit.jsonl")),
        "current_run_id": run_id, "run_sequence": 1, "run_created_at": now,
        "root_mcp_token_hash": root_hash,
        "root_execution_host": resolved.agents[resolved.root_agent].host,
        "root_execution_mode": resolved.agents[resolved.root_agent].execution_mode,
        "tainted": False, "created_at": now, "last_active_at": now, **external,
    }
    if session_kind == "external":  # no host to publish itself: running from the start
        record["started_at"] = now
        record = {k: v for k, v in record.items() if v is not None}
    with runtime_lock():
        write_run_record({"run_id": run_id, "session_id": session_id, "sequence": 1,
                          "kind": "initial", "status": status, "created_at": now,
                          "root_mcp_token_hash": root_hash})
        return write_session_record(record)


def _homes(directory: Path, session_id: str, run_id: str, snapshot: dict[str, Any],
           resolved: Any, settings: Any, gateway_url: str,
           native_tokens: dict[str, dict[str, str]], faults: dict[str, str]) -> dict[str, Any]:
    ctx = HomeContext(session_id=session_id, run_id=run_id, gateway_url=gateway_url,
                      auth_link_mode=settings.auth_link_mode,
                      lifecycle_timeout_seconds=settings.app_server_lifecycle_timeout_seconds,
                      tool_servers=_tool_servers(), native_tokens=native_tokens,
                      route_faults=faults)
    return {agent: materialize_home(snapshot, agent, directory / "homes" / agent, ctx)
            for agent in resolved.agents}


def materialize_external(session_id: str) -> dict[str, Any]:
    """Give an ``external`` session what its workers need (spec 12): the pinned Codex
    binary, the running gateway and every agent's home, the first time only.

    Later calls only make sure the gateway runs; if it came back on another address the
    homes are written again for it. Serialized on the session's lifecycle lock, so two
    first spawns materialize once. Returns the session record.
    """
    from mmo_kernel.mesh.capabilities import read_capabilities

    directory = session_dir(session_id)
    with lifecycle_lock(directory):
        record = read_session_record(session_id)
        if record.get("session_kind") != "external":
            raise ValueError(f"session {session_id} is not an external session")
        codex_binary = record.get("codex_binary") or str(resolve_codex_binary())
        gateway = _gateway()
        if record.get("homes") and record.get("gateway_url") == gateway["url"]:
            if record.get("gateway_pid") != gateway["pid"]:
                record = update_session(session_id, gateway_pid=gateway["pid"])
            return record
        snapshot = load_snapshot(record["snapshot_hash"])
        resolved = snapshot_profile(snapshot)
        caps = read_capabilities(directory)
        homes = _homes(directory, session_id, str(record.get("current_run_id") or ""),
                       snapshot, resolved, load_settings(), gateway["url"],
                       dict(caps.native_agent_tokens), dict(record.get("route_faults") or {}))
        routes, models = snapshot_catalog(snapshot)
        availability = route_availability(routes, record.get("route_faults") or {})
        fields = {"codex_binary": codex_binary, "gateway_pid": gateway["pid"],
                  "gateway_url": gateway["url"], "homes": homes,
                  "route_availability": availability,
                  "profile_warnings": _warnings(resolved, models, availability, homes)}
        if not record.get("homes"):
            fields["team_materialized_at"] = utc_now()
        return update_session(session_id, **fields)


def _tool_servers() -> dict[str, Any]:
    from mmo_kernel.tools.servers import load_tool_servers

    return load_tool_servers()


def root_state_dir() -> Path:
    return state_dir()

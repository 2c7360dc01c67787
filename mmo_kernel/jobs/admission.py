"""Admission: every check a spawn must pass before anything is created (spec 04).

``admit`` runs under the runtime lock and is all-or-nothing: a batch is
checked completely — caller authority, session state, route, permissions,
literal tasks, write scopes against every live writer of *any* session, and
capacity including the batch's own items — before a single job exists.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from mmo_kernel.errors import AdmissionError, format_validation_error
from mmo_kernel.jobs.listing import live_jobs, runner_alive
from mmo_kernel.jobs.literal import input_sha256, literal_task_text, parse_literal_task
from mmo_kernel.jobs.records import ACTIVE_JOB_STATUSES, read_job_record
from mmo_kernel.mesh.arguments import SpawnRequest
from mmo_kernel.profiles.schema import ResolvedAgent, ResolvedProfile
from mmo_kernel.profiles.snapshots import snapshot_profile
from mmo_kernel.sessions.records import TERMINAL_SESSION_STATUSES, read_session_record
from mmo_kernel.workspace.write_scopes import (
    assert_no_scope_conflicts,
    normalize_write_scopes,
    resolve_write_scopes,
)

REFUSED_SESSION_STATUSES = frozenset({"cancelling", "paused"})


def parse_requests(specs: list[SpawnRequest | dict[str, Any]]) -> list[SpawnRequest]:
    """The batch as spawn requests.

    A request the mesh already validated is taken as it is, never validated
    again, so a spawn is judged by one model whichever way it arrives.
    """
    if not isinstance(specs, list) or not specs:
        raise ValueError("spawn_jobs needs a non-empty list of job specs")
    parsed = []
    for index, spec in enumerate(specs):
        if isinstance(spec, SpawnRequest):
            parsed.append(spec)
            continue
        if not isinstance(spec, dict):
            raise ValueError(f"job spec {index} must be an object")
        try:
            parsed.append(SpawnRequest.model_validate(spec))
        except ValidationError as exc:
            raise ValueError(f"job spec {index}: {format_validation_error(exc)}") from None
    return parsed


@dataclass
class Caller:
    """Who spawns: the root (depth 0, no job) or a live worker job."""

    agent: str
    job_id: str | None
    depth: int


@dataclass
class Admitted:
    """One admitted item: everything the record needs, decided before creation."""

    agent: str
    spec: ResolvedAgent
    mode: str
    task_text: str
    task_kind: str | None
    task: str | None
    literal_task: dict[str, Any] | None
    write_scope: list[str] = field(default_factory=list)
    write_scope_resolved: list[str] = field(default_factory=list)
    attachments: list[str] = field(default_factory=list)
    literal_input_sha256: str | None = None


@dataclass
class Context:
    session: dict[str, Any]
    profile: ResolvedProfile
    caller: Caller


def check_session(session: dict[str, Any]) -> None:
    sid, status = session["session_id"], session["status"]
    if status in TERMINAL_SESSION_STATUSES:
        raise RuntimeError(f"terminal immutable session {sid} ({status}) accepts no new jobs")
    if status in REFUSED_SESSION_STATUSES:
        raise RuntimeError(f"session {sid} is {status}; it accepts no new jobs until continued")
    if session.get("tainted"):
        raise RuntimeError(
            f"session {sid} is tainted; new spawns are refused (a resume with --allow-tainted "
            "allows inspection, never agent_spawn)"
        )


def resolve_caller(session: dict[str, Any], profile: ResolvedProfile, caller_agent: str,
                   caller_job_id: str | None) -> Caller:
    """Verify the caller's authority: the root, or a worker acting with its own live job."""
    if caller_agent not in profile.agents:
        raise PermissionError(f"unknown caller agent {caller_agent!r} in session "
                              f"{session['session_id']}")
    if caller_job_id is None:
        if caller_agent != profile.root_agent:
            raise PermissionError(f"worker agent {caller_agent!r} must act with its own "
                                  "caller_job_id")
        return Caller(caller_agent, None, 0)
    try:
        job = read_job_record(caller_job_id)
    except FileNotFoundError:
        raise PermissionError(f"caller job {caller_job_id!r} does not exist") from None
    if job["session_id"] != session["session_id"] or job["agent"] != caller_agent:
        raise PermissionError(f"caller job {caller_job_id} is not a job of agent "
                              f"{caller_agent!r} in session {session['session_id']}")
    live = job["status"] in ACTIVE_JOB_STATUSES and (job.get("runner_pid") is None
                                                     or runner_alive(job))
    if not live:
        raise PermissionError(f"caller job {caller_job_id} is not live (status {job['status']})")
    depth = job.get("depth")
    return Caller(caller_agent, caller_job_id, depth if isinstance(depth, int) else 1)


def load_context(session_id: str, caller_agent: str, caller_job_id: str | None) -> Context:
    session = read_session_record(session_id)
    check_session(session)
    profile = snapshot_profile(session["snapshot_hash"])
    return Context(session, profile, resolve_caller(session, profile, caller_agent,
                                                    caller_job_id))


def _check_authority(ctx: Context, agent: str) -> ResolvedAgent:
    profile, caller = ctx.profile, ctx.caller
    if agent not in profile.agents:
        raise ValueError(f"unknown agent {agent!r}; agents: {', '.join(profile.agents)}")
    allowed = profile.agents[caller.agent].can_spawn
    if agent not in allowed:
        raise PermissionError(f"agent {caller.agent!r} may not spawn {agent!r} "
                              f"(can_spawn: {', '.join(allowed) or 'none'})")
    max_depth = profile.coordination.max_depth
    if caller.depth >= max_depth:
        raise PermissionError(f"delegation depth {caller.depth + 1} exceeds max_depth "
                              f"{max_depth}")
    return profile.agents[agent]


def check_route(ctx: Context, agent: str, spec: ResolvedAgent) -> None:
    state = (ctx.session.get("route_availability") or {}).get(spec.route)
    if state is not None and not state.get("available", False):
        raise AdmissionError(f"route {spec.route} of agent {agent} is unavailable: "
                             f"{state.get('reason', 'unavailable')}", reason="route_unavailable")


def _task(agent: str, spec: ResolvedAgent, item: SpawnRequest) -> tuple[str, str | None]:
    """The task text to deliver and the literal input's sha256 (low trust only)."""
    if spec.trust == "low":
        if item.mode == "workspace-write":
            raise PermissionError(f"low-trust agent {agent!r} never writes (read-only only)")
        if item.literal_task is None or item.task is not None:
            raise ValueError(f"low-trust agents accept literal_task only (agent {agent!r}); "
                             f"operations: {', '.join(spec.literal_operations)}")
        literal = parse_literal_task(item.literal_task, spec.literal_operations)
        return literal_task_text(literal), input_sha256(literal)
    if item.literal_task is not None:
        raise ValueError(f"literal_task is for low-trust agents; {agent!r} takes a task")
    if not isinstance(item.task, str) or not item.task.strip():
        raise ValueError(f"a task is required to spawn {agent!r}")
    return item.task, None


def _attachments(ctx: Context, agent: str, spec: ResolvedAgent,
                 values: list[str] | None) -> list[str]:
    if not values:
        return []
    if not spec.accepts_images:
        raise ValueError(f"agent {agent!r} does not accept image attachments")
    cwd = Path(ctx.session["cwd"])
    found = []
    for value in values:
        path = (cwd / value).resolve()
        if not path.is_file():
            raise ValueError(f"attachment {value!r} is not a file")
        found.append(str(path))
    return found


def check_item(ctx: Context, item: SpawnRequest) -> Admitted:
    """Every per-item check except scope conflicts and capacity (those need the batch)."""
    spec = _check_authority(ctx, item.agent)
    check_route(ctx, item.agent, spec)
    text, digest = _task(item.agent, spec, item)
    if item.mode == "workspace-write" and spec.permissions == "read-only":
        raise PermissionError(f"agent {item.agent!r} is read-only and cannot take workspace-write")
    admitted = Admitted(agent=item.agent, spec=spec, mode=item.mode, task_text=text,
                        task_kind=item.task_kind, task=item.task, literal_task=item.literal_task,
                        attachments=_attachments(ctx, item.agent, spec, item.attachments),
                        literal_input_sha256=digest)
    if item.mode == "workspace-write":
        cwd = Path(ctx.session["cwd"])
        admitted.write_scope = normalize_write_scopes(cwd, item.write_scopes,
                                                      required=spec.write_scope_required)
        admitted.write_scope_resolved = [str(Path(p).resolve())
                                         for p in resolve_write_scopes(cwd, admitted.write_scope)]
    elif item.write_scopes:
        raise ValueError("write_scopes only apply to mode workspace-write")
    return admitted


def check_conflicts(items: list[Admitted], live: list[dict[str, Any]]) -> None:
    writers = {r["job_id"]: list(r.get("write_scope_resolved") or [])
               for r in live if r.get("mode") == "workspace-write"}
    for index, item in enumerate(items):
        if item.mode != "workspace-write":
            continue
        assert_no_scope_conflicts(item.write_scope_resolved, writers)
        writers[f"(batch item {index})"] = item.write_scope_resolved


def _limit(what: str, used: int, adding: int, limit: int) -> None:
    if used + adding > limit:
        raise AdmissionError(f"active-agent limit reached: {what} allows {limit}, "
                             f"{used} live and {adding} requested", reason="capacity")


def check_capacity(ctx: Context, items: list[Admitted], live: list[dict[str, Any]]) -> None:
    sid, coord = ctx.session["session_id"], ctx.profile.coordination
    mine = [r for r in live if r["session_id"] == sid]
    _limit(f"session {sid} max_active_agents", len(mine), len(items), coord.max_active_agents)
    writers = [i for i in items if i.mode == "workspace-write"]
    if writers:
        _limit(f"session {sid} max_active_writers",
               sum(r.get("mode") == "workspace-write" for r in mine), len(writers),
               coord.max_active_writers)
    for agent in sorted({i.agent for i in items}):
        cap = ctx.profile.agents[agent].max_active
        if cap is not None:
            _limit(f"agent {agent} max_active", sum(r["agent"] == agent for r in mine),
                   sum(i.agent == agent for i in items), cap)
    for key in sorted({i.spec.resource_lock_key for i in items if i.spec.resource_lock_key}):
        used = sum(int(r.get("resource_units") or 1) for r in live
                   if r.get("resource_lock_key") == key)
        adding = sum(i.spec.resource_units for i in items if i.spec.resource_lock_key == key)
        _limit(f"resource pool {key!r} (across sessions)", used, adding,
               pool_capacity(ctx.profile, key))


def pool_capacity(profile: ResolvedProfile, key: str) -> int:
    """Units a shared pool holds: ``resource_pools`` in settings.toml, else the admitting
    profile's ``max_active_agents`` (the spec leaves a pool's size open)."""
    from mmo_kernel.config.settings import load_settings

    return load_settings().resource_pools.get(key, profile.coordination.max_active_agents)


def admit(ctx: Context, requests: list[SpawnRequest]) -> list[Admitted]:
    """Check the whole batch (call under the runtime lock); raises on the first refusal."""
    items = [check_item(ctx, request) for request in requests]
    live = live_jobs()
    check_conflicts(items, live)
    check_capacity(ctx, items, live)
    return items


# Re-admission (``continue`` of a job whose host is gone) reuses these checks.
_check_route = check_route
_check_conflicts = check_conflicts
_check_capacity = check_capacity

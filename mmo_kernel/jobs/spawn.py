"""Spawning: admit a batch, create the jobs, give writers a workspace, launch the hosts.

Creation happens under the same runtime lock as admission, so two spawns
can never both pass a capacity or write-scope check; if creating any item
fails, every item of the batch is removed again. Each job's MCP caller token
is minted at creation: only its hash is recorded (in the record creation
writes, so it is on disk before any host exists), the token itself stays in
this process's memory until the launch hands it to the host through its
environment.

Launching happens after that lock is released, for the whole batch at once:
the session is read and each agent's environment built once per batch, and
the runtime lock is taken once for all of the batch's hosts: each is started
and at once recorded ``running`` with its pid, pgid and start token, and no
other writer (a cancel, the hosts' own first writes) comes in between.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mmo_kernel.hosts.goals import cap_objective
from mmo_kernel.jobs.admission import Admitted, Context, admit, load_context, parse_requests
from mmo_kernel.jobs.literal import literal_contract
from mmo_kernel.jobs.records import (
    job_dir,
    job_execution_host,
    job_file,
    new_job_id,
    public_job,
    read_job_record,
    transition_job,
    update_job,
    write_job_record,
)
from mmo_kernel.mesh.arguments import SpawnRequest
from mmo_kernel.mesh.tokens import mint_token
from mmo_kernel.plugin.drivers import WorkspaceIsolator
from mmo_kernel.plugin.manager import workspace_isolator
from mmo_kernel.profiles.snapshots import snapshot_contract
from mmo_kernel.sessions.env import session_environment
from mmo_kernel.sessions.records import (
    new_record_id,
    read_session_record,
    session_file,
    session_run_id,
    utc_now,
)
from mmo_kernel.state.audit import append_audit
from mmo_kernel.state.files import atomic_write_text, runtime_lock
from mmo_kernel.workspace.patches import WorkspaceHandle

WORKSPACE_DIR = "workspace"

_minted: dict[str, str] = {}
"""Caller tokens minted at creation and not launched yet (job id -> token); memory only."""


def isolator_for(profile: Any) -> WorkspaceIsolator:
    """The session profile's workspace-isolation driver, with its options."""
    coord = profile.coordination
    return workspace_isolator(coord.isolation, options=coord.isolation_options)


def _contract_fields(ctx: Context, item: Admitted) -> dict[str, Any]:
    if item.spec.output_contract is None:
        return {}
    schema = snapshot_contract(ctx.session["snapshot_hash"], item.agent)
    if item.literal_task is not None and item.literal_input_sha256:
        schema = literal_contract(schema, item.literal_task["operation"], item.literal_input_sha256)
    return {"output_contract": schema, "contract_enforcement": item.spec.contract_enforcement,
            "contract_transport": item.spec.contract_transport}


def _goal_fields(item: Admitted) -> dict[str, Any]:
    if item.spec.execution_mode != "goal":
        return {}
    return {"goal_token_budget": item.spec.goal_token_budget,
            "max_goal_token_budget": item.spec.max_goal_token_budget,
            "goal_objective": cap_objective(item.task_text)}


def build_record(ctx: Context, item: Admitted, job_id: str, batch_id: str,
                 extra: Mapping[str, Any]) -> dict[str, Any]:
    """The new job's record: every spec-04 field known at admission (unset ones omitted)."""
    session, caller, spec = ctx.session, ctx.caller, item.spec
    record: dict[str, Any] = {
        "job_id": job_id, "session_id": session["session_id"],
        "run_id": session_run_id(session),
        "profile_id": session["profile_id"], "snapshot_hash": session["snapshot_hash"],
        "agent": item.agent, "caller_agent": caller.agent, "caller_job_id": caller.job_id,
        "depth": caller.depth + 1, "batch_id": batch_id, "status": "queued",
        "task": item.task_text, "task_kind": item.task_kind, "literal_task": item.literal_task,
        "literal_input_sha256": item.literal_input_sha256, "mode": item.mode,
        "write_scope": item.write_scope or None,
        "write_scope_resolved": item.write_scope_resolved or None,
        "attachments": item.attachments or None, "approval_policy": spec.approval_policy,
        "execution_mode": spec.execution_mode, "host": spec.host, "cwd": session["cwd"],
        "control_revision": 0,
        "resource_lock_key": spec.resource_lock_key,
        "resource_units": spec.resource_units if spec.resource_lock_key else None,
        "events_path": str(job_file(job_id, "events.jsonl")),
        "stderr_path": str(job_file(job_id, "stderr.log")),
        "created_at": utc_now(),
        **_goal_fields(item), **_contract_fields(ctx, item), **extra,
    }
    return record


def _prepare_workspace(ctx: Context, item: Admitted, job_id: str) -> dict[str, Any]:
    handle: WorkspaceHandle = isolator_for(ctx.profile).prepare(
        Path(ctx.session["cwd"]), job_dir(job_id) / WORKSPACE_DIR, item.write_scope, job_id)
    return handle.model_dump()


def cleanup_workspace(record: Mapping[str, Any]) -> None:
    """Remove a writer's private workspace through the isolator that made it (idempotent)."""
    data = record.get("workspace")
    if not data:
        return
    handle = WorkspaceHandle.model_validate(data)
    workspace_isolator(handle.isolator).cleanup(handle)


def _create(ctx: Context, item: Admitted, job_id: str, batch_id: str,
            extra: Mapping[str, Any]) -> dict[str, Any]:
    token, token_hash = mint_token()
    record = build_record(ctx, item, job_id, batch_id,
                          {**extra, "mcp_caller_token_hash": token_hash})
    write_job_record(record)
    _minted[job_id] = token
    atomic_write_text(job_file(job_id, "prompt.txt"), item.task_text)
    if item.mode == "workspace-write":
        workspace = _prepare_workspace(ctx, item, job_id)
        record = update_job(job_id, workspace=workspace, cwd=workspace["root"])
    return record


def _discard(job_id: str) -> None:
    _minted.pop(job_id, None)
    try:
        cleanup_workspace(read_job_record(job_id))
    except FileNotFoundError:
        pass
    shutil.rmtree(job_dir(job_id), ignore_errors=True)


def create_batch(ctx: Context, items: list[Admitted],
                 extras: list[Mapping[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Create every admitted job (under the runtime lock); on failure remove them all."""
    batch_id = new_record_id("batch")
    created: list[str] = []
    records = []
    try:
        for index, item in enumerate(items):
            job_id = new_job_id(item.agent)
            created.append(job_id)
            records.append(_create(ctx, item, job_id, batch_id,
                                   extras[index] if extras else {}))
    except BaseException:
        for job_id in created:
            _discard(job_id)
        raise
    return records


class _Launch:
    """What the jobs of one launch share: session records and agent environments."""

    def __init__(self) -> None:
        self.sessions: dict[str, dict[str, Any]] = {}
        self.environments: dict[tuple[str, str], dict[str, str]] = {}

    def session(self, session_id: str) -> dict[str, Any]:
        if session_id not in self.sessions:
            self.sessions[session_id] = read_session_record(session_id)
        return self.sessions[session_id]

    def environment(self, session: dict[str, Any], agent: str,
                    identity: Mapping[str, str]) -> dict[str, str]:
        """The agent's environment plus this job's identity variables (which
        ``session_environment`` applies last, so adding them here is the same)."""
        key = (session["session_id"], agent)
        if key not in self.environments:
            self.environments[key] = session_environment(session, agent)
        return {**self.environments[key], **identity}


def _caller_token(job_id: str) -> str:
    """The token minted when the job was created, or (a job created by another
    process, say) a fresh one whose hash is recorded before any host can use it."""
    token = _minted.pop(job_id, None)
    if token is None:
        token, token_hash = mint_token()
        update_job(job_id, mcp_caller_token_hash=token_hash)
    return token


def _start_host(record: dict[str, Any], session: dict[str, Any],
                shared: _Launch) -> tuple[int, str]:
    """Start the job on the execution host its record names (its agent's ``host``)."""
    job_id = record["job_id"]
    token = _caller_token(job_id)
    host = job_execution_host(record)
    env = shared.environment(session, record["agent"], {
        "MMO_CALLER_JOB_ID": job_id, "MMO_CALLER_TOKEN": token})
    return host.launch_job(job_id, job_file(job_id, "runner.log"), env)


def _launch_all(job_ids: list[str]) -> list[dict[str, Any] | RuntimeError]:
    """Start every job's host and record it ``running``; audit ``agent_started``.

    The runtime lock is held from the first start to the last record, so each
    host's pid, pgid and start token are on record before anything else can
    write (a cancel then finds and kills the host; the host's own first write
    waits for it). A job whose host cannot be started becomes ``failed``
    (holding no capacity); its entry is the ``RuntimeError`` naming the cause.
    """
    shared = _Launch()
    results: dict[str, dict[str, Any] | RuntimeError] = {}
    started: list[tuple[dict[str, Any], dict[str, Any]]] = []
    try:
        with runtime_lock():
            for job_id in job_ids:
                record = read_job_record(job_id)
                session = shared.session(record["session_id"])
                try:
                    pid, start_token = _start_host(record, session, shared)
                except Exception as exc:
                    transition_job(job_id, "failed",
                                   error=f"the job host could not be started: {exc}")
                    error = RuntimeError(
                        f"job {job_id}: the job host could not be started: {exc}")
                    error.__cause__ = exc
                    results[job_id] = error
                    continue
                record = transition_job(job_id, "running", runner_pid=pid, runner_pgid=pid,
                                        runner_start_token=start_token, started_at=utc_now())
                results[job_id] = record
                started.append((record, session))
    finally:
        for record, session in started:
            run_id = str(session_run_id(session) or record["run_id"])
            append_audit(session_file(session["session_id"], "audit.jsonl"), "agent_started",
                         run_id, job_id=record["job_id"], agent=record["agent"],
                         batch_id=record.get("batch_id"),
                         caller_agent=record.get("caller_agent"),
                         caller_job_id=record.get("caller_job_id"), mode=record.get("mode"))
    return [results[job_id] for job_id in job_ids]


def launch(job_id: str) -> dict[str, Any]:
    """Start the job's host detached (with its caller token), record it and audit
    ``agent_started``.

    If the host cannot be started the job becomes ``failed`` (holding no
    capacity) and ``RuntimeError`` names the cause.
    """
    [result] = _launch_all([job_id])
    if isinstance(result, RuntimeError):
        raise result
    return result


def launch_batch(job_ids: list[str]) -> list[dict[str, Any]]:
    """Launch the jobs of a batch; a failed launch is reported in its (failed) record."""
    return [read_job_record(job_id) if isinstance(result, RuntimeError) else result
            for job_id, result in zip(job_ids, _launch_all(job_ids), strict=True)]


def admit_and_create(session_id: str, caller_agent: str, caller_job_id: str | None,
                     requests: list[SpawnRequest],
                     extras: list[Mapping[str, Any]] | None = None) -> list[dict[str, Any]]:
    with runtime_lock():
        ctx = load_context(session_id, caller_agent, caller_job_id)
        return create_batch(ctx, admit(ctx, requests), extras)


def spawn_jobs(specs: list[SpawnRequest | dict[str, Any]], session_id: str, caller_agent: str,
               caller_job_id: str | None = None) -> dict[str, Any]:
    """Admit a batch all-or-nothing and launch it: ``{"atomic": True, "accepted": [...]}``."""
    records = admit_and_create(session_id, caller_agent, caller_job_id, parse_requests(specs))
    return {"atomic": True,
            "accepted": [public_job(r) for r in launch_batch([r["job_id"] for r in records])]}


def spawn_job(session_id: str, caller_agent: str, caller_job_id: str | None, agent_id: str,
              task_kind: str | None = None, task: str | None = None, mode: str = "read-only",
              write_scope_values: list[str] | None = None,
              literal_task: dict[str, Any] | None = None,
              attachments: list[str] | None = None) -> dict[str, Any]:
    """Admit and launch one job named by spec 04's keywords; returns its public record.

    ``agent_id`` and ``write_scope_values`` are the spec's keyword names for the
    request's ``agent`` and ``write_scopes``: the only place the names differ.
    Raises ``RuntimeError`` as ``spawn_request`` does.
    """
    request = {"agent": agent_id, "task_kind": task_kind, "task": task, "mode": mode,
               "write_scopes": write_scope_values, "literal_task": literal_task,
               "attachments": attachments}
    return spawn_request(parse_requests([request])[0], session_id, caller_agent, caller_job_id)


def spawn_request(request: SpawnRequest, session_id: str, caller_agent: str,
                  caller_job_id: str | None = None) -> dict[str, Any]:
    """Admit and launch one job; returns its public record (``job_id``, ``batch_id``, ...).

    Raises ``RuntimeError`` when the admitted job's host could not be started
    (the job is then recorded ``failed``).
    """
    records = admit_and_create(session_id, caller_agent, caller_job_id, [request])
    return public_job(launch(records[0]["job_id"]))

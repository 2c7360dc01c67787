"""Admitting a resume: who may attach, and the home the resumed root will run in (spec 03).

A resume re-admits the root like a new one (a shared resource pool it uses
must have room), but never recompiles: homes are
re-validated against the session's snapshot, and a tainted resume re-renders
the root's home so native delegation is off and the spawn/integrate tools
are gone from its ``mmo_mesh`` server.
"""

from __future__ import annotations

from typing import Any

from mmo_kernel.sessions.records import (
    TERMINAL_SESSION_STATUSES,
    read_run_record,
    run_ids,
    session_dir,
)
from mmo_kernel.sessions.state import client_alive, update_session

TAINTED_REMOVED_TOOLS = ("agent_spawn", "agents_spawn", "agent_patch_integrate")


def interactive_objective(profile_id: str, description: str) -> str:
    """The seeded goal's objective: an interactive root has no prompt, so the objective
    says whose session it is and that the user's prompts set the work (capped)."""
    from mmo_kernel.hosts.goals import cap_objective

    text = (f"Interactive session of profile {profile_id}: work on what the user asks "
            "in the Codex TUI.")
    return cap_objective(f"{text} Team: {description}" if description.strip() else text)


def seed_goal(record: dict[str, Any]) -> dict[str, Any]:
    """A goal-mode interactive root starts with its goal ``paused`` (not a suspension):
    its objective and budget are on record before the user's first prompt."""
    if record.get("root_execution_mode") != "goal":
        return record
    from mmo_kernel.profiles.snapshots import snapshot_profile

    profile = snapshot_profile(record["snapshot_hash"])
    spec = profile.agents[record["root_agent"]]
    fields: dict[str, Any] = {"root_goal_status": "paused", "root_goal_bootstrap_pending": True,
                              "root_goal_objective": interactive_objective(
                                  profile.id, profile.description)}
    if spec.goal_token_budget is not None:
        fields["root_goal_token_budget"] = spec.goal_token_budget
    return update_session(record["session_id"], **fields)


def _check_attachable(record: dict[str, Any], allow_tainted: bool) -> None:
    sid, status = record["session_id"], record["status"]
    if status in TERMINAL_SESSION_STATUSES:
        raise RuntimeError(f"terminal immutable session {sid} ({status}) cannot be resumed")
    if status == "cancelling":
        raise RuntimeError(f"session {sid} is being cancelled; it cannot be resumed")
    if not record.get("root_thread_id"):
        raise RuntimeError(f"session {sid} has no bound root thread to resume")
    if client_alive(record):
        raise RuntimeError(f"session {sid} already has an attached client "
                           f"(pid {record['root_client_pid']}); detach it first")
    if record.get("tainted") and not allow_tainted:
        raise RuntimeError(f"session {sid} is tainted; resume it with --allow-tainted "
                           "(spawning and patch integration stay disabled)")
    runs = run_ids(sid)
    current = record.get("current_run_id")
    if runs != [current]:
        raise RuntimeError(f"session {sid} must have exactly its one active run {current}; "
                           f"found run directories {runs}")
    read_run_record(sid, str(current))  # a truncated or invalid run.json refuses, naming it


def _check_capacity(record: dict[str, Any]) -> None:
    """The root is re-admitted like a new agent against the capacity limits."""
    from mmo_kernel.errors import AdmissionError
    from mmo_kernel.jobs.admission import Admitted, Caller, Context, check_capacity
    from mmo_kernel.jobs.listing import live_jobs
    from mmo_kernel.profiles.snapshots import snapshot_profile

    profile = snapshot_profile(record["snapshot_hash"])
    root = record["root_agent"]
    spec = profile.agents[root]
    ctx = Context(session=record, profile=profile, caller=Caller(agent=root, job_id=None,
                                                                depth=0))
    item = Admitted(agent=root, spec=spec, mode=spec.permissions, task_text="",
                    task_kind=None, task=None, literal_task=None)
    # Workers of this session never count against their own root (create does not
    # count the root either); other sessions' jobs share resource pools with it.
    others = [job for job in live_jobs() if job["session_id"] != record["session_id"]]
    try:
        check_capacity(ctx, [item], others)
    except AdmissionError as exc:
        raise AdmissionError(f"cannot resume session {record['session_id']}: {exc}",
                             reason=exc.reason) from exc


def _verify_homes(record: dict[str, Any]) -> None:
    """Restore edited guidance/skills; a drifted catalog leaves the session suspended."""
    from mmo_kernel.profiles.snapshots import load_snapshot
    from mmo_kernel.sessions.homes import verify_home

    snapshot = load_snapshot(record["snapshot_hash"])
    try:
        for agent, home in (record.get("homes") or {}).items():
            verify_home(snapshot, agent, home)
    except RuntimeError as exc:
        update_session(record["session_id"], status="suspended",
                       resume_error=f"home validation failed: {exc}")
        raise


def render_tainted_root_home(record: dict[str, Any]) -> dict[str, Any]:
    """Re-render the root's home with ``tainted=True`` and record it."""
    from mmo_kernel.config.settings import load_settings
    from mmo_kernel.mesh.capabilities import read_capabilities
    from mmo_kernel.profiles.snapshots import load_snapshot
    from mmo_kernel.sessions.homes import HomeContext, materialize_home
    from mmo_kernel.tools.servers import load_tool_servers

    sid, root = record["session_id"], record["root_agent"]
    settings = load_settings()
    caps = read_capabilities(session_dir(sid))
    ctx = HomeContext(session_id=sid, run_id=record["current_run_id"],
                      gateway_url=record.get("gateway_url") or "", tainted=True,
                      auth_link_mode=settings.auth_link_mode,
                      lifecycle_timeout_seconds=settings.app_server_lifecycle_timeout_seconds,
                      tool_servers=load_tool_servers(),
                      native_tokens=dict(caps.native_agent_tokens),
                      route_faults=dict(record.get("route_faults") or {}))
    home = materialize_home(load_snapshot(record["snapshot_hash"]), root,
                            session_dir(sid) / "homes" / root, ctx)
    homes = {**(record.get("homes") or {}), root: home}
    return update_session(sid, homes=homes)


def admit_resume(record: dict[str, Any], allow_tainted: bool) -> dict[str, Any]:
    """Every refusal first (nothing changes), then the home checks; the record to resume."""
    _check_attachable(record, allow_tainted)
    _check_capacity(record)
    _verify_homes(record)
    if record.get("tainted"):
        record = render_tainted_root_home(record)
    return record


__all__ = ["TAINTED_REMOVED_TOOLS", "admit_resume", "render_tainted_root_home", "seed_goal"]

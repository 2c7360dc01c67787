"""The one import users, tests and the MCP server use (spec 01 "Public Python API").

Every name here is re-exported from the kernel module that holds it. The
module is imported lazily by the mesh, so keep it free of side effects.

``load_job``/``list_jobs``/``load_session``/``iter_sessions`` reconcile (and may write);
the ``peek_*`` reads report what they would show and write nothing, for viewers that
refresh every second (``mmo top``, ``mmo ui``).
"""

from __future__ import annotations

from mmo_kernel import package_version
from mmo_kernel.errors import AdmissionError, ControlDeliveryUnknown
from mmo_kernel.gateway.listing import gateway_models
from mmo_kernel.gateway.telemetry import route_telemetry
from mmo_kernel.hosts.control_socket import app_server_socket_path, send_control_request
from mmo_kernel.hosts.turn_failures import normalize_turn_failure
from mmo_kernel.jobs.cancel import cancel_job
from mmo_kernel.jobs.controls import control_job, inspect_job
from mmo_kernel.jobs.fork import fork_job
from mmo_kernel.jobs.listing import list_jobs, load_job
from mmo_kernel.jobs.peek import peek_job, peek_job_record, peek_jobs
from mmo_kernel.jobs.records import TERMINAL_JOB_STATUSES, job_dir, public_job
from mmo_kernel.jobs.results import accept_result, read_result, reject_result
from mmo_kernel.jobs.session_end import finish_session
from mmo_kernel.jobs.spawn import spawn_job, spawn_jobs, spawn_request
from mmo_kernel.jobs.traces import read_agent_trace_record, read_trace
from mmo_kernel.jobs.waiting import wait_for_jobs
from mmo_kernel.jobs.workspace import integrate_patch
from mmo_kernel.lifecycle.controls import (
    cancel_session,
    compact_session,
    continue_session,
    detach_session,
    load_session,
    pause_session,
    stop_session,
)
from mmo_kernel.lifecycle.interactive import (
    begin_resume_run,
    launch_interactive,
    resolve_resume_session,
    resume_interactive,
)
from mmo_kernel.lifecycle.root_exec import run_root_exec
from mmo_kernel.lifecycle.smoke import smoke_profile
from mmo_kernel.lifecycle.views import (
    iter_session_runs,
    iter_sessions,
    load_session_run,
    public_session,
    root_mcp_token,
)
from mmo_kernel.mesh.surface import AGENT_MCP_CONTROL_TOOLS
from mmo_kernel.profiles.loading import clone_profile, load_profile, validate_profile
from mmo_kernel.profiles.schema import (
    PROFILE_SKILL_NAME,
    PROFILE_SKILL_RELATIVE_PATH,
    agent_guidance_relative_path,
)
from mmo_kernel.profiles.snapshots import compile_profile, load_snapshot
from mmo_kernel.sessions.create import create_session
from mmo_kernel.sessions.env import session_environment
from mmo_kernel.sessions.peek import peek_session, peek_session_record, peek_sessions
from mmo_kernel.sessions.records import TERMINAL_SESSION_STATUSES, iter_session_records, session_dir
from mmo_kernel.sessions.retention import clean_state as _clean_state
from mmo_kernel.sessions.state import (
    mark_session_running,
    taint_session,
    update_session,
)
from mmo_kernel.state.actor import ACTOR_KINDS, acting_as, current_actor, login_name
from mmo_kernel.state.files import MMO_SCHEMA_VERSION
from mmo_kernel.state.processes import process_matches, process_start_token


def clean_state(job_days: float, session_days: float) -> dict[str, int]:
    """Remove expired terminal jobs (and their worktrees) and sessions."""
    from mmo_kernel.jobs.workspace import job_workspace_cleanup

    return _clean_state(job_days, session_days, job_cleanup=job_workspace_cleanup)


__all__ = [
    "ACTOR_KINDS", "acting_as", "current_actor", "login_name",
    "AGENT_MCP_CONTROL_TOOLS", "AdmissionError", "ControlDeliveryUnknown", "MMO_SCHEMA_VERSION",
    "PROFILE_SKILL_NAME", "PROFILE_SKILL_RELATIVE_PATH", "TERMINAL_JOB_STATUSES",
    "TERMINAL_SESSION_STATUSES", "accept_result", "agent_guidance_relative_path",
    "app_server_socket_path", "begin_resume_run", "cancel_job", "cancel_session", "clean_state",
    "clone_profile", "compact_session", "compile_profile", "continue_session", "control_job",
    "create_session", "detach_session", "finish_session", "fork_job", "gateway_models",
    "inspect_job", "integrate_patch", "iter_session_records", "iter_session_runs",
    "iter_sessions", "job_dir", "launch_interactive", "list_jobs", "load_job", "load_profile",
    "load_session", "load_session_run", "load_snapshot", "mark_session_running",
    "normalize_turn_failure", "package_version", "pause_session", "peek_job",
    "peek_job_record", "peek_jobs", "peek_session", "peek_session_record", "peek_sessions",
    "process_matches",
    "process_start_token", "public_job", "public_session", "read_agent_trace_record",
    "read_result", "read_trace", "reject_result", "resolve_resume_session",
    "resume_interactive", "root_mcp_token", "route_telemetry", "run_root_exec",
    "send_control_request", "session_dir", "session_environment", "smoke_profile", "spawn_job",
    "spawn_jobs", "spawn_request", "stop_session", "taint_session", "update_session",
    "validate_profile", "wait_for_jobs",
]

"""Controlling a worker job: authority, revisions, delivery to its host, recovery (spec 04).

Every mutating control names the job's ``control_revision`` and moves it by
one. Controls on one job are serialized end to end by a lock file in the job
dir held through delivery and recording. Before sending, the new revision is
recorded as ``pending``; a host that applies the request acknowledges exactly
that revision (``applied``). Nothing delivered: everything is put back. Reply
lost: ``delivery_unknown``, the revision stays consumed. Refused by the host:
``failed``, consumed. A suspended or paused job whose host is gone is
re-admitted and relaunched on its thread (``continue``, ``finalize``) or
terminalized (``stop``) here, without a host.
"""

from __future__ import annotations

from typing import Any

from mmo_kernel.errors import ControlDeliveryUnknown
from mmo_kernel.hosts.control_actions import JOB_CONTROL_ACTIONS
from mmo_kernel.hosts.control_socket import (
    ControlNotDelivered,
    ControlRequestRejected,
    app_server_socket_path,
    send_control_request,
)
from mmo_kernel.jobs.authority import check_caller_job, load_session_job, require_authority
from mmo_kernel.jobs.control_lock import job_control_lock
from mmo_kernel.jobs.listing import host_answers, load_job, retire_hosts, write_job_partial
from mmo_kernel.jobs.records import (
    HOST_IDENTITY_FIELDS,
    TERMINAL_JOB_STATUSES,
    control_revision,
    job_execution_host,
    job_file,
    public_job,
    read_job_record,
    transition_job,
    update_job,
    write_job_record,
)
from mmo_kernel.sessions.records import (
    TERMINAL_SESSION_STATUSES,
    read_session_record,
    session_file,
    session_run_id,
)
from mmo_kernel.state.audit import append_audit
from mmo_kernel.state.files import runtime_lock
from mmo_kernel.state.records import is_exact_int

CONTROL_ACTIONS = JOB_CONTROL_ACTIONS
OFFLINE_ACTIONS = frozenset({"continue", "finalize", "stop", "set_effort"})
"""Actions that still apply when the job's host is gone."""
RELAUNCH_STATUSES = frozenset({"suspended", "paused"})
DELIVERY_TIMEOUT = 30.0
INSPECT_TIMEOUT = 5.0
FINALIZE_INSTRUCTION = ("Finalize now: stop exploring and return your final result for the "
                        "task (in the required output format, if one was given).")


# -------------------------------------------------------------- authority --


def _profile(session: dict[str, Any]) -> Any:
    from mmo_kernel.profiles.snapshots import snapshot_profile

    return snapshot_profile(session["snapshot_hash"])


def granted(session: dict[str, Any], caller_agent: str | None, target_agent: str,
            action: str) -> bool:
    """True when the caller agent's ``controls`` grant names ``action`` on ``target_agent``."""
    if caller_agent is None:
        return False
    spec = _profile(session).agents.get(caller_agent)
    grant = spec.controls.get(target_agent) if spec is not None else None
    return grant is not None and action in grant.actions


def require_control(record: dict[str, Any], session: dict[str, Any], caller_agent: str | None,
                    caller_job_id: str | None, action: str) -> None:
    """Root, ancestors, or a sibling whose profile ``controls`` grant names this action."""
    grants = (action,) if (caller_job_id != record["job_id"]
                           and granted(session, caller_agent, record["agent"], action)) else ()
    require_authority(session, record, caller_agent, caller_job_id, action, grants)


# ------------------------------------------------------------- arguments --


def _allowed_efforts(session: dict[str, Any], agent: str) -> list[str]:
    spec = _profile(session).agents[agent]
    allowed = list(spec.allowed_reasoning_efforts)
    return allowed or ([spec.reasoning] if spec.reasoning else [])


def check_arguments(action: str, session: dict[str, Any], record: dict[str, Any],
                    input: Any, effort: Any, request_id: Any, response: Any) -> None:
    """Refuse bad arguments before anything is delivered (``ValueError``)."""
    if action not in CONTROL_ACTIONS:
        raise ValueError(f"control action must be one of {', '.join(CONTROL_ACTIONS)}, "
                         f"got {action!r}")
    if input is not None and not isinstance(input, str):
        raise ValueError("input must be a string")
    if action == "steer" and not (isinstance(input, str) and input.strip()):
        raise ValueError("steer needs a non-empty input")
    if action == "set_effort":
        allowed = _allowed_efforts(session, record["agent"])
        if effort not in allowed:
            raise ValueError(f"effort must be one of {', '.join(allowed) or '(none)'} for agent "
                             f"{record['agent']!r}, got {effort!r}")
    if action == "respond":
        if request_id is None or isinstance(request_id, bool) or not isinstance(
                request_id, (str, int)):
            raise ValueError("respond needs the request_id of a pending request (string or int)")
        if not isinstance(response, dict):
            raise RuntimeError("invalid fields: respond needs a response object, e.g. "
                               '{"decision": "accept"} or {"answers": {...}}')


def _check_revision(record: dict[str, Any], expected_revision: Any) -> int:
    current = control_revision(record)
    if not is_exact_int(expected_revision):
        raise ValueError(f"expected_revision must be an integer, got {expected_revision!r}")
    if expected_revision != current:
        raise RuntimeError(f"stale control revision: expected_revision {expected_revision} but "
                           f"job {record['job_id']} is at revision {current}; inspect it again")
    return current


# --------------------------------------------------------------- delivery --


def socket_path(record: dict[str, Any]) -> str:
    return record.get("control_socket_path") or str(
        app_server_socket_path(f"control:job:{record['job_id']}"))


def _restore(job_id: str, revision: int, before: dict[str, Any]) -> None:
    """Undo the pending marker of a control that never reached the host."""
    with runtime_lock():
        record = read_job_record(job_id)
        if record.get("control_revision") != revision + 1:
            return
        for key in ("control_revision", "last_control_action", "last_control_status",
                    "progress_revision"):
            if before.get(key) is None:
                record.pop(key, None)
            else:
                record[key] = before[key]
        write_job_record(record)


def _rejection(exc: ControlRequestRejected) -> Exception:
    kinds = {"ValueError": ValueError, "PermissionError": PermissionError,
             "FileNotFoundError": FileNotFoundError}
    return kinds.get(exc.kind, RuntimeError)(str(exc))


def deliver(record: dict[str, Any], action: str, revision: int,
            fields: dict[str, Any]) -> Any:
    """Send one control to the job's live host and record the outcome; returns its result."""
    job_id = record["job_id"]
    before = {k: record.get(k) for k in ("control_revision", "last_control_action",
                                          "last_control_status", "progress_revision")}
    update_job(job_id, control_revision=revision + 1, last_control_action=action,
               last_control_status="pending", last_control_error=None)
    request = {"action": action, "expected_revision": revision, "revision": revision + 1,
               **{k: v for k, v in fields.items() if v is not None}}
    try:
        reply = send_control_request(socket_path(record), request, timeout=DELIVERY_TIMEOUT)
    except ControlNotDelivered as exc:
        _restore(job_id, revision, before)
        raise RuntimeError(f"control {action!r} for job {job_id} was not delivered (its host is "
                           f"not listening); nothing changed: {exc}") from None
    except ControlDeliveryUnknown:
        update_job(job_id, last_control_status="delivery_unknown")
        raise
    except ControlRequestRejected as exc:
        update_job(job_id, last_control_status="failed", last_control_error=str(exc))
        raise _rejection(exc) from None
    _acknowledge(job_id, revision + 1)
    return reply.get("result")


def _acknowledge(job_id: str, revision: int) -> None:
    """``pending`` -> ``applied`` only for exactly this revision (a host may have done it)."""
    with runtime_lock():
        record = read_job_record(job_id)
        if (record.get("control_revision") == revision
                and record.get("last_control_status") == "pending"):
            update_job(job_id, last_control_status="applied")


# -------------------------------------------------------- host-less paths --


def _readmit(record: dict[str, Any], session: dict[str, Any]) -> None:
    """Capacity, route and cross-session write-scope checks for a relaunch (under the lock)."""
    from mmo_kernel.jobs import admission
    from mmo_kernel.jobs.listing import live_jobs

    if session["status"] in TERMINAL_SESSION_STATUSES:
        raise RuntimeError(f"terminal immutable session {session['session_id']} "
                           f"({session['status']}) cannot continue job {record['job_id']}")
    profile = _profile(session)
    spec = profile.agents[record["agent"]]
    ctx = admission.Context(session, profile, admission.Caller(session["root_agent"], None, 0))
    admission._check_route(ctx, record["agent"], spec)
    item = admission.Admitted(
        agent=record["agent"], spec=spec, mode=record.get("mode") or "read-only",
        task_text=record.get("task") or "", task_kind=record.get("task_kind"),
        task=record.get("task"), literal_task=record.get("literal_task"),
        write_scope=list(record.get("write_scope") or []),
        write_scope_resolved=list(record.get("write_scope_resolved") or []))
    live = [r for r in live_jobs() if r["job_id"] != record["job_id"]]
    admission._check_conflicts([item], live)
    admission._check_capacity(ctx, [item], live)


def _relaunch(record: dict[str, Any], session: dict[str, Any], action: str, revision: int,
              input: str | None, effort: str | None) -> dict[str, Any]:
    """Re-admit and start a new host on the job's thread with a ``resume_request``.

    The job goes back to the execution host its record names (a record from before
    jobs recorded their host gets its agent's profile host written down now).
    """
    from mmo_kernel.gateway.process import revive_gateway
    from mmo_kernel.mesh.tokens import mint_token
    from mmo_kernel.sessions.env import session_environment

    job_id = record["job_id"]
    revive_gateway()  # an idle gateway may have exited: the agent's url must answer again
    with runtime_lock():
        _readmit(record, session)
        host = job_execution_host(record)
        token, token_hash = mint_token()
        request = {"action": action, "revision": revision + 1, "input": input,
                   "instruction": FINALIZE_INSTRUCTION if action == "finalize" else None,
                   "effort": effort}
        update_job(job_id, control_revision=revision + 1, last_control_action=action,
                   last_control_status="pending", mcp_caller_token_hash=token_hash,
                   host=host.name,
                   resume_request={k: v for k, v in request.items() if v is not None},
                   recovery_error=None, **{name: None for name in HOST_IDENTITY_FIELDS})
        env = session_environment(session, record["agent"], identity={
            "MMO_CALLER_JOB_ID": job_id, "MMO_CALLER_TOKEN": token})
        try:
            pid, start_token = host.launch_job(job_id, job_file(job_id, "runner.log"), env)
        except Exception as exc:
            update_job(job_id, last_control_status="failed",
                       recovery_error=f"the job host could not be relaunched: {exc}")
            raise RuntimeError(f"job {job_id}: the job host could not be relaunched: {exc}") \
                from exc
        transition_job(job_id, "running", runner_pid=pid, runner_pgid=pid,
                       runner_start_token=start_token, last_control_status="applied")
    run_id = session_run_id(session) or record.get("run_id")
    append_audit(session_file(session["session_id"], "audit.jsonl"), "agent_resumed",
                 str(run_id), job_id=job_id, agent=record["agent"], action=action,
                 control_revision=revision + 1)
    if action == "finalize":
        return {"action": "finalize", "recovery_requested": True}
    return {"action": "continue", "recovery_requested": True}


def _stop_cold(record: dict[str, Any], revision: int) -> dict[str, Any]:
    """Terminalize a host-less job as ``stopped``, keeping its partial evidence."""
    job_id = record["job_id"]
    retire_hosts(record)
    fields: dict[str, Any] = {name: None for name in HOST_IDENTITY_FIELDS}
    if record.get("result_kind") != "final":
        fields["result_kind"] = "partial"
        fields["partial_result_path"] = write_job_partial(
            job_id, "The job was stopped while it had no running host; this is the evidence "
            "it left.", keep_existing=True)
    transition_job(job_id, "stopped", control_revision=revision + 1, last_control_action="stop",
                   last_control_status="applied", **fields)
    return {"action": "stop", "stopped": True}


def _offline(record: dict[str, Any], session: dict[str, Any], action: str, revision: int,
             input: str | None, effort: str | None) -> Any:
    status = record["status"]
    if action == "set_effort":
        update_job(record["job_id"], reasoning_effort=effort, control_revision=revision + 1,
                   last_control_action=action, last_control_status="applied")
        return {"effort": effort, "applies_to": "next turn"}
    if action == "stop":
        return _stop_cold(record, revision)
    if action == "finalize" and status != "suspended":
        raise RuntimeError(f"finalize without a running host applies to a suspended job; job "
                           f"{record['job_id']} is {status} (use continue)")
    if status not in RELAUNCH_STATUSES:
        raise RuntimeError(f"job {record['job_id']} is {status} and has no running host; "
                           f"{action} is not possible now")
    return _relaunch(record, session, action, revision, input, effort)


# -------------------------------------------------------------------- API --


def control_job(job_id: str, action: str, session_id: str, caller_agent: str | None,
                expected_revision: int, caller_job_id: str | None = None,
                input: str | None = None, effort: str | None = None,
                request_id: str | int | None = None,
                response: dict[str, Any] | None = None) -> dict[str, Any]:
    """Apply one control; returns ``{"control_revision", "result", "job"}``."""
    session = read_session_record(session_id)
    record = load_session_job(job_id, session_id)
    check_arguments(action, session, record, input, effort, request_id, response)
    require_control(record, session, caller_agent, caller_job_id, action)
    with job_control_lock(job_id):
        record = load_job(job_id)
        revision = _check_revision(record, expected_revision)
        if record["status"] in TERMINAL_JOB_STATUSES:
            raise RuntimeError(f"job {job_id} is {record['status']}; a finished job takes no "
                               "controls")
        if host_answers(record):
            if not record.get("control_socket_ready"):
                raise RuntimeError(f"job {job_id}'s host is still starting (control socket not "
                                   "ready); nothing changed, retry shortly")
            result = deliver(record, action, revision, {
                "input": input, "effort": effort, "request_id": request_id,
                "response": response})
        elif action in OFFLINE_ACTIONS:
            result = _offline(record, session, action, revision, input, effort)
        else:
            raise RuntimeError(f"job {job_id} has no running host (status {record['status']}); "
                               f"{action} needs one; nothing changed (continue relaunches it)")
        job = read_job_record(job_id)
    return {"control_revision": control_revision(job), "result": result,
            "job": public_job(job)}


def _live_view(record: dict[str, Any]) -> dict[str, Any] | None:
    if not (host_answers(record) and record.get("control_socket_ready")):
        return None
    try:
        reply = send_control_request(socket_path(record), {"action": "inspect"},
                                     timeout=INSPECT_TIMEOUT)
    except (ControlNotDelivered, ControlDeliveryUnknown, ControlRequestRejected):
        return None
    result = reply.get("result")
    live: dict[str, Any] = result if isinstance(result, dict) else {}
    return {
        "thread_id": live.get("thread_id", record.get("app_server_thread_id")),
        "active_turn_id": live.get("active_turn_id"),
        "pending_requests": list(live.get("pending_requests") or []),
        "control_revision": live.get("control_revision", control_revision(record)),
    }


def inspect_job(job_id: str, session_id: str, caller_agent: str | None = None,
                caller_job_id: str | None = None) -> dict[str, Any]:
    """``{"job": public record, "live": {...} | None}`` (``live`` is None without a host)."""
    session = read_session_record(session_id)
    record = load_session_job(job_id, session_id)
    check_caller_job(session, caller_agent, caller_job_id)
    require_control(record, session, caller_agent, caller_job_id, "inspect")
    record = load_job(job_id)
    return {"job": public_job(record), "live": _live_view(record)}


__all__ = ["CONTROL_ACTIONS", "FINALIZE_INSTRUCTION", "control_job", "granted", "inspect_job",
           "require_control"]

"""Lifecycle controls of a session: detach, pause, continue, compact, stop, cancel (spec 03).

Every change serializes on the session's ``lifecycle.lock``. ``cancel_session``
makes ``cancelling`` visible at once, even while another process holds that
lock; ``stop_session`` changes nothing until it holds it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import psutil

from mmo_kernel.errors import StateError
from mmo_kernel.hosts.control_socket import ControlDeliveryUnknown, send_control_request
from mmo_kernel.hosts.evidence import write_partial
from mmo_kernel.sessions.records import (
    TERMINAL_SESSION_STATUSES,
    read_run_record,
    read_session_record,
    run_ids,
    session_dir,
    session_file,
    session_run_id,
)
from mmo_kernel.sessions.state import (
    HOST_FIELDS,
    REMOVE,
    apply_verdict,
    cold_pause_fields,
    relaunch_clears,
    session_verdict,
    transition,
    update_session,
)
from mmo_kernel.state.audit import append_audit
from mmo_kernel.state.files import LockBusy, lifecycle_lock, runtime_lock
from mmo_kernel.state.processes import kill_processes, process_matches, terminate_process_groups

HOST_EXIT_POLL = 0.05
PAUSE_GRACE_SECONDS = 10.0


def _audit(record: dict[str, Any], event: str, **fields: Any) -> None:
    run_id = session_run_id(record) or ""
    append_audit(session_file(record["session_id"], "audit.jsonl"), event, run_id, **fields)


def load_session(session_id: str) -> dict[str, Any]:
    """The session record, reconciled with the processes that really exist: the verdict
    ``peek_session`` reports, carried out."""
    record = read_session_record(session_id)
    verdict = session_verdict(record)
    if verdict is None:
        return record
    if verdict.case == "cold_pause":
        return _finish_cold_pause(record)
    return apply_verdict(record, verdict)


def _require_run(record: dict[str, Any]) -> dict[str, Any]:
    """The session's run record, read before a control changes anything: a truncated or
    invalid ``run.json`` refuses the control (naming the file) with nothing changed."""
    run_id = session_run_id(record)
    if not run_id:
        raise RuntimeError(f"session {record['session_id']} names no run")
    return read_run_record(record["session_id"], run_id)


def _host_alive(record: dict[str, Any]) -> bool:
    return process_matches(record.get("root_pid"), record.get("root_start_token"))


def _root_groups(record: dict[str, Any]) -> list[int]:
    groups = []
    for key, token_key in (("root_pgid", "root_start_token"),
                           ("root_app_server_pgid", "root_app_server_start_token")):
        pid_key = key.replace("pgid", "pid")
        if isinstance(record.get(key), int) and process_matches(record.get(pid_key),
                                                                record.get(token_key)):
            groups.append(record[key])
    return groups


def _host_children(record: dict[str, Any]) -> list[psutil.Process]:
    """What a live root host started, recorded or not (its own groups, e.g. an app-server)."""
    if not _host_alive(record):
        return []
    try:
        return psutil.Process(record["root_pid"]).children(recursive=True)
    except psutil.Error:
        return []


def _retire_root(record: dict[str, Any], grace_seconds: float) -> None:
    """Terminate the root host and app-server groups MMO launched (never a client's).

    A host still bootstrapping may have started an app-server it has not
    recorded yet (a listening one would outlive the host): the host's children
    are collected first and killed after the groups, and the record, final
    once the host is dead, is read again.
    """
    children = _host_children(record)
    groups = _root_groups(record)
    if groups:
        terminate_process_groups(groups, grace_seconds)
    late = [g for g in _root_groups(read_session_record(record["session_id"]))
            if g not in groups]
    if late:
        terminate_process_groups(late, grace_seconds)
    kill_processes(children)


def _control(record: dict[str, Any], action: str, **fields: Any) -> dict[str, Any] | None:
    """One control exchange with the live root host; ``None`` when no host listens."""
    path = record.get("root_control_socket")
    if not path or not record.get("root_control_socket_ready") or not _host_alive(record):
        return None
    inspect = send_control_request(path, {"action": "inspect"})["result"]
    request = {"action": action, "expected_revision": inspect["control_revision"], **fields}
    return send_control_request(path, request)["result"]


def _wait_host_exit(record: dict[str, Any], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _host_alive(record):
            return True
        time.sleep(HOST_EXIT_POLL)
    return not _host_alive(record)


def _live_jobs(session_id: str) -> list[dict[str, Any]]:
    from mmo_kernel.sessions.retention import TERMINAL_JOB_STATUSES

    try:
        from mmo_kernel.jobs.listing import list_jobs
    except ImportError:  # the jobs layer is not installed in this build
        return []
    return [j for j in list_jobs(session_id) if j["status"] not in TERMINAL_JOB_STATUSES]


def _refuse_external(record: dict[str, Any], verb: str) -> None:
    """An ``external`` session's root seat is an MCP host's, through ``mmo runner``: no
    root host of MMO's can be paused, detached, continued or compacted."""
    if record.get("session_kind") == "external":
        raise RuntimeError(
            f"session {record['session_id']} is an external project session (spec 12): its "
            f"lead works through mmo serve and cannot be {verb} here; stop ends it")


# --------------------------------------------------------------- detach ---


def detach_session(session_id: str) -> dict[str, Any]:
    """Release an attached client; the host keeps working (no-op when already detached)."""
    with lifecycle_lock(session_dir(session_id)):
        record = load_session(session_id)
        _refuse_external(record, "detached")
        if record["status"] == "detached":
            return {"session": record}
        if record["status"] in TERMINAL_SESSION_STATUSES:
            raise RuntimeError(f"terminal immutable session {session_id} cannot be detached")
        if not record.get("root_thread_id"):
            raise RuntimeError(
                f"session {session_id} cannot be detached before the persistent root thread "
                "exists")
        _require_run(record)
        status = "suspended" if record.get("failure") and not _host_alive(record) else "detached"
        if record.get("failure") and record.get("session_kind") == "interactive":
            status = "suspended"
        record = update_session(session_id, status=status, root_client_pid=REMOVE,
                                root_client_start_token=REMOVE)
        return {"session": record}


# ---------------------------------------------------------------- pause ---


def _finish_cold_pause(record: dict[str, Any]) -> dict[str, Any]:
    """Complete a cold pause (also one interrupted by a crash): hosts gone, partial kept."""
    sid = record["session_id"]
    _retire_root(record, grace_seconds=2.0)
    current = read_session_record(sid)
    if current["status"] in TERMINAL_SESSION_STATUSES:
        return current
    fields = cold_pause_fields(sid)
    write_partial(Path(fields["partial_result_path"]), session_file(sid, "root-events.jsonl"),
                  "session cold-paused")
    return update_session(sid, status="paused", **fields)


def pause_session(session_id: str) -> dict[str, Any]:
    """Cold pause: ask the root and live workers to pause, retire their hosts, keep partials."""
    with lifecycle_lock(session_dir(session_id)):
        record = load_session(session_id)
        _refuse_external(record, "paused")
        if record["status"] in TERMINAL_SESSION_STATUSES or not record.get("root_thread_id"):
            raise RuntimeError(f"cannot pause session from status {record['status']}"
                               + ("" if record.get("root_thread_id")
                                  else " (no durable root thread yet)"))
        _require_run(record)
        record = update_session(session_id, cold_pause_pending=True)
        affected = _pause_jobs(session_id)
        try:
            _control(record, "pause")
        except (ControlDeliveryUnknown, RuntimeError):
            pass  # the host is retired below either way
        _wait_host_exit(record, PAUSE_GRACE_SECONDS)
        record = _finish_cold_pause(read_session_record(session_id))
        if record["status"] == "paused":
            record = update_session(session_id, paused_job_ids=affected)
        return {"session": record, "affected_jobs": affected}


def _pause_jobs(session_id: str) -> list[str]:
    """Ask every live worker to pause, then retire whatever did not pause in time.

    A worker that reaches a terminal status meanwhile stays terminal and is not listed.
    """
    from mmo_kernel.jobs.controls import control_job
    from mmo_kernel.jobs.listing import load_job, retire_hosts, write_job_partial
    from mmo_kernel.jobs.records import HOST_IDENTITY_FIELDS, TERMINAL_JOB_STATUSES, update_job

    root = read_session_record(session_id)["root_agent"]
    asked = []
    for job in _live_jobs(session_id):
        update_job(job["job_id"], cold_pause_pending=True)
        try:
            control_job(job["job_id"], "pause", session_id, root,
                        expected_revision=job.get("control_revision", 0))
        except (RuntimeError, PermissionError, ValueError):
            pass  # no live host to ask: retired below
        asked.append(job["job_id"])
    deadline = time.monotonic() + PAUSE_GRACE_SECONDS
    paused = []
    for job_id in asked:
        while (load_job(job_id)["status"] not in ("paused", *TERMINAL_JOB_STATUSES)
               and time.monotonic() < deadline):
            time.sleep(HOST_EXIT_POLL)
        record = load_job(job_id)
        if record["status"] in TERMINAL_JOB_STATUSES:
            continue
        retire_hosts(record)
        if record["status"] != "paused":
            write_job_partial(job_id, "job cold-paused with its session")
            update_job(job_id, status="paused", cold_pause_pending=None,
                       **{field: None for field in HOST_IDENTITY_FIELDS})
        paused.append(job_id)
    return paused


# ------------------------------------------------------------- continue ---


def _verify_homes(record: dict[str, Any]) -> None:
    from mmo_kernel.profiles.snapshots import load_snapshot
    from mmo_kernel.sessions.homes import verify_home

    snapshot = load_snapshot(record["snapshot_hash"])
    for agent, home in (record.get("homes") or {}).items():
        verify_home(snapshot, agent, home)


def _root_launcher(record: dict[str, Any]) -> Any:
    """The execution host that launches the session's root, from its profile snapshot
    (loaded and verified: a missing or corrupt snapshot refuses the control)."""
    from mmo_kernel.plugin.manager import execution_host
    from mmo_kernel.profiles.snapshots import snapshot_profile

    agents = snapshot_profile(record["snapshot_hash"]).agents
    if record["root_agent"] not in agents:
        raise RuntimeError(f"session {record['session_id']}: root agent "
                           f"{record['root_agent']!r} is not in its profile snapshot")
    return execution_host(agents[record["root_agent"]].host)


def _first_turn_pending(record: dict[str, Any]) -> bool:
    """The root never started a turn: a continue delivers the recorded prompt."""
    return not record.get("root_thread_id") or not record.get("root_last_turn_id")


def _check_continue(record: dict[str, Any], input_text: str | None) -> Any:
    """Every refusal of ``continue_session`` before anything changes; returns the host.

    A root whose host died before its first turn (no root thread yet) is continued
    from the recorded prompt (``root-prompt.txt``); an interactive root has none.
    """
    from mmo_kernel.mesh.capabilities import CapabilityUnavailable, read_capabilities

    sid, status = record["session_id"], record["status"]
    if status in TERMINAL_SESSION_STATUSES:
        raise RuntimeError(f"terminal immutable session {sid} cannot be continued")
    _refuse_external(record, "continued")
    if status == "cancelling":
        raise RuntimeError(f"session {sid} is being cancelled; it cannot be continued")
    if _host_alive(record):
        raise RuntimeError(f"session {sid} already has a live root host")
    prompt = session_file(sid, "root-prompt.txt")
    if not record.get("root_thread_id") and (record.get("session_kind") == "interactive"
                                             or not prompt.is_file()):
        raise RuntimeError(f"session {sid} has no root thread to continue")
    if _first_turn_pending(record) and prompt.is_file() and input_text:
        raise RuntimeError(f"session {sid} has not started its first turn: continue it "
                           "without an input to deliver its recorded prompt")
    run = _require_run(record)
    if run_ids(sid) != [run["run_id"]] or record.get("current_run_id") != run["run_id"]:
        raise RuntimeError(f"session {sid} must have exactly its one active run "
                           f"{record.get('current_run_id')}; found run directories "
                           f"{run_ids(sid)}")
    try:
        read_capabilities(session_dir(sid))
    except CapabilityUnavailable as exc:
        raise RuntimeError(f"session {sid}: root {exc}") from None
    return _root_launcher(record)


def relaunch_root(record: dict[str, Any], input_text: str | None,
                  host: Any = None) -> dict[str, Any]:
    """Start a new root host on the same thread (after pause, suspension or host loss).

    The caller made sure the old host is gone; an app-server it left alive is
    adopted by the new host, with whatever turn it is still running. A root with no
    turn yet starts from its recorded prompt. If the launch fails, the fields written
    for it are put back.
    """
    sid = record["session_id"]
    host = host or _root_launcher(record)
    try:
        _verify_homes(record)
    except RuntimeError as exc:
        update_session(sid, status="suspended", resume_error=f"home validation failed: {exc}")
        raise
    fields = relaunch_clears(record)
    fields.update(failure=REMOVE, resume_error=REMOVE, error=REMOVE,
                  root_continue_input=input_text or "Continue.")
    update_session(sid, **fields)
    try:
        from mmo_kernel.gateway.process import revive_gateway

        revive_gateway()  # an idle gateway may have exited: the agents' url must answer
        pid, token = host.launch_root(sid, session_file(sid, "root-host.log"),
                                      dict(os.environ))
    except BaseException:
        update_session(sid, **{k: record.get(k, REMOVE) for k in fields})
        raise
    # one write: a reader never sees "running" without the host that makes it so
    return update_session(sid, status="running", root_pid=pid, root_pgid=pid,
                          root_start_token=token)


def continue_session(session_id: str, input_text: str | None = None) -> dict[str, Any]:
    """Relaunch the root and every paused worker on their same threads.

    Everything the relaunch needs (session and run records, the runs inventory, the
    profile snapshot and its host, the capability, a thread or a recorded prompt) is
    checked first: a refusal changes nothing (no host, no audit event, same record).
    """
    with lifecycle_lock(session_dir(session_id)):
        record = load_session(session_id)
        host = _check_continue(record, input_text)
        first_turn = _first_turn_pending(record)
        record = relaunch_root(record, input_text, host)
        _audit(record, "run_resumed", host_relaunched=True, first_turn=first_turn,
               root_thread_id=record.get("root_thread_id"))
        resumed, errors = _continue_jobs(session_id, record.get("paused_job_ids") or [])
        record = _forget_paused_jobs(session_id)
        return {"session": record, "resumed_jobs": resumed, "resume_errors": errors}


def _forget_paused_jobs(session_id: str) -> dict[str, Any]:
    """Drop the paused-job list once its jobs were continued; a relaunched root that has
    already finished (a short turn) keeps its terminal record as it is."""
    current = read_session_record(session_id)
    if "paused_job_ids" not in current or current["status"] in TERMINAL_SESSION_STATUSES:
        return current
    return update_session(session_id, paused_job_ids=REMOVE)


def _continue_jobs(session_id: str, job_ids: list[str]) -> tuple[list[str], dict[str, str]]:
    if not job_ids:
        return [], {}
    from mmo_kernel.jobs.controls import control_job
    from mmo_kernel.jobs.listing import load_job

    resumed, errors = [], {}
    root = read_session_record(session_id)["root_agent"]
    for job_id in job_ids:
        try:
            job = load_job(job_id)
            control_job(job_id, "continue", session_id, root,
                        expected_revision=job.get("control_revision", 0))
            resumed.append(job_id)
        except Exception as exc:  # each job reports its own refusal
            errors[job_id] = f"{exc.__class__.__name__}: {exc}"
    return resumed, errors


# -------------------------------------------------------------- compact ---


def compact_session(session_id: str) -> dict[str, Any]:
    """On a paused session: compact the root thread, then cold-pause again.

    The run record and the profile snapshot's host are checked before anything changes.
    """
    from mmo_kernel.sessions.records import utc_now

    with lifecycle_lock(session_dir(session_id)):
        record = load_session(session_id)
        if record["status"] != "paused":
            raise RuntimeError(f"cannot compact session from status {record['status']}; "
                               "pause it first")
        if not record.get("root_thread_id"):
            raise RuntimeError(f"session {session_id} has no root thread to compact")
        _require_run(record)
        host = _root_launcher(record)
        update_session(session_id, root_continue_input=REMOVE)
        env = {**os.environ, "MMO_ROOT_HOST_MODE": "compact"}
        try:
            from mmo_kernel.gateway.process import revive_gateway

            revive_gateway()  # an idle gateway may have exited: the agents' url must answer
            pid, token = host.launch_root(session_id, session_file(session_id, "root-host.log"),
                                          env)
            update_session(session_id, root_pid=pid, root_pgid=pid, root_start_token=token)
            launched = read_session_record(session_id)
            _wait_host_exit(launched, 120.0)
            done = read_session_record(session_id)
            if done.get("root_compaction_error"):
                raise RuntimeError(done["root_compaction_error"])
            record = update_session(session_id, root_compacted_at=utc_now(),
                                    root_compaction_error=REMOVE)
        except Exception as exc:
            record = _finish_cold_pause(read_session_record(session_id))
            record = update_session(session_id, status="paused",
                                    root_compaction_error=f"{exc.__class__.__name__}: {exc}")
            return {"session": record, "message": "compaction failed; the session is safely "
                                                  "cold-paused"}
        return {"session": _finish_cold_pause(record)}


# ----------------------------------------------------------------- stop ---


def _optional_reason(reason: str | None) -> dict[str, str]:
    """The audit fields of a person's optional reason for a stop or cancel, checked before
    anything changes (the same bound as a disposition's reason)."""
    if reason is None or not str(reason).strip():
        return {}
    from mmo_kernel.jobs.authority import check_reason

    return {"reason": check_reason(reason)}


def stop_session(session_id: str, grace_seconds: float = 30.0,
                 reason: str | None = None) -> dict[str, Any]:
    """Graceful stop: steer the active root turn and live workers to finalize, wait, retire.
    ``reason`` (optional) is kept in the ``session_stopped`` audit entry."""
    why = _optional_reason(reason)
    with lifecycle_lock(session_dir(session_id)):
        record = load_session(session_id)
        if record["status"] in TERMINAL_SESSION_STATUSES:
            raise RuntimeError(f"terminal immutable session {session_id} ({record['status']})")
        _require_run(record)
        delivered = False
        try:
            result = _control(record, "stop")
            delivered = bool(result and result.get("finalize_delivered"))
        except (ControlDeliveryUnknown, RuntimeError):
            delivered = False
        deadline = time.monotonic() + grace_seconds
        _stop_stranded_jobs(session_id)
        finalizing = _finalize_jobs(session_id, record)
        exited = _wait_host_exit(record, grace_seconds)
        forced = not exited
        _wait_jobs_settled(finalizing, deadline)
        _retire_root(read_session_record(session_id), grace_seconds=2.0)
        _stop_jobs(session_id)
        current = read_session_record(session_id)
        if current["status"] not in TERMINAL_SESSION_STATUSES:
            partial = session_file(session_id, "root-partial-result.md")
            write_partial(partial, session_file(session_id, "root-events.jsonl"),
                          "session stopped")
            transition(session_id, "stopped", result_kind="partial",
                       partial_result_path=str(partial), result_path=str(partial))
        try:
            update_session(session_id, **{f: REMOVE for f in HOST_FIELDS})
        except RuntimeError:
            pass
        record = read_session_record(session_id)
        _audit(record, "session_stopped", root_finalize_delivered=delivered, root_forced=forced,
               **why)
        return {"session": record, "root_finalize_delivered": delivered, "root_forced": forced}


def _stop_stranded_jobs(session_id: str) -> None:
    """Jobs with no live host are stopped in place, never relaunched to finalize."""
    from mmo_kernel.jobs.session_end import stop_stranded_jobs

    stop_stranded_jobs(session_id, "stopped")


def _finalize_jobs(session_id: str, record: dict[str, Any]) -> list[str]:
    """Ask every live worker to finalize; the ids of those that were asked."""
    from mmo_kernel.jobs.controls import control_job

    asked = []
    for job in _live_jobs(session_id):
        try:
            control_job(job["job_id"], "finalize", session_id, record["root_agent"],
                        expected_revision=job.get("control_revision", 0))
            asked.append(job["job_id"])
        except Exception:  # a job that cannot finalize is stopped below
            continue
    return asked


def _wait_jobs_settled(job_ids: list[str], deadline: float) -> None:
    """Give finalizing workers the rest of the grace period to end by themselves.

    A worker has ended once its hosts are gone (it published its status
    before that); a terminal one whose host still lingers at the deadline is
    retired here, and one still working is stopped by the caller.
    """
    if not job_ids:
        return
    from mmo_kernel.jobs.listing import host_alive, load_job, retire_hosts
    from mmo_kernel.jobs.records import TERMINAL_JOB_STATUSES

    pending = list(job_ids)
    while pending and time.monotonic() < deadline:
        pending = [j for j in pending if host_alive(load_job(j))]
        if pending:
            time.sleep(HOST_EXIT_POLL)
    for job_id in pending:
        record = load_job(job_id)
        if record["status"] in TERMINAL_JOB_STATUSES:
            retire_hosts(record)


def _stop_jobs(session_id: str) -> None:
    from mmo_kernel.jobs.cancel import cancel_job

    root = read_session_record(session_id)["root_agent"]
    for job in _live_jobs(session_id):
        try:
            cancel_job(job["job_id"], session_id, reason="session stopped", caller_agent=root)
        except Exception:
            continue


# --------------------------------------------------------------- cancel ---


def cancel_session(session_id: str, reason: str | None = None) -> dict[str, Any]:
    """``cancelling`` at once (visible while the lifecycle lock is held elsewhere), then kill;
    ``reason`` (optional) is kept in the ``session_cancelled`` audit entry.

    A lock that is refused (a symlinked ``lifecycle.lock``) changes nothing: the
    lock is tried first, and ``cancelling`` is written without it only while
    another process holds it; if it is then refused or never granted, the
    status the session had is put back.
    """
    why = _optional_reason(reason)
    with runtime_lock():
        record = read_session_record(session_id)
        if record["status"] in TERMINAL_SESSION_STATUSES:
            raise RuntimeError(f"terminal immutable session {session_id} ({record['status']})")
    granted = False
    try:
        with lifecycle_lock(session_dir(session_id), timeout=0):
            granted = True
            update_session(session_id, status="cancelling")
            return _cancel_locked(session_id, why)
    except LockBusy:
        if granted:
            raise
    update_session(session_id, status="cancelling")  # held elsewhere: visible at once
    try:
        with lifecycle_lock(session_dir(session_id)):
            granted = True
            return _cancel_locked(session_id, why)
    except StateError:
        if not granted:
            _undo_cancelling(session_id, record["status"])
        raise


def _undo_cancelling(session_id: str, previous: str) -> None:
    """The lock was never granted: put back the status ``cancelling`` replaced."""
    with runtime_lock():
        if read_session_record(session_id)["status"] == "cancelling":
            update_session(session_id, status=previous)


def _cancel_locked(session_id: str, why: dict[str, str]) -> dict[str, Any]:
    """Kill every job and host of a ``cancelling`` session; the lifecycle lock is held."""
    record = read_session_record(session_id)
    cancelled = _cancel_jobs(session_id, record)
    _retire_root(record, grace_seconds=2.0)
    record = transition(session_id, "cancelled")
    _audit(record, "session_cancelled", cancelled_jobs=cancelled, **why)
    return {"session": record, "cancelled_jobs": cancelled}


def _cancel_jobs(session_id: str, record: dict[str, Any]) -> list[str]:
    jobs = _live_jobs(session_id)
    if not jobs:
        return []
    from mmo_kernel.jobs.cancel import cancel_job

    done = []
    for job in jobs:
        try:
            cancel_job(job["job_id"], session_id, reason="session cancelled",
                       caller_agent=record["root_agent"])
            done.append(job["job_id"])
        except Exception:
            continue
    return done

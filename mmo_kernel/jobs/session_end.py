"""A session that ends leaves no job stranded: jobs nobody can continue are stopped.

A ``suspended`` or ``paused`` job waits for its caller's ``continue``; once the
session is terminal nobody can give it (``terminal immutable session ...``), so
such a job would stay non-terminal forever and keep its writer worktree and
branch. When a session ends (completed, failed, stopped) every job of it that is
not terminal and has no live host is therefore terminalized in place as
``stopped``, as a full stop does: partial result and evidence kept (a writer's
patch is captured into the job dir first), worktree and branch removed through
the workspace isolator, an ``agent_finished`` audit event with the reason. The
session names them in ``stopped_jobs``. A job whose host still runs is left to
finish by itself. Called by the layers that end sessions (``host_api``,
``lifecycle``, ``api``), never by ``sessions`` itself, which sits below jobs.
"""

from __future__ import annotations

from typing import Any

from mmo_kernel.jobs.control_lock import job_control_lock
from mmo_kernel.jobs.listing import host_alive, list_jobs, load_job
from mmo_kernel.jobs.records import (
    HOST_IDENTITY_FIELDS,
    TERMINAL_JOB_STATUSES,
    job_file,
    read_job_record,
    transition_job,
    update_job,
)
from mmo_kernel.jobs.workspace import capture_job_patch, job_workspace_cleanup, workspace_handle
from mmo_kernel.sessions.records import (
    TERMINAL_SESSION_STATUSES,
    read_session_record,
    session_file,
    session_run_id,
)
from mmo_kernel.sessions.state import finish_session as _finish_session
from mmo_kernel.sessions.state import transition, update_session
from mmo_kernel.state.audit import append_audit
from mmo_kernel.state.files import atomic_write_text, runtime_lock

PARTIAL_NAME = "partial-result.md"


def stranded(record: dict[str, Any]) -> bool:
    """A job that can never move once its session is over: not terminal, host gone.

    A ``queued`` job without a runner may still be being launched; reconciliation
    fails it when it never is, so it is left alone here.
    """
    if record["status"] in TERMINAL_JOB_STATUSES or host_alive(record):
        return False
    return not (record["status"] == "queued" and record.get("runner_pid") is None)


def _stop_note(status: str) -> str:
    return (f"The session ended ({status}) while this job had no running host, so it was "
            "stopped in place: it can no longer be continued. The evidence above is kept.")


def _keep_partial(job_id: str, record: dict[str, Any], status: str) -> str:
    """The job's partial result with a closing note (written when there was none)."""
    path = job_file(job_id, PARTIAL_NAME)
    before = path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""
    note = _stop_note(status)
    if note not in before:
        atomic_write_text(path, f"{before.rstrip()}\n\n{note}\n" if before else f"{note}\n")
    return str(path)


def _capture(job_id: str, record: dict[str, Any]) -> str | None:
    """Capture a writer's patch into its job dir before the worktree goes; the error if not."""
    if workspace_handle(record) is None or record.get("mode") != "workspace-write" \
            or record.get("patch"):
        return None
    try:
        capture_job_patch(job_id)
    except Exception as exc:  # noqa: BLE001 - the worktree is kept as the evidence instead
        return f"{exc.__class__.__name__}: {exc}"
    return None


def _stop_one(job_id: str, session: dict[str, Any], status: str) -> bool:
    """Stop one stranded job under its control lock; True when this call stopped it."""
    with job_control_lock(job_id):
        record = load_job(job_id)
        if not stranded(record):
            return False
        capture_error = _capture(job_id, record)
        record = read_job_record(job_id)
        if record["status"] in TERMINAL_JOB_STATUSES:  # the capture failed it (out of scope)
            job_workspace_cleanup(record)
            return False
        fields: dict[str, Any] = {name: None for name in HOST_IDENTITY_FIELDS}
        fields.update(stop_reason=f"session {session['session_id']} ended ({status})",
                      partial_result_path=_keep_partial(job_id, record, status))
        if record.get("result_kind") != "final":
            fields["result_kind"] = "partial"
        if capture_error is not None:
            fields["warning"] = (f"the writer's patch could not be captured ({capture_error}); "
                                 "its workspace is kept")
        stopped = transition_job(job_id, "stopped", **fields)
        if stopped["status"] != "stopped":
            return False
    if capture_error is None:
        try:
            job_workspace_cleanup(read_job_record(job_id))
        except Exception as exc:  # noqa: BLE001 - the stop stands; the leftover is named
            update_job(job_id, warning=f"the writer workspace could not be removed: {exc}")
    run_id = str(session_run_id(session) or record.get("run_id") or "unknown")
    append_audit(session_file(session["session_id"], "audit.jsonl"), "agent_finished", run_id,
                 job_id=job_id, agent=record["agent"], status="stopped",
                 reason=f"session ended ({status}) while the job had no running host")
    return True


def _name_on_session(session_id: str, job_ids: list[str]) -> None:
    """Add the ids to the live session's ``stopped_jobs`` (a record that is terminal
    already cannot change; the audit events still name them)."""
    with runtime_lock():
        record = read_session_record(session_id)
        if record["status"] in TERMINAL_SESSION_STATUSES:
            return
        named = list(dict.fromkeys([*(record.get("stopped_jobs") or []), *job_ids]))
        update_session(session_id, stopped_jobs=named)


def stop_stranded_jobs(session_id: str, status: str) -> list[str]:
    """Stop every stranded job of the session that is ending as ``status``; their ids.

    While the session is still live they are named in its ``stopped_jobs`` at once, so
    whichever process writes the ending transition keeps the names.
    """
    session = read_session_record(session_id)
    candidates = [r["job_id"] for r in list_jobs(session_id) if stranded(r)]
    stopped = [job_id for job_id in reversed(candidates) if _stop_one(job_id, session, status)]
    if stopped:
        _name_on_session(session_id, stopped)
    return stopped


def end_session(session_id: str, status: str, **fields: Any) -> dict[str, Any]:
    """``sessions.state.transition`` that first stops the session's stranded jobs when
    ``status`` is terminal; ``stopped_jobs`` names them (and any stopped earlier)."""
    current = read_session_record(session_id)
    if status in TERMINAL_SESSION_STATUSES and current["status"] not in TERMINAL_SESSION_STATUSES:
        stop_stranded_jobs(session_id, status)
    return transition(session_id, status, **fields)


def finish_session(session_id: str, exit_code: int, error: str | None = None,
                   expected_run_id: str | None = None) -> dict[str, Any]:
    """``sessions.state.finish_session``, with the stranded jobs stopped and named when the
    session really ends (a late finish of a detached run leaves everything as it is)."""
    record = read_session_record(session_id)
    late = (expected_run_id is not None and record["status"] == "detached"
            and expected_run_id == record.get("current_run_id"))
    if record["status"] in TERMINAL_SESSION_STATUSES or late:
        return _finish_session(session_id, exit_code, error, expected_run_id)
    fields: dict[str, Any] = {"error": error} if error else {}
    return end_session(session_id, "completed" if exit_code == 0 else "failed", **fields)


__all__ = ["end_session", "finish_session", "stop_stranded_jobs", "stranded"]

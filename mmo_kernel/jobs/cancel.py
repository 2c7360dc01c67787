"""``cancel_job``: kill a job's hosts and its descendants', keeping the evidence (spec 04)."""

from __future__ import annotations

from typing import Any

from mmo_kernel.jobs.authority import ancestors, require_authority, require_session_job
from mmo_kernel.jobs.listing import iter_job_records, load_job, retire_hosts, write_job_partial
from mmo_kernel.jobs.records import (
    HOST_IDENTITY_FIELDS,
    TERMINAL_JOB_STATUSES,
    public_job,
    transition_job,
    update_job,
)
from mmo_kernel.jobs.spawn import cleanup_workspace
from mmo_kernel.sessions.records import read_session_record, session_file, session_run_id
from mmo_kernel.state.audit import append_audit

MAX_CANCEL_REASON_CHARS = 500
CANCEL_GRACE_SECONDS = 3.0


def check_reason(reason: Any) -> str | None:
    if reason is None:
        return None
    if not isinstance(reason, str):
        raise ValueError("cancel reason must be a string")
    if len(reason) > MAX_CANCEL_REASON_CHARS:
        raise ValueError(f"cancel reason must be at most 500 characters (got {len(reason)})")
    return reason


def descendants(job_id: str, session_id: str) -> list[dict[str, Any]]:
    """Every job of the session below ``job_id`` (children first, then theirs)."""
    return [r for r in iter_job_records(session_id)[::-1] if job_id in ancestors(r)]


def _cancel_one(record: dict[str, Any], reason: str | None, session: dict[str, Any],
                caller_agent: str | None, caller_job_id: str | None) -> dict[str, Any] | None:
    """Cancel one non-terminal job; None when it had already reached a terminal status."""
    job_id = record["job_id"]
    why = f"cancelled: {reason}" if reason else "cancelled"
    fields: dict[str, Any] = {"cancel_reason": reason}
    updated = transition_job(job_id, "cancelled", **fields)
    if updated["status"] != "cancelled" or record["status"] in TERMINAL_JOB_STATUSES:
        return None
    retire_hosts(updated, CANCEL_GRACE_SECONDS)
    cleanup: dict[str, Any] = {name: None for name in HOST_IDENTITY_FIELDS}
    cleanup["partial_result_path"] = write_job_partial(job_id, f"The job was {why}.",
                                                       keep_existing=True)
    if updated.get("result_kind") != "final":
        cleanup["result_kind"] = "partial"
    if record.get("workspace"):
        try:
            cleanup_workspace(record)
            cleanup["workspace_removed"] = True
        except Exception as exc:  # noqa: BLE001 - the cancel stands; the leftover is named
            cleanup["warning"] = f"the writer workspace could not be removed: {exc}"
    updated = update_job(job_id, **cleanup)
    run_id = str(session_run_id(session) or updated["run_id"])
    append_audit(session_file(session["session_id"], "audit.jsonl"), "agent_cancelled", run_id,
                 job_id=job_id, agent=updated["agent"], reason=reason,
                 caller_agent=caller_agent, caller_job_id=caller_job_id)
    return updated


def cancel_job(job_id: str, session_id: str, reason: str | None = None,
               caller_job_id: str | None = None,
               caller_agent: str | None = None) -> dict[str, Any]:
    """Cancel ``job_id`` and every live descendant; returns ``{"jobs": [public records]}``.

    Only the root and the job's ancestors may cancel (``not a descendant``);
    an already terminal job is returned unchanged.
    """
    reason = check_reason(reason)
    record = load_job(job_id)
    require_session_job(record, session_id)
    session = read_session_record(session_id)
    require_authority(session, record, caller_agent, caller_job_id, "cancel")
    jobs = []
    done = _cancel_one(record, reason, session, caller_agent, caller_job_id)
    jobs.append(done or load_job(job_id))
    for child in descendants(job_id, session_id):
        if child["status"] in TERMINAL_JOB_STATUSES:
            continue
        cancelled = _cancel_one(child, reason, session, caller_agent, caller_job_id)
        if cancelled is not None:
            jobs.append(cancelled)
    return {"jobs": [public_job(j) for j in jobs]}

"""Finding and finishing integrations whose process was killed (``jobs.integration``).

Kept apart from ``jobs.workspace`` so that loading a job (``jobs.listing``)
can recover one without importing the disposition and integration paths.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mmo_kernel.jobs.control_lock import job_control_lock
from mmo_kernel.jobs.integration import recover_integration
from mmo_kernel.jobs.records import job_file, read_job_record
from mmo_kernel.sessions.records import read_session_record, session_file, session_run_id
from mmo_kernel.sessions.state import taint_session
from mmo_kernel.state.audit import append_audit

JOURNAL_FILE = "integration-journal.json"
RECOVERED_EVENT = "agent_patch_integration_recovered"


def session_run_id_of(session: Mapping[str, Any], record: Mapping[str, Any]) -> str:
    """The run an audit event of this job belongs to."""
    return str(session_run_id(session) or record.get("run_id") or "unknown")


def persist_taint(session_id: str, entry: Mapping[str, Any]) -> None:
    """Taint the session with an integration's ``taint_reasons`` entry."""
    details = {k: v for k, v in entry.items() if k not in ("reason", "at", "event", "run_id")}
    taint_session(session_id, str(entry.get("reason") or "integration_rollback_failed"), **details)


def recover_interrupted_integration(job_id: str) -> str | None:
    """Roll back (or finish recording) an integration whose process died; the outcome.

    Costs one ``stat`` when there is nothing to recover, so every load may call it.
    """
    if not job_file(job_id, JOURNAL_FILE).exists():
        return None
    with job_control_lock(job_id):
        return recover_locked(job_id)


def recover_locked(job_id: str) -> str | None:
    """``recover_interrupted_integration`` for a caller already holding the job's lock."""
    journal = job_file(job_id, JOURNAL_FILE)
    if not journal.exists():
        return None
    record = read_job_record(job_id)
    outcome = recover_integration(
        journal, integrated=record.get("result_state") == "integrated",
        persist_taint=lambda entry: persist_taint(record["session_id"], entry))
    if outcome is not None:
        session = read_session_record(record["session_id"])
        append_audit(session_file(record["session_id"], "audit.jsonl"), RECOVERED_EVENT,
                     session_run_id_of(session, record), job_id=job_id, outcome=outcome,
                     changed_paths=list((record.get("patch") or {}).get("changed_paths") or []))
    return outcome

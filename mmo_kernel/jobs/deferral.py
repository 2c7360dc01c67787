"""Root completion deferral: the root is not complete while workers still run (spec 03).

The root host calls ``defer_root_completion`` when its root finished. If
workers are still running the session becomes ``detached`` with
``root_completion_deferred = true`` and the pending job ids (one
``root_completion_deferred`` audit event); the host then waits with
``wait_for_recoverable_jobs`` and clears the flag with
``end_root_completion_deferral`` before completing the session.
"""

from __future__ import annotations

import time
from typing import Any

from mmo_kernel.jobs.listing import holds_capacity, list_jobs
from mmo_kernel.sessions.records import read_session_record, session_file, session_run_id
from mmo_kernel.sessions.state import transition, update_session
from mmo_kernel.state.audit import append_audit

DEFERRAL_POLL_SECONDS = 0.2


def recoverable_jobs(session_id: str) -> list[str]:
    """Ids of the session's jobs that are still running or whose host is still alive."""
    return [r["job_id"] for r in list_jobs(session_id) if holds_capacity(r)]


def defer_root_completion(session_id: str, **fields: Any) -> list[str]:
    """Defer a finished root's completion while jobs run; returns the pending job ids.

    With nothing pending this changes nothing and returns ``[]``. ``fields``
    (e.g. the root's partial result) are written in the same update as the
    deferral, so a watcher that sees it deferred sees them too. The audit
    event is written once per deferral (not again while already deferred).
    """
    pending = recoverable_jobs(session_id)
    if not pending:
        return []
    session = read_session_record(session_id)
    already = session.get("root_completion_deferred") is True
    transition(session_id, "detached", root_completion_deferred=True,
               root_completion_deferred_jobs=pending, **fields)
    if not already:
        run_id = session_run_id(session) or ""
        append_audit(session_file(session_id, "audit.jsonl"), "root_completion_deferred",
                     run_id, job_ids=pending)
    return pending


def wait_for_recoverable_jobs(session_id: str, timeout_seconds: float | None = None) -> list[str]:
    """Block until no job of the session is still running; returns what is left on timeout."""
    deadline = None if timeout_seconds is None else time.monotonic() + timeout_seconds
    while True:
        pending = recoverable_jobs(session_id)
        if not pending or (deadline is not None and time.monotonic() >= deadline):
            return pending
        time.sleep(DEFERRAL_POLL_SECONDS)


def end_root_completion_deferral(session_id: str) -> dict[str, Any]:
    """Clear the deferral flags (``false`` and ``[]``) before the session completes."""
    return update_session(session_id, root_completion_deferred=False,
                          root_completion_deferred_jobs=[])

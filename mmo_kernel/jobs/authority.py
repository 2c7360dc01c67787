"""Who may dispose of a job: the root and the job's ancestors (spec 04 "Visibility").

Any agent of a session may *read* results; cancelling, accepting,
rejecting, integrating and controlling belong to the root and to the jobs
that (transitively) spawned the target. A profile ``controls`` grant lets a
sibling use specific control actions, never cancellation.
"""

from __future__ import annotations

from typing import Any

from mmo_kernel.jobs.records import read_job_record


def ancestors(record: dict[str, Any]) -> list[str]:
    """The job ids above ``record``: its parent, the parent's parent, ... (cycle-safe)."""
    chain: list[str] = []
    parent = record.get("caller_job_id")
    while isinstance(parent, str) and parent not in chain:
        chain.append(parent)
        try:
            parent = read_job_record(parent).get("caller_job_id")
        except FileNotFoundError:
            break
    return chain


def require_session_job(record: dict[str, Any], session_id: str) -> None:
    if record["session_id"] != session_id:
        raise FileNotFoundError(f"unknown job {record['job_id']} in session {session_id}")


def is_root_caller(session: dict[str, Any], caller_agent: str | None,
                   caller_job_id: str | None) -> bool:
    """The root acts without a job id; an omitted agent is the operator's own API call."""
    return caller_job_id is None and caller_agent in (None, session.get("root_agent"))


def require_authority(session: dict[str, Any], record: dict[str, Any], caller_agent: str | None,
                      caller_job_id: str | None, action: str,
                      grant_actions: tuple[str, ...] = ()) -> None:
    """Raise ``PermissionError`` unless the caller may perform ``action`` on ``record``.

    ``grant_actions`` are the actions the caller's profile ``controls`` grant
    allows on the target's agent (never consulted for ``cancel``).
    """
    if is_root_caller(session, caller_agent, caller_job_id):
        return
    if caller_job_id is None:
        raise PermissionError(f"worker agent {caller_agent!r} must act with its own caller_job_id")
    try:
        caller = read_job_record(caller_job_id)
    except FileNotFoundError:
        raise PermissionError(f"caller job {caller_job_id!r} does not exist") from None
    if caller["session_id"] != session["session_id"] or (
            caller_agent is not None and caller["agent"] != caller_agent):
        raise PermissionError(f"caller job {caller_job_id} does not belong to agent "
                              f"{caller_agent!r} in session {session['session_id']}")
    if caller_job_id in ancestors(record):
        return
    if action != "cancel" and action in grant_actions:
        return
    raise PermissionError(f"job {record['job_id']} is not a descendant of caller job "
                          f"{caller_job_id}; only the root and the job's ancestors may {action} it")


def load_session_job(job_id: str, session_id: str) -> dict[str, Any]:
    """The job record, refusing a job of another session as unknown (no cross-session reads)."""
    record = read_job_record(job_id)
    if record["session_id"] != session_id:
        raise FileNotFoundError(f"no job {job_id!r} in session {session_id!r}")
    return record


def check_caller_job(session: dict[str, Any], caller_agent: str | None,
                     caller_job_id: str | None) -> None:
    """A worker caller must name a job of this session that runs as ``caller_agent``."""
    if caller_job_id is None:
        return
    try:
        caller = read_job_record(caller_job_id)
    except FileNotFoundError:
        raise PermissionError(f"caller job {caller_job_id!r} does not exist") from None
    if caller["session_id"] != session["session_id"]:
        raise PermissionError(f"caller job {caller_job_id} belongs to another session")
    if caller_agent is not None and caller["agent"] != caller_agent:
        raise PermissionError(f"caller job {caller_job_id} runs agent {caller['agent']!r}, "
                              f"not {caller_agent!r}")


def require_disposition(record: dict[str, Any], session: dict[str, Any],
                        caller_agent: str | None, caller_job_id: str | None, what: str) -> None:
    """Refuse (``PermissionError``, ``not a descendant``) anyone but the root and ancestors.

    Control grants are never consulted: they never grant disposition.
    """
    require_authority(session, record, caller_agent, caller_job_id, what)


MAX_REASON_CHARS = 2000


def check_reason(reason: Any) -> str:
    if not isinstance(reason, str) or not reason.strip():
        raise ValueError("a reason is required (a non-empty string)")
    if len(reason) > MAX_REASON_CHARS:
        raise ValueError(f"reason must be at most {MAX_REASON_CHARS} characters")
    return reason

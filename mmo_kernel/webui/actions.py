"""What a person can do from the page, done exactly as the CLI does it (``mmo job ...``,
``mmo pause|continue|stop|cancel``): through ``mmo_kernel.api``, as the session's root
(the operator owns the session), inside ``acting_as("ui", login)`` so every audit line
says ``actor: ui``. Each returns one line to show; a refusal raises with the kernel's own
one-line message."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from mmo_kernel import api

SESSION_ACTIONS = ("pause", "continue", "stop", "cancel")
JOB_ACTIONS = ("read", "accept", "reject", "integrate", "cancel")
STOP_GRACE_SECONDS = 30.0
RESULT_PAGE = 20_000


class SessionAction(BaseModel):
    action: str
    input: str | None = Field(default=None, max_length=20_000)
    reason: str | None = Field(default=None, max_length=2_000)
    """Optional for stop and cancel (kept in the audit log), ignored by the others."""


class JobAction(BaseModel):
    action: str
    reason: str | None = Field(default=None, max_length=2_000)


def _root(session_id: str) -> str:
    return str(api.peek_session(session_id)["root_agent"])


def session_action(session_id: str, request: SessionAction) -> str:
    if request.action not in SESSION_ACTIONS:
        raise ValueError(f"unknown session action {request.action!r}")
    with api.acting_as("ui", api.login_name()):
        if request.action == "continue":
            out = api.continue_session(session_id, (request.input or "").strip() or None)
        elif request.action == "stop":
            out = api.stop_session(session_id, grace_seconds=STOP_GRACE_SECONDS,
                                   reason=(request.reason or "").strip() or None)
        elif request.action == "pause":
            out = api.pause_session(session_id)
        else:
            out = api.cancel_session(session_id, reason=(request.reason or "").strip() or None)
    return f"{request.action}: session {session_id} is {out['session']['status']}" + _listed(out)


def _listed(out: dict[str, Any]) -> str:
    extra = [f"{label} {', '.join(out[key])}" for key, label in (
        ("affected_jobs", "paused jobs"), ("resumed_jobs", "resumed jobs"),
        ("cancelled_jobs", "cancelled jobs")) if out.get(key)]
    return "".join(f" · {line}" for line in extra)


def _reason(request: JobAction) -> str:
    reason = (request.reason or "").strip()
    if not reason:
        raise ValueError(f"{request.action} needs a reason (it is kept in the audit log)")
    return reason


def _read_all(job_id: str, session_id: str, root: str) -> dict[str, Any]:
    """Every page of the result, as the root reads it; the last page marks it read."""
    cursor: int | None = 0
    page: dict[str, Any] = {}
    while cursor is not None:
        page = api.read_result(job_id, session_id, cursor=cursor, max_chars=RESULT_PAGE,
                               caller_agent=root)
        cursor = page["next_cursor"]
    return page


def job_action(job_id: str, request: JobAction) -> str:
    if request.action not in JOB_ACTIONS:
        raise ValueError(f"unknown job action {request.action!r}")
    with api.acting_as("ui", api.login_name()):
        session_id = api.load_job(job_id)["session_id"]
        root = _root(session_id)
        if request.action == "read":
            page = _read_all(job_id, session_id, root)
            return f"read: job {job_id} result_state {page['result_state']}"
        reason = _reason(request)
        if request.action == "cancel":
            out = api.cancel_job(job_id, session_id, reason=reason, caller_agent=root)
            return "cancel: " + ", ".join(f"{j['job_id']} {j['status']}" for j in out["jobs"])
        function = {"accept": api.accept_result, "reject": api.reject_result,
                    "integrate": api.integrate_patch}[request.action]
        job = function(job_id, reason, session_id, root)
    return f"{request.action}: job {job_id} result_state {job.get('result_state')}"


__all__ = ["JOB_ACTIONS", "JobAction", "SESSION_ACTIONS", "SessionAction", "job_action",
           "session_action"]

"""What each key of the live view does: the same ``mmo_kernel.api`` call the CLI makes.

A key acts on the selected row: a session header or its root acts on the session
(``mmo pause|continue|stop|cancel``), a worker on its job (``mmo job control``,
``mmo job cancel|accept|reject|integrate``). The person acts as the session's root,
as the CLI does, and every call runs inside ``acting_as("ui", <login>)`` so the
audit log says who it was and from where. Nothing here imports Textual: the app
asks for the confirmation and the text an action needs, then calls ``perform``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from mmo_kernel import api
from mmo_kernel.jobs.records import control_revision

Need = Literal["none", "optional", "required"]


@dataclass(frozen=True)
class Target:
    """The selected row: a session (``job_id`` None) or one of its worker jobs."""

    session_id: str
    job_id: str | None
    agent: str

    @property
    def name(self) -> str:
        return f"job {self.job_id}" if self.job_id else f"session {self.session_id}"

    @property
    def job(self) -> str:
        """The job id of a worker row (the actions that need one are refused elsewhere)."""
        if self.job_id is None:
            raise ValueError(f"{self.name} is no worker job; select a worker row")
        return self.job_id

    @property
    def label(self) -> str:
        """Short enough for a one-line notice at 80 columns: the agent and the id's tail."""
        if self.job_id:
            return f"{self.agent} (job …{self.job_id[-6:]})"
        return f"session …{self.session_id[-6:]}"


@dataclass(frozen=True)
class Action:
    """One key: what it asks first and what it calls."""

    key: str
    name: str
    help: str
    confirm: bool
    """Destructive: asks yes/no first (a declined confirmation calls nothing)."""
    text: Callable[[Target], tuple[Need, str]]
    """What text it asks for (a reason, steering input) and how the field is labelled."""
    run: Callable[[Target, str | None], str]
    """The API call; returns the one-line outcome shown in the app."""
    jobs_only: bool = False


def _as_root(target: Target) -> tuple[dict[str, Any], str]:
    """The job's record (reconciled, as ``mmo job`` reads it) and the session's root agent."""
    record = api.load_job(target.job)
    return record, api.load_session(target.session_id)["root_agent"]


def _control(target: Target, action: str, text: str | None = None) -> str:
    record, root = _as_root(target)
    out = api.control_job(target.job, action, target.session_id, root,
                          expected_revision=control_revision(record), input=text or None)
    job = out["job"]
    return (f"{action} -> job {target.job_id}: revision {out['control_revision']}, "
            f"status {job['status']}")


def _session_outcome(out: dict[str, Any]) -> str:
    line = f"session {out['session']['session_id']}: {out['session']['status']}"
    for key, label in (("affected_jobs", "paused jobs"), ("resumed_jobs", "resumed jobs"),
                       ("cancelled_jobs", "cancelled jobs")):
        if out.get(key):
            line += f" · {label}: {', '.join(out[key])}"
    return line


def _pause(target: Target, _: str | None) -> str:
    if target.job_id:
        return _control(target, "pause")
    return _session_outcome(api.pause_session(target.session_id))


def _continue(target: Target, text: str | None) -> str:
    if target.job_id:
        return _control(target, "continue", text)
    return _session_outcome(api.continue_session(target.session_id, text or None))


def _stop(target: Target, reason: str | None) -> str:
    if target.job_id:
        return _control(target, "stop")
    return _session_outcome(api.stop_session(target.session_id, reason=reason))


def _cancel(target: Target, reason: str | None) -> str:
    if not target.job_id:
        return _session_outcome(api.cancel_session(target.session_id, reason=reason))
    _, root = _as_root(target)
    out = api.cancel_job(target.job, target.session_id, reason=reason, caller_agent=root)
    return " · ".join(f"job {j['job_id']}: {j['status']}" for j in out["jobs"])


def _steer(target: Target, text: str | None) -> str:
    return _control(target, "steer", text)


def read_whole_result(target: Target) -> tuple[str, str]:
    """The job's whole result, page by page as ``mmo job result`` reads it (which marks it
    read: accept and reject need that), and a note on its kind and state."""
    _, root = _as_root(target)
    parts, cursor, page = [], 0, {}
    while cursor is not None:
        page = api.read_result(target.job, target.session_id, cursor=cursor,
                               caller_agent=root)
        content = page["content"]
        parts.append(json.dumps(content, indent=2) if page["content_format"] == "json"
                     else str(content))
        cursor = page["next_cursor"]
    note = (f"{page['result_kind']} result, {page['total_chars']} chars, "
            f"result_state {page['result_state']}")
    return "".join(parts), note


def read_diff(target: Target) -> str:
    """The writer's captured patch, as ``mmo job diff`` prints it."""
    from mmo_kernel.jobs.workspace import read_patch_diff

    _as_root(target)
    return read_patch_diff(target.job)


def _dispose(function: Callable[..., dict[str, Any]]) -> Callable[[Target, str | None], str]:
    def run(target: Target, reason: str | None) -> str:
        _, root = _as_root(target)
        job = function(target.job, reason, target.session_id, root)
        return f"job {target.job_id}: result_state {job.get('result_state')}"
    return run


def _none(_: Target) -> tuple[Need, str]:
    return "none", ""


def _cancel_reason(target: Target) -> tuple[Need, str]:
    # `mmo job cancel` requires a reason; for a session it is optional (`mmo cancel --reason`)
    return ("required", REASON) if target.job_id else ("optional", SESSION_REASON)


def _stop_reason(target: Target) -> tuple[Need, str]:
    # a worker's stop is a control (no reason); a session's takes one (`mmo stop --reason`)
    return ("none", "") if target.job_id else ("optional", SESSION_REASON)


def _continue_text(_: Target) -> tuple[Need, str]:
    return "optional", "what to do next (empty: Continue.)"


def _required(label: str) -> Callable[[Target], tuple[Need, str]]:
    return lambda _: ("required", label)


REASON = "reason (recorded in the job and the audit log)"
SESSION_REASON = "reason (optional, recorded in the session's audit log)"

ACTIONS: dict[str, Action] = {a.name: a for a in (
    Action("p", "pause", "cold-pause the session, or pause the worker", False, _none, _pause),
    Action("c", "continue", "continue a paused/detached session or worker", False,
           _continue_text, _continue),
    Action("S", "stop", "graceful stop: finalize, then retire the hosts", True, _stop_reason,
           _stop),
    Action("x", "cancel", "cancel at once: a session (root and live jobs) or a worker and "
           "its descendants", True,
           _cancel_reason, _cancel),
    Action("s", "steer", "steer the worker's running turn", False,
           _required("steering input for the running turn"), _steer, jobs_only=True),
    Action("A", "accept", "accept the worker's read result", False, _required(REASON),
           _dispose(api.accept_result), jobs_only=True),
    Action("R", "reject", "reject the result (removes a writer's worktree)", True,
           _required(REASON), _dispose(api.reject_result), jobs_only=True),
    Action("I", "integrate", "apply the accepted writer's patch to the workspace", True,
           _required(REASON), _dispose(api.integrate_patch), jobs_only=True),
)}


def refusal(action: Action, target: Target) -> str | None:
    """Why ``action`` does not apply to the row at all (before anything is asked)."""
    if action.jobs_only and not target.job_id:
        if action.name == "steer":
            return ("steer acts on a worker; the root takes new input when it continues "
                    "(p pause, then c continue)")
        return f"{action.name} acts on a worker's result; select a worker row"
    return None


def as_ui(call: Callable[[], Any]) -> tuple[bool, Any]:
    """``(True, what call returned)``, or ``(False, the error as one line)``: the call runs
    as the person at the terminal (``ui``), and no traceback ever reaches the screen."""
    try:
        with api.acting_as("ui", api.login_name()):
            return True, call()
    except Exception as exc:  # the view's boundary: one readable line
        return False, " ".join(str(exc).split()) or type(exc).__name__


def perform(action: Action, target: Target, text: str | None) -> tuple[bool, str]:
    """Run ``action`` on ``target``; ``(ok, the line to show)``."""
    ok, out = as_ui(lambda: action.run(target, text))
    return ok, out if ok else f"{action.name} {target.label} failed: {out}"


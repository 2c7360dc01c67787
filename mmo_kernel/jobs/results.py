"""Reading and disposing of a job's result (spec 04, "Results").

Any agent of the session may read a result; disposition (accept, reject,
integrate, cancel, controls) belongs to the session's root and to the job's
ancestors. Reads are exact character pages of ``result.md`` (or of the
partial result when there is no final one), and only files inside the job's
own directory are ever opened, whatever paths the record names.
"""

from __future__ import annotations

import json
from typing import Any

from mmo_kernel.jobs.authority import (
    check_caller_job,
    check_reason,
    load_session_job,
    require_disposition,
)
from mmo_kernel.jobs.records import (
    TERMINAL_JOB_STATUSES,
    apply_job_fields,
    public_job,
    read_job_record,
    write_job_record,
)
from mmo_kernel.jobs.result_files import RESULT_FILES, contained_result_file, read_result_file
from mmo_kernel.sessions.records import read_session_record, session_file, session_run_id
from mmo_kernel.state.audit import append_audit
from mmo_kernel.state.files import runtime_lock

DEFAULT_MAX_CHARS = 20000
MAX_PAGE_CHARS = 200000


# ---------------------------------------------------------------- reading --


def check_result_paths(record: dict[str, Any]) -> None:
    """Refuse the record if any result path it names leaves the job directory.

    Every recorded path is checked, also one this read would not open: a
    record pointing anywhere else is not trusted at all.
    """
    for field in RESULT_FILES:
        contained_result_file(record, field, default=False)


def read_job_text(record: dict[str, Any], field: str) -> str | None:
    """The UTF-8 text of a result file (never a symlinked leaf), or ``None`` if it is absent."""
    return read_result_file(record, field)


def _structured(record: dict[str, Any]) -> tuple[bool, Any]:
    """``(True, value)`` when the contract validated and ``result.json`` exists."""
    if record.get("contract_valid") is not True:
        return False, None
    text = read_job_text(record, "structured_result_path")
    if text is None:
        return False, None
    try:
        return True, json.loads(text)
    except json.JSONDecodeError:
        return False, None


def current_result(record: dict[str, Any]) -> tuple[str, str]:
    """``(result_kind, text)``: the final result, else the partial one; else an error."""
    final = read_job_text(record, "result_path")
    if final is not None and record.get("result_kind") != "partial":
        return "final", final
    partial = read_job_text(record, "partial_result_path")
    if partial is not None:
        return "partial", partial
    if final is not None:
        return "final", final
    raise RuntimeError(f"job {record['job_id']} has no result yet (status {record['status']}); "
                       "wait for it to finish (agents_wait; `mmo job show` for its status)")


def _check_page_args(cursor: Any, max_chars: Any) -> None:
    if not isinstance(cursor, int) or isinstance(cursor, bool) or cursor < 0:
        raise ValueError(f"cursor must be a non-negative integer, got {cursor!r}")
    if (not isinstance(max_chars, int) or isinstance(max_chars, bool)
            or not 1 <= max_chars <= MAX_PAGE_CHARS):
        raise ValueError(f"max_chars must be an integer from 1 to {MAX_PAGE_CHARS}, "
                         f"got {max_chars!r}")


def _audit(session_id: str, record: dict[str, Any], event: str, **fields: Any) -> None:
    """Append to the session's audit log (skipped only when the session itself is gone)."""
    try:
        session = read_session_record(session_id)
    except FileNotFoundError:
        return
    run_id = session_run_id(session) or record.get("run_id") or "unknown"
    append_audit(session_file(session_id, "audit.jsonl"), event, run_id,
                 job_id=record["job_id"], agent=record["agent"], **fields)


def _mark_read(job_id: str) -> bool:
    """``unread`` (or unset) -> ``read``, once, under the runtime lock; True if it moved."""
    with runtime_lock():
        record = read_job_record(job_id)
        if record.get("result_state") not in (None, "unread"):
            return False
        write_job_record(apply_job_fields(record, {"result_state": "read"}))
    return True


def read_result(job_id: str, session_id: str, cursor: int = 0,
                max_chars: int = DEFAULT_MAX_CHARS, caller_job_id: str | None = None,
                caller_agent: str | None = None) -> dict[str, Any]:
    """One page of the job's result; reading the last page marks it ``read``.

    With a validated contract and ``result.json``, the page at cursor 0 is
    the parsed value (``content_format = "json"``) and the whole result;
    otherwise pages are exact character slices of the text.
    """
    _check_page_args(cursor, max_chars)
    record = load_session_job(job_id, session_id)
    if caller_job_id is not None:
        check_caller_job({"session_id": session_id, "root_agent": None}, caller_agent,
                         caller_job_id)
    check_result_paths(record)
    kind, text = current_result(record)
    total = len(text)
    structured, value = _structured(record) if kind == "final" else (False, None)
    if cursor > total or (cursor == total and cursor > 0):
        raise ValueError(f"cursor {cursor} exceeds the result length ({total} characters)")
    if structured and cursor == 0:
        content, end, fmt = value, total, "json"
    else:
        end = min(total, cursor + max_chars)
        content, fmt = text[cursor:end], "text"
    last = end >= total
    state = record.get("result_state") or "unread"
    if last and _mark_read(job_id):
        state = "read"
        _audit(session_id, record, "agent_result_read", result_kind=kind,
               caller_agent=caller_agent, caller_job_id=caller_job_id)
    elif last:
        state = read_job_record(job_id).get("result_state") or state
    return {
        "job_id": job_id,
        "status": record["status"],
        "content_format": fmt,
        "content": content,
        "cursor": cursor,
        "next_cursor": None if last else end,
        "truncated": not last,
        "total_chars": total,
        "result_kind": kind,
        "result_state": state,
    }


# ------------------------------------------------------------- disposition --


def _dispose(job_id: str, reason: str, session_id: str, caller_agent: str | None,
             caller_job_id: str | None, new_state: str, event: str) -> dict[str, Any]:
    reason = check_reason(reason)
    session = read_session_record(session_id)
    verb = "accept" if new_state == "accepted" else "reject"
    with runtime_lock():
        record = load_session_job(job_id, session_id)
        require_disposition(record, session, caller_agent, caller_job_id, verb)
        if record["status"] not in TERMINAL_JOB_STATUSES:
            raise RuntimeError(f"cannot {verb} the result of job {job_id} while it is "
                               f"{record['status']}; wait for it to finish (or stop it)")
        if record.get("result_state") != "read":
            raise RuntimeError(f"result must be read before it can be {new_state} (job {job_id} "
                               f"result_state is {record.get('result_state') or 'unread'}); "
                               "read it to its last page first (agent_result, or `mmo job result`)")
        updated = write_job_record(apply_job_fields(record, {
            "result_state": new_state, "disposition_reason": reason,
            "disposed_by": caller_job_id or caller_agent or session["root_agent"]}))
    _audit(session_id, record, event, reason=reason, caller_agent=caller_agent,
           caller_job_id=caller_job_id)
    return updated


def accept_result(job_id: str, reason: str, session_id: str, caller_agent: str | None,
                  caller_job_id: str | None = None) -> dict[str, Any]:
    """Accept a read result (root or ancestors only); returns the public job record."""
    record = _dispose(job_id, reason, session_id, caller_agent, caller_job_id, "accepted",
                      "agent_result_accepted")
    return public_job(record)


def reject_result(job_id: str, reason: str, session_id: str, caller_agent: str | None,
                  caller_job_id: str | None = None) -> dict[str, Any]:
    """Reject a read result and remove the writer's worktree; returns the public record."""
    from mmo_kernel.jobs.workspace import job_workspace_cleanup

    record = _dispose(job_id, reason, session_id, caller_agent, caller_job_id, "rejected",
                      "agent_result_rejected")
    job_workspace_cleanup(record)
    return public_job(read_job_record(job_id))


__all__ = ["accept_result", "check_result_paths", "current_result", "read_job_text",
           "read_result", "reject_result"]

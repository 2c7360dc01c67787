"""Session record transitions: update, finish, taint, reconciliation on load (spec 03).

Reconciliation is a pure decision (``session_verdict``: what a reading would change,
given the processes that exist) and its write (``apply_verdict``); pure reads
(``sessions.peek``) use the decision alone.

Every change is read-modify-write under the runtime lock, so two processes
never interleave half-updates; a terminal session never changes status again.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import UTC, datetime
from typing import Any, NamedTuple

from mmo_kernel.sessions.records import (
    TERMINAL_SESSION_STATUSES,
    read_run_record,
    read_session_record,
    session_file,
    session_run_id,
    utc_now,
    write_run_record,
    write_session_record,
)
from mmo_kernel.state.audit import append_audit
from mmo_kernel.state.files import runtime_lock
from mmo_kernel.state.processes import process_matches

STARTUP_GRACE_SECONDS = 30.0
"""A ``starting`` session with no live host is failed once it is older than this."""

BOOKKEEPING_FIELDS = frozenset({"finished_at", "last_active_at"})
"""Fields a terminal session may still change."""

RUNNER_FIELDS = ("root_pid", "root_pgid", "root_start_token", "root_control_socket",
                 "root_control_socket_ready", "active_root_turn_id")
APP_SERVER_FIELDS = ("root_app_server_pid", "root_app_server_pgid",
                     "root_app_server_start_token")
HOST_FIELDS = RUNNER_FIELDS + APP_SERVER_FIELDS
ROOT_PARTIAL_NAME = "root-partial-result.md"


def relaunch_clears(record: dict[str, Any]) -> dict[str, Any]:
    """Host fields a relaunch removes: the dead runner's always, the app-server's only
    when it is gone too (a live one is kept for the new host to adopt)."""
    fields: dict[str, Any] = {f: REMOVE for f in RUNNER_FIELDS}
    if not process_matches(record.get("root_app_server_pid"),
                           record.get("root_app_server_start_token")):
        fields.update({f: REMOVE for f in APP_SERVER_FIELDS})
    return fields


def _apply_fields(record: dict[str, Any], fields: dict[str, Any]) -> dict[str, Any]:
    if record["status"] in TERMINAL_SESSION_STATUSES:
        forbidden = sorted(set(fields) - BOOKKEEPING_FIELDS)
        if forbidden:
            raise RuntimeError(
                f"terminal immutable session {record['session_id']} ({record['status']}) "
                f"cannot change {', '.join(forbidden)}"
            )
    updated = dict(record)
    for key, value in fields.items():
        if value is _REMOVE:
            updated.pop(key, None)
        else:
            updated[key] = value
    return updated


class _Remove:
    def __repr__(self) -> str:
        return "REMOVE"


_REMOVE: Any = _Remove()
REMOVE = _REMOVE
"""Pass as a field value to delete the field (records omit unset fields)."""


def update_session(session_id: str, *, status_if: Collection[str] | None = None,
                   **fields: Any) -> dict[str, Any]:
    """Change fields of a session record atomically; terminal sessions keep their status.

    With ``status_if``, ``status`` changes only while the record's status is one of
    them (checked under the lock): a host publishing ``running`` after start-up never
    overwrites a ``detached`` the caller wrote meanwhile. The other fields always apply.
    A status change is mirrored on the session's run (its status follows the session's).
    """
    with runtime_lock():
        record = read_session_record(session_id)
        if status_if is not None and record["status"] not in status_if:
            fields.pop("status", None)
        updated = _apply_fields(record, fields)
        run = _run_to_sync(record, updated)  # read first: an unreadable run changes nothing
        updated = write_session_record(updated)
        _sync_run(updated, run)
        return updated


def _run_to_sync(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any] | None:
    """The run record a status change must follow, read *before* anything is written, so a
    truncated or invalid ``run.json`` refuses the whole change instead of half of it."""
    run_id = session_run_id(before)
    if not run_id or after.get("status") == before["status"]:
        return None
    return read_run_record(before["session_id"], run_id)


def _sync_run(record: dict[str, Any], run: dict[str, Any] | None) -> None:
    """The run's status follows the session's; a terminal run is closed in place."""
    if run is None:
        return
    run["status"] = record["status"]
    if record["status"] in TERMINAL_SESSION_STATUSES:
        run["finished_at"] = record.get("finished_at") or utc_now()
    write_run_record(run)


def _transitioned(record: dict[str, Any], status: str, fields: dict[str, Any]) -> dict[str, Any]:
    """The record ``transition`` writes for a session that is not terminal (pure)."""
    now = utc_now()
    fields = {"status": status, "last_active_at": now, **fields}
    if status in TERMINAL_SESSION_STATUSES:
        run_id = session_run_id(record)
        fields.update(finished_at=now, current_run_id=None, last_run_id=run_id)
    if status == "stopped":  # a stop retires the hosts: their identity goes with them
        fields.update({field: REMOVE for field in HOST_FIELDS if field not in fields})
    return _apply_fields(record, fields)


def transition(session_id: str, status: str, **fields: Any) -> dict[str, Any]:
    """Move a session to ``status`` (terminal or not) together with its run."""
    with runtime_lock():
        record = read_session_record(session_id)
        if record["status"] in TERMINAL_SESSION_STATUSES:
            return record
        updated = _transitioned(record, status, fields)
        run = _run_to_sync(record, updated)
        updated = write_session_record(updated)
        _sync_run(updated, run)
    if status in TERMINAL_SESSION_STATUSES:
        session_file(session_id, "capabilities.json").unlink(missing_ok=True)
    return updated


def finish_session(session_id: str, exit_code: int, error: str | None = None,
                   expected_run_id: str | None = None) -> dict[str, Any]:
    """Terminalize after a run ends; a late finish for a detached run leaves it detached."""
    record = read_session_record(session_id)
    if record["status"] in TERMINAL_SESSION_STATUSES:
        return record
    if (expected_run_id is not None and record["status"] == "detached"
            and expected_run_id == record.get("current_run_id")):
        return record
    fields: dict[str, Any] = {}
    if error:
        fields["error"] = error
    return transition(session_id, "completed" if exit_code == 0 else "failed", **fields)


def mark_session_running(session_id: str, pid: int) -> dict[str, Any]:
    """Record an attached *client* (never a host: MMO signals only processes it launched)."""
    from mmo_kernel.state.processes import process_start_token

    token = process_start_token(pid)
    if token is None:
        raise RuntimeError(f"cannot attach client pid {pid}: no such process")
    return update_session(session_id, status="running", root_client_pid=pid,
                          root_client_start_token=token, last_active_at=utc_now())


def taint_session(session_id: str, reason: str, **details: Any) -> dict[str, Any]:
    """Durably mark the session unsafe; spawns and integrations stop until a tainted resume."""
    with runtime_lock():
        record = read_session_record(session_id)
        reasons = list(record.get("taint_reasons") or [])
        entry = {"reason": reason, "at": utc_now(), **details}
        reasons.append(entry)
        updated = dict(record, tainted=True, taint_reasons=reasons)
        write_session_record(updated)
    run_id = session_run_id(record) or ""
    append_audit(session_file(session_id, "audit.jsonl"), "session_tainted", run_id,
                 reason=reason, **details)
    return updated


def _age_seconds(stamp: str | None) -> float:
    if not stamp:
        return float("inf")
    return (datetime.now(UTC) - datetime.fromisoformat(stamp)).total_seconds()


def host_alive(record: dict[str, Any]) -> bool:
    return process_matches(record.get("root_pid"), record.get("root_start_token"))


def client_alive(record: dict[str, Any]) -> bool:
    return process_matches(record.get("root_client_pid"), record.get("root_client_start_token"))


class SessionVerdict(NamedTuple):
    """What a reconciling read does to a session record, decided without changing anything:
    the session moves to ``status`` with ``fields``."""

    case: str
    """``cold_pause``, ``runner_lost``, ``stale_starting`` or ``host_lost``."""
    status: str
    fields: dict[str, Any]


def cold_pause_fields(session_id: str) -> dict[str, Any]:
    """What finishing a cold pause writes besides ``status = paused``: the marker and the
    retired hosts' identity go, the root's partial result is named."""
    return {"cold_pause_pending": REMOVE,
            "partial_result_path": str(session_file(session_id, ROOT_PARTIAL_NAME)),
            **{field: REMOVE for field in HOST_FIELDS}}


def _lost(reason: str) -> dict[str, Any]:
    return {"error": reason, "failure": {"kind": "host_lost", "retryable": True,
                                         "message": reason}}


def _host_lost(record: dict[str, Any]) -> SessionVerdict:
    """``suspended`` with what really happened; the lost host's identity is kept (spec 03)."""
    pid = record.get("root_pid")
    host = f"root host {pid}" if pid is not None else "root host"
    if record.get("root_thread_id"):
        reason = f"{host} is gone"
    else:
        reason = f"{host} died during start-up, before the root thread existed"
    return SessionVerdict("host_lost", "suspended", _lost(reason))


def _runner_lost(record: dict[str, Any]) -> SessionVerdict:
    """An ``external`` session's host is the ``mmo runner`` recorded as its client: gone,
    the session is ``suspended`` until a runner serves it again (spec 12)."""
    pid = record.get("root_client_pid")
    reason = f"the mmo runner serving this session (pid {pid}) is gone"
    return SessionVerdict("runner_lost", "suspended", _lost(reason))


def _host_verdict(record: dict[str, Any]) -> SessionVerdict | None:
    """``reconcile``'s rules (see there)."""
    status = record["status"]
    if status not in ("starting", "running", "detached"):
        return None
    if host_alive(record) or client_alive(record):
        return None
    if record.get("session_kind") == "external":
        return _runner_lost(record)
    recorded = record.get("root_pid") is not None
    if status == "starting" and not recorded:
        created = record.get("run_created_at") or record.get("created_at")
        if _age_seconds(created) > STARTUP_GRACE_SECONDS:
            return SessionVerdict("stale_starting", "failed",
                                  {"error": "root host never started (stale starting)"})
        return None
    if not recorded and (status == "detached" or record.get("session_kind") == "interactive"):
        return None
    return _host_lost(record)


def session_verdict(record: dict[str, Any]) -> SessionVerdict | None:
    """The reconciliation a reading of the session (``load_session``) does, or None; a pure
    decision that checks the recorded processes' identity and writes nothing.

    An unfinished cold pause comes first (it is finished whatever the hosts do);
    otherwise ``reconcile``'s rules.
    """
    if record.get("cold_pause_pending") and record["status"] not in TERMINAL_SESSION_STATUSES:
        return SessionVerdict("cold_pause", "paused", cold_pause_fields(record["session_id"]))
    return _host_verdict(record)


def reconciled_session(record: dict[str, Any], verdict: SessionVerdict) -> dict[str, Any]:
    """The session record a reconciling read writes for ``verdict``, computed without
    writing (times that the write stamps are now)."""
    if verdict.case == "cold_pause":
        return _apply_fields(record, {"status": verdict.status, **verdict.fields})
    return _transitioned(record, verdict.status, verdict.fields)


def apply_verdict(record: dict[str, Any], verdict: SessionVerdict) -> dict[str, Any]:
    """Write a host verdict: ``transition`` only if the record still names the same status
    and host as when it was decided, so a change made meanwhile (a continue that launched
    a new host, a host that published itself) is never overwritten."""
    keys = ("status", "root_pid", "root_start_token", "root_client_pid",
            "root_client_start_token")
    with runtime_lock():
        current = read_session_record(record["session_id"])
        if any(current.get(k) != record.get(k) for k in keys):
            return current
        return transition(record["session_id"], verdict.status, **verdict.fields)


def reconcile(record: dict[str, Any]) -> dict[str, Any]:
    """Bring a record in line with the processes that really exist (run on load).

    A live session (``starting``, ``running``, ``detached``) whose recorded host is
    dead, with no attached client either, is ``suspended`` with the reason; it can be
    continued (from the recorded prompt when no root thread exists yet). An
    ``external`` session's host is its recorded ``mmo runner``. Only a ``starting``
    session that never recorded a host is ``failed``, after the grace.
    """
    verdict = _host_verdict(record)
    return record if verdict is None else apply_verdict(record, verdict)

"""Loading and listing jobs, reconciling records with the processes that really exist.

``load_job`` and ``list_jobs`` repair what a crash left behind: a working job
whose runner is gone becomes ``suspended`` (its app-server is killed with it,
a partial result says the work is on a persisted app-server thread), and an
interrupted cold pause is finished (hosts retired, ``paused``). The pure
enumeration ``iter_job_records`` never changes anything.
"""

from __future__ import annotations

import errno
import fcntl
import os
from datetime import UTC, datetime
from typing import Any

from mmo_kernel.hosts.evidence import partial_text
from mmo_kernel.jobs.records import (
    HOST_IDENTITY_FIELDS,
    TERMINAL_JOB_STATUSES,
    apply_job_fields,
    job_file,
    jobs_root,
    read_job_record,
    write_job_record,
)
from mmo_kernel.sessions.records import session_file
from mmo_kernel.state.files import atomic_write_text, runtime_lock
from mmo_kernel.state.processes import process_matches, terminate_process_groups

WORKING_STATUSES = frozenset({"running", "waiting", "detached"})
NEVER_LAUNCHED_GRACE_SECONDS = 60.0
"""A ``queued`` job with no runner this much older than its creation was never launched."""
RETIRE_GRACE_SECONDS = 2.0
PARTIAL_NAME = "partial-result.md"
HOST_PROCESS_FIELDS = (("runner_pid", "runner_pgid", "runner_start_token"),
                       ("app_server_pid", "app_server_pgid", "app_server_start_token"))
"""``(pid, pgid, start token)`` of each process group a job's host records (spec 04)."""


def runner_alive(record: dict[str, Any]) -> bool:
    return process_matches(record.get("runner_pid"), record.get("runner_start_token"))


def host_answers(record: dict[str, Any]) -> bool:
    """Whether the job's host can still take a control. A host publishes ``suspended``
    only after it retired its control socket and app-server, so a suspended job's
    runner that is still exiting never answers: controls take the host-less path."""
    return record["status"] != "suspended" and runner_alive(record)


def app_server_alive(record: dict[str, Any]) -> bool:
    return process_matches(record.get("app_server_pid"), record.get("app_server_start_token"))


def host_alive(record: dict[str, Any]) -> bool:
    """True when the job's runner or its app-server (identity-checked) still exists."""
    return runner_alive(record) or app_server_alive(record)


def retire_hosts(record: dict[str, Any], grace_seconds: float = RETIRE_GRACE_SECONDS) -> None:
    """Kill the runner and app-server process groups MMO recorded, if they are still them."""
    groups = []
    for pid_field, pgid_field, token_field in HOST_PROCESS_FIELDS:
        pid, token = record.get(pid_field), record.get(token_field)
        pgid = record.get(pgid_field) or pid
        if process_matches(pid, token) and isinstance(pgid, int) and pgid > 1:
            groups.append(pgid)
    if groups:
        terminate_process_groups(groups, grace_seconds)


def write_job_partial(job_id: str, reason: str, keep_existing: bool = False) -> str:
    """Write ``partial-result.md`` from the job's events (never invented); returns its path."""
    path = job_file(job_id, PARTIAL_NAME)
    if not (keep_existing and path.exists()):
        atomic_write_text(path, partial_text(job_file(job_id, "events.jsonl"), reason))
    return str(path)


def lost_runner_reason(record: dict[str, Any]) -> str:
    thread = record.get("app_server_thread_id")
    if thread:
        return (f"The job's runner is gone. The work is on a persisted app-server thread "
                f"({thread}) and can be continued with `continue` on the same thread.")
    return ("The job's runner is gone before its persisted app-server thread existed; "
            "`continue` starts the task again.")


def _conditional_update(job_id: str, expected: dict[str, Any],
                        fields: dict[str, Any]) -> dict[str, Any]:
    """Apply ``fields`` only if the record still has the ``expected`` values."""
    with runtime_lock():
        record = read_job_record(job_id)
        if any(record.get(k) != v for k, v in expected.items()):
            return record
        return write_job_record(apply_job_fields(record, fields))


def _suspend_lost_runner(record: dict[str, Any]) -> dict[str, Any]:
    job_id = record["job_id"]
    if app_server_alive(record):
        terminate_process_groups([record.get("app_server_pgid") or record["app_server_pid"]],
                                 RETIRE_GRACE_SECONDS)
    reason = lost_runner_reason(record)
    fields: dict[str, Any] = {
        "status": "suspended",
        "partial_result_path": write_job_partial(job_id, reason),
        "failure": {"kind": "host_lost", "retryable": True, "message": reason},
    }
    if record.get("result_kind") != "final":
        fields["result_kind"] = "partial"
    expected = {"status": record["status"], "runner_start_token": record.get("runner_start_token")}
    return _conditional_update(job_id, expected, fields)


def _pause_in_progress(session_id: str) -> bool:
    """True while some process (this one included) holds the session's lifecycle lock."""
    try:
        path = session_file(session_id, "lifecycle.lock")
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except (OSError, RuntimeError, ValueError):
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        return exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN)
    finally:
        os.close(fd)  # closing the descriptor releases a probe lock we obtained
    return False


def _finish_cold_pause(record: dict[str, Any]) -> dict[str, Any]:
    job_id = record["job_id"]
    if _pause_in_progress(record["session_id"]):
        return record
    retire_hosts(record)
    fields: dict[str, Any] = {"cold_pause_pending": None}
    if record["status"] not in TERMINAL_JOB_STATUSES:
        reason = "The job was cold-paused; its thread is kept and `continue` resumes it."
        fields.update(status="paused",
                      partial_result_path=write_job_partial(job_id, reason, keep_existing=True),
                      **{name: None for name in HOST_IDENTITY_FIELDS})
        if record.get("result_kind") != "final":
            fields["result_kind"] = "partial"
    return _conditional_update(job_id, {"cold_pause_pending": record.get("cold_pause_pending")},
                               fields)


def _never_launched(record: dict[str, Any]) -> bool:
    if record["status"] != "queued" or record.get("runner_pid") is not None:
        return False
    try:
        created = datetime.fromisoformat(record["created_at"])
    except (TypeError, ValueError):
        return False
    if created.tzinfo is None:
        created = created.replace(tzinfo=UTC)
    return (datetime.now(UTC) - created).total_seconds() > NEVER_LAUNCHED_GRACE_SECONDS


def reconcile_job(record: dict[str, Any]) -> dict[str, Any]:
    """Bring one record in line with its processes; returns the (possibly new) record."""
    if record.get("cold_pause_pending"):
        return _finish_cold_pause(record)
    if _never_launched(record):
        return _conditional_update(record["job_id"], {"status": "queued", "runner_pid": None},
                                   {"status": "failed",
                                    "error": "the job host was never launched"})
    if (record["status"] in WORKING_STATUSES and record.get("runner_pid") is not None
            and not runner_alive(record)):
        return _suspend_lost_runner(record)
    return record


def load_job(job_id: str) -> dict[str, Any]:
    """The job record after reconciliation; unknown jobs raise ``FileNotFoundError``."""
    return reconcile_job(read_job_record(job_id))


def _job_ids() -> list[str]:
    root = jobs_root()
    if not root.exists():
        return []
    return [entry.name for entry in root.iterdir()
            if not entry.name.startswith(".") and (entry / "metadata.json").exists()]


def _newest_first(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(records, key=lambda r: (r.get("created_at", ""), r["job_id"]), reverse=True)


def iter_job_records(session_id: str | None = None) -> list[dict[str, Any]]:
    """Every job record (of one session), newest first; a pure read.

    An unreadable record raises ``RuntimeError("invalid job state ...")``
    naming the directory instead of being skipped.
    """
    records = []
    for job_id in _job_ids():
        try:
            record = read_job_record(job_id)
        except (ValueError, RuntimeError, FileNotFoundError, OSError) as exc:
            raise RuntimeError(f"invalid job state in {jobs_root() / job_id}: {exc}") from exc
        if session_id is None or record["session_id"] == session_id:
            records.append(record)
    return _newest_first(records)


def list_jobs(session_id: str | None = None) -> list[dict[str, Any]]:
    """Jobs (of one session), newest first, each reconciled like ``load_job``."""
    return _newest_first([reconcile_job(r) for r in iter_job_records(session_id)])


def holds_capacity(record: dict[str, Any]) -> bool:
    """Whether a job occupies admission capacity right now (spec 04 "capacity").

    Terminal jobs never do; working jobs do unless their recorded runner is
    gone; paused/suspended jobs only while a host of theirs is still alive.
    """
    status = record["status"]
    if status in TERMINAL_JOB_STATUSES:
        return False
    if status in ("paused", "suspended"):
        return host_alive(record)
    if record.get("runner_pid") is None:
        return True
    return runner_alive(record)


def live_jobs(session_id: str | None = None) -> list[dict[str, Any]]:
    """Jobs holding capacity (across all sessions when ``session_id`` is None)."""
    return [r for r in iter_job_records(session_id) if holds_capacity(r)]

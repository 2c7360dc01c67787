"""Loading and listing jobs, reconciling records with the processes that really exist.

``load_job`` and ``list_jobs`` repair what a crash left behind: a working job
whose runner is gone becomes ``suspended`` (its app-server is killed with it,
a partial result says the work is on a persisted app-server thread), and an
interrupted cold pause is finished (hosts retired, ``paused``). Each repair is a
pure decision (``job_verdict``, from the recorded processes' identity) carried out
by ``reconcile_job``; ``jobs.peek`` reports the decision without carrying it out.
The pure enumeration ``iter_job_records`` changes no record.
"""

from __future__ import annotations

import errno
import fcntl
import os
from collections.abc import Collection
from datetime import UTC, datetime
from typing import Any, NamedTuple

from mmo_kernel.hosts.evidence import partial_text
from mmo_kernel.jobs.index_rows import record_summary
from mmo_kernel.jobs.index_rows import summary as job_summary
from mmo_kernel.jobs.indexed import (
    invalid_state,
    job_rows,
    record_path,
    refresh_jobs,
    unreadable,
)
from mmo_kernel.jobs.records import (
    HOST_IDENTITY_FIELDS,
    JOB_STATUSES,
    TERMINAL_JOB_STATUSES,
    apply_job_fields,
    job_file,
    jobs_root,
    read_job_record,
    write_job_record,
)
from mmo_kernel.sessions.records import session_file
from mmo_kernel.state import index
from mmo_kernel.state.files import atomic_write_text, runtime_lock
from mmo_kernel.state.processes import process_matches, terminate_process_groups
from mmo_kernel.state.records import unreadable_row

WORKING_STATUSES = frozenset({"running", "waiting", "detached"})
LIVE_JOB_STATUSES = frozenset(JOB_STATUSES) - TERMINAL_JOB_STATUSES
PAGE_SLACK = 16
"""Rows a limited listing fetches beyond its limit, for those a reconciliation filters out."""
NEVER_LAUNCHED_GRACE_SECONDS = 60.0
"""A ``queued`` job with no runner this much older than its creation was never launched."""
RETIRE_GRACE_SECONDS = 2.0
PARTIAL_NAME = "partial-result.md"
COLD_PAUSE_REASON = "The job was cold-paused; its thread is kept and `continue` resumes it."
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


def _pause_in_progress(session_id: str) -> bool:
    """True while some process (this one included) holds the session's lifecycle lock.
    Only probes an existing lock file (opened read-only): it creates or changes nothing."""
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


def _case(record: dict[str, Any]) -> str | None:
    """Which reconciliation rule applies to a record (or to an index row's status,
    ``created_at`` and host identity); None: the record is in line with its processes."""
    if record.get("cold_pause_pending"):
        return "cold_pause"
    if _never_launched(record):
        return "never_launched"
    if (record["status"] in WORKING_STATUSES and record.get("runner_pid") is not None
            and not runner_alive(record)):
        return "runner_lost"
    return None


class JobVerdict(NamedTuple):
    """What a reconciling read does to one job record, decided without changing anything:
    ``fields`` are written if the record still has the ``expected`` values."""

    case: str
    """``cold_pause``, ``never_launched`` or ``runner_lost``."""
    expected: dict[str, Any]
    fields: dict[str, Any]
    partial_reason: str | None = None
    """What the partial result written first says (None: none is written)."""


def job_verdict(record: dict[str, Any]) -> JobVerdict | None:
    """The reconciliation a record needs (spec 04), or None; a pure decision: it checks the
    recorded processes' identity and probes the session's lifecycle lock, nothing more."""
    case = _case(record)
    if case is None:
        return None
    partial = str(job_file(record["job_id"], PARTIAL_NAME))
    if case == "cold_pause":
        if _pause_in_progress(record["session_id"]):
            return None  # a pause still in progress, not an interrupted one
        fields: dict[str, Any] = {"cold_pause_pending": None}
        reason = None
        if record["status"] not in TERMINAL_JOB_STATUSES:
            reason = COLD_PAUSE_REASON
            fields.update(status="paused", partial_result_path=partial,
                          **{name: None for name in HOST_IDENTITY_FIELDS})
            if record.get("result_kind") != "final":
                fields["result_kind"] = "partial"
        return JobVerdict(case, {"cold_pause_pending": record.get("cold_pause_pending")},
                          fields, reason)
    if case == "never_launched":
        return JobVerdict(case, {"status": "queued", "runner_pid": None},
                          {"status": "failed", "error": "the job host was never launched"})
    reason = lost_runner_reason(record)  # runner_lost
    fields = {"status": "suspended", "partial_result_path": partial,
              "failure": {"kind": "host_lost", "retryable": True, "message": reason}}
    if record.get("result_kind") != "final":
        fields["result_kind"] = "partial"
    return JobVerdict(case, {"status": record["status"],
                             "runner_start_token": record.get("runner_start_token")},
                      fields, reason)


def reconciled_record(record: dict[str, Any], verdict: JobVerdict) -> dict[str, Any]:
    """The record a reconciling read writes for ``verdict``, computed without writing."""
    return apply_job_fields(record, verdict.fields)


def _carry_out(record: dict[str, Any], verdict: JobVerdict) -> dict[str, Any]:
    """Do what ``verdict`` says: retire the hosts it names, write the partial, the record."""
    if verdict.case == "cold_pause":
        retire_hosts(record)
    elif verdict.case == "runner_lost" and app_server_alive(record):
        terminate_process_groups([record.get("app_server_pgid") or record["app_server_pid"]],
                                 RETIRE_GRACE_SECONDS)
    if verdict.partial_reason is not None:
        write_job_partial(record["job_id"], verdict.partial_reason,
                          keep_existing=verdict.case == "cold_pause")
    return _conditional_update(record["job_id"], verdict.expected, verdict.fields)


def reconcile_job(record: dict[str, Any]) -> dict[str, Any]:
    """Bring one record in line with its processes; returns the (possibly new) record."""
    verdict = job_verdict(record)
    return record if verdict is None else _carry_out(record, verdict)


def load_job(job_id: str) -> dict[str, Any]:
    """The job record after reconciliation; unknown jobs raise ``FileNotFoundError``.

    An integration whose process was killed is settled first (rolled back, or
    its ``integrated`` kept), so the record and the workspace agree.
    """
    # here, not at the top: recovery pulls in the workspace and driver layers; listing never does
    from mmo_kernel.jobs.integration_recovery import recover_interrupted_integration

    recover_interrupted_integration(job_id)
    return reconcile_job(read_job_record(job_id))


def _newest_first(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(records, key=lambda r: (r.get("created_at", ""), r["job_id"]), reverse=True)


def reconcile_needed(record: dict[str, Any]) -> bool:
    """Whether a reconciliation rule applies to this record (or to an index row's status,
    ``created_at`` and host identity), without changing anything."""
    return _case(record) is not None


def _strict_read(row: Any, path: str) -> dict[str, Any]:
    """A row's record as it is: the exact bytes the index row was built from (validated
    then), else a strict read of the file as it is now."""
    ident = row.identity
    if ident is not None:
        doc = index.load_unchanged(path, ident)
        if doc is not None:
            return doc
    return read_job_record(row.id)


def _select(session_id: str | None, include_unreadable: bool, *, reconcile: bool,
            summary_only: bool = False, wanted: frozenset[str] | None = None,
            agent: str | None = None, profile: str | None = None, since: str | None = None,
            limit: int | None = None) -> list[dict[str, Any]]:
    """The jobs a listing asks for, from the refreshed index (see ``list_jobs``)."""
    refresh_jobs()
    errors = list(job_rows(errors=True))
    if errors and not include_unreadable:
        raise invalid_state(errors[0])
    root = str(jobs_root())
    out: list[dict[str, Any]] = []
    rows = job_rows(session_id=session_id, statuses=wanted, agent=agent, profile=profile,
                    since=since, reconcilable=reconcile,
                    batch=None if limit is None else limit + PAGE_SLACK)
    for row in rows:
        if limit is not None and len(out) >= limit:
            break
        if summary_only and not (reconcile and row.reconcile):
            out.append(job_summary(row))  # filtered in the index already
            continue
        path = f"{root}/{row.id}/metadata.json"
        try:
            if reconcile and row.reconcile and (not summary_only or reconcile_needed(
                    {"status": row.status, "created_at": row.created_at, **row.host})):
                record = reconcile_job(read_job_record(row.id))
            elif summary_only:
                out.append(job_summary(row))  # nothing a reconciliation would change
                continue
            else:
                record = _strict_read(row, path)
        except FileNotFoundError:
            continue  # removed meanwhile
        except (ValueError, RuntimeError, OSError) as exc:
            if not include_unreadable:
                raise RuntimeError(f"invalid job state in {root}/{row.id}: {exc}") from exc
            out.append(unreadable_row("job_id", row.id, record_path(row.id), exc,
                                      session_id=row.session_id, created_at=row.created_at))
            continue
        if wanted is None or record["status"] in wanted:
            out.append(record_summary(record, record_path(row.id)) if summary_only else record)
    bad = [unreadable(row) for row in errors if session_id is None or row.session_id == session_id]
    return _newest_first(out + bad) if bad else out  # the index's order otherwise


def iter_job_records(session_id: str | None = None, include_unreadable: bool = False, *,
                     status: str | Collection[str] | None = None) -> list[dict[str, Any]]:
    """Every job record (of one session; in ``status``), newest first; a pure read of
    the records (the listing index is refreshed first, which changes no record).

    An unreadable record raises ``RuntimeError("invalid job state ...")``
    naming the directory instead of being skipped; with ``include_unreadable``
    it is an ``unreadable`` row instead.
    """
    wanted = index.statuses_arg(status, JOB_STATUSES, "job")
    return index.attempt(lambda: _select(session_id, include_unreadable, reconcile=False,
                                         wanted=wanted))


def list_jobs(session_id: str | None = None, include_unreadable: bool = False, *,
              status: str | Collection[str] | None = None, agent: str | None = None,
              profile: str | None = None, since: str | datetime | None = None,
              limit: int | None = None, summary: bool = False) -> list[dict[str, Any]]:
    """Jobs (of one session), newest first, each reconciled like ``load_job``.

    Served from the listing index (``state.index``; every record file is stat'ed and the
    changed ones re-read first). Filters: ``status`` (one or several), ``agent``,
    ``profile`` (the job's, else its session's profile id), ``since`` (``created_at``
    at or after an ISO time); ``limit`` keeps the newest N. Only the jobs whose status
    a reconciliation may change are reconciled; the others are returned as they are.
    ``summary=True`` returns summaries (``job_id``, ``session_id``, ``agent``,
    ``profile_id``, ``cwd``, ``status``, ``created_at``, ``progress_revision``,
    ``result_state``, ``updated_at``) and reads no record that needs no reconciling.

    An unreadable record raises ``RuntimeError("invalid job state ...")``; with
    ``include_unreadable`` it is an ``unreadable`` row, listed as it is, kept by every
    filter but the session's and beyond the limit.
    """
    wanted = index.statuses_arg(status, JOB_STATUSES, "job")
    after, most = index.since_arg(since), index.limit_arg(limit)
    return index.attempt(lambda: _select(session_id, include_unreadable, reconcile=True,
                                         summary_only=summary, wanted=wanted, agent=agent,
                                         profile=profile, since=after, limit=most))


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
    """Jobs holding capacity (across all sessions when ``session_id`` is None); only
    records the index says are not terminal are read."""
    return [r for r in iter_job_records(session_id, status=LIVE_JOB_STATUSES)
            if holds_capacity(r)]

"""Job records on disk: statuses, the tolerant strict reader, atomic updates (spec 04).

A job lives in ``<state>/jobs/<job_id>/`` with ``metadata.json`` (the record).
Readers accept any record that carries the seven identity fields; every other
field is optional but type-checked when present, so a hand-written record is
readable while a corrupted one fails loudly. Records omit unset fields: a
``None`` passed to ``update_job`` removes the key instead of storing ``null``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import ConfigDict

from mmo_kernel import package_version
from mmo_kernel.errors import RecordError
from mmo_kernel.jobs.index_rows import publish_job
from mmo_kernel.sessions.records import new_record_id, utc_now
from mmo_kernel.sessions.state import REMOVE
from mmo_kernel.state.files import (
    MMO_SCHEMA_VERSION,
    atomic_write_json,
    ensure_state_layout,
    runtime_lock,
    safe_path,
)
from mmo_kernel.state.paths import state_dir
from mmo_kernel.state.records import StrictRecord, read_record, validate_model

if TYPE_CHECKING:
    from mmo_kernel.plugin.drivers import ExecutionHost

JOB_STATUSES = ("queued", "running", "waiting", "paused", "detached", "suspended",
                "completed", "completed_with_warnings", "failed", "cancelled", "stopped")
TERMINAL_JOB_STATUSES = frozenset({"completed", "completed_with_warnings", "failed",
                                   "cancelled", "stopped"})
ACTIVE_JOB_STATUSES = frozenset({"queued", "running", "waiting", "detached"})
"""Statuses in which a job's host is supposed to be working."""
JobStatus = Literal["queued", "running", "waiting", "paused", "detached", "suspended",
                    "completed", "completed_with_warnings", "failed", "cancelled", "stopped"]

RETIRED_JOB_FIELDS = ("progress_interval_seconds", "timeout_seconds", "execution_policy",
                      "active_work_seconds", "active_work_cap_seconds",
                      "automatic_renewal_enabled", "output_schema_path",
                      "structured_output_supported")
REQUIRED_JOB_FIELDS = ("schema_version", "package_version", "job_id", "session_id", "agent",
                       "status", "created_at")

PROGRESS_FIELDS = frozenset({
    "status", "active_turn_id", "last_turn_id", "control_revision", "last_control_status",
    "result_path", "structured_result_path", "result_kind", "result_state", "goal_status",
})
"""A change to any of these bumps ``progress_revision`` (status, turns, controls, results)."""

HOST_IDENTITY_FIELDS = ("runner_pid", "runner_pgid", "runner_start_token", "app_server_pid",
                        "app_server_pgid", "app_server_start_token", "control_socket_path",
                        "control_socket_ready", "active_turn_id")
"""Removed when a host is retired on purpose (pause, stop, cancel); kept on suspension."""

_JOB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")


class JobRecord(StrictRecord):
    """``metadata.json``: seven required fields, every other known field optional but typed.

    Unknown extra fields are tolerated (hosts and later MMO parts add
    bookkeeping); retired fields are refused by the reader.
    """

    model_config = ConfigDict(extra="allow", strict=True)

    schema_version: int
    package_version: str
    job_id: str
    session_id: str
    agent: str
    status: JobStatus
    created_at: str
    run_id: str | None = None
    profile_id: str | None = None
    snapshot_hash: str | None = None
    caller_agent: str | None = None
    caller_job_id: str | None = None
    depth: int | None = None
    batch_id: str | None = None
    task: str | None = None
    task_kind: str | None = None
    literal_task: dict[str, Any] | None = None
    mode: Literal["read-only", "workspace-write"] | None = None
    write_scope: list[str] | None = None
    write_scope_resolved: list[str] | None = None
    attachments: list[str] | None = None
    approval_policy: str | None = None
    execution_mode: Literal["goal", "turn"] | None = None
    goal_token_budget: int | None = None
    max_goal_token_budget: int | None = None
    goal_objective: str | None = None
    goal_status: str | None = None
    command: list[str] | None = None
    cwd: str | None = None
    workspace: dict[str, Any] | None = None
    runner_pid: int | None = None
    runner_pgid: int | None = None
    runner_start_token: str | None = None
    app_server_pid: int | None = None
    app_server_pgid: int | None = None
    app_server_start_token: str | None = None
    app_server_thread_id: str | None = None
    active_turn_id: str | None = None
    last_turn_id: str | None = None
    control_socket_path: str | None = None
    control_socket_ready: bool | None = None
    control_revision: int | None = None
    last_control_action: str | None = None
    last_control_status: Literal["pending", "applied", "delivery_unknown", "failed"] | None = None
    recovery_attempts: int | None = None
    recovery_error: str | None = None
    usage: dict[str, Any] | None = None
    output_contract: Any = None
    contract_enforcement: Literal["strict", "warn"] | None = None
    contract_transport: str | None = None
    contract_valid: bool | None = None
    contract_repair_attempted: bool | None = None
    result_kind: Literal["final", "partial"] | None = None
    result_state: Literal["unread", "read", "accepted", "rejected", "integrated"] | None = None
    result_path: str | None = None
    structured_result_path: str | None = None
    partial_result_path: str | None = None
    events_path: str | None = None
    stderr_path: str | None = None
    runner_log_path: str | None = None
    patch: dict[str, Any] | None = None
    artifacts: list[dict[str, Any]] | None = None
    warning: str | None = None
    error: str | None = None
    failure: dict[str, Any] | None = None
    cancel_reason: str | None = None
    fork_source_job_id: str | None = None
    fork_thread_id: str | None = None
    fork_from_thread_id: str | None = None
    host: str | None = None
    agent_run_ref: str | None = None
    resource_lock_key: str | None = None
    resource_units: int | None = None
    mcp_caller_token_hash: str | None = None
    progress_revision: int | None = None
    cold_pause_pending: bool | None = None
    host_package_version: str | None = None
    host_runtime_digest: str | None = None
    started_at: str | None = None
    finished_at: str | None = None

    @property
    def revision(self) -> int:
        """The revision a control must name: ``control_revision``, 0 before the first control."""
        return self.control_revision or 0


def control_revision(record: Mapping[str, Any]) -> int:
    """``JobRecord.revision`` of a raw record dict, without validating all of it."""
    return JobRecord.model_construct(control_revision=record.get("control_revision")).revision


def jobs_root() -> Path:
    return safe_path(state_dir(), "jobs", what="jobs directory")


def check_job_id(job_id: Any) -> str:
    """A job id usable as one path component; anything else is an unknown job."""
    if not isinstance(job_id, str) or not _JOB_ID.match(job_id) or ".." in job_id:
        raise FileNotFoundError(f"no MMO job {job_id!r}: not an MMO job id")
    return job_id


def new_job_id(agent: str) -> str:
    """``YYYYMMDD-HHMMSS-<agent slug>-<random>``: job ids sort by creation time."""
    return new_record_id(agent)


def job_dir(job_id: str) -> Path:
    """``<state>/jobs/<job_id>``; never follows a symlink inside the state dir."""
    check_job_id(job_id)
    return safe_path(state_dir(), "jobs", job_id, what="job directory")


def job_file(job_id: str, name: str) -> Path:
    check_job_id(job_id)
    return safe_path(state_dir(), "jobs", job_id, name, what="job file")


def check_job_record(doc: dict[str, Any], where: str = "job record") -> dict[str, Any]:
    """Validate a record (required fields present, known fields typed); returns it."""
    missing = [name for name in REQUIRED_JOB_FIELDS if name not in doc]
    if missing:
        raise RecordError(f"{where}: job record is missing required fields: {', '.join(missing)}")
    validate_model(JobRecord, doc, where)
    return doc


def read_job_record(job_id: str) -> dict[str, Any]:
    """The checked record, without reconciliation; unknown jobs raise ``FileNotFoundError``."""
    path = job_file(job_id, "metadata.json")
    if not path.exists():
        raise FileNotFoundError(f"no MMO job {job_id!r}")
    doc = read_record(path, lambda d: check_job_record(d, str(path)),
                      retired=RETIRED_JOB_FIELDS, check_package=True, kind="job",
                      schema_kind="job state")
    if doc["job_id"] != job_id:
        raise RecordError(f"{path}: job_id {doc['job_id']!r} does not match its directory")
    return doc


def _without_unset(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if v is not None and v is not REMOVE}


def write_job_record(record: dict[str, Any]) -> dict[str, Any]:
    """Validate and atomically persist a record (creating its private directory)."""
    ensure_state_layout()
    record = _without_unset({**record, "schema_version": MMO_SCHEMA_VERSION,
                             "package_version": package_version()})
    record.setdefault("progress_revision", 0)
    reject = sorted(set(record) & set(RETIRED_JOB_FIELDS))
    if reject:
        raise RecordError(f"job record: retired fields are not supported: {', '.join(reject)}")
    check_job_record(record)
    directory = job_dir(record["job_id"])
    directory.mkdir(mode=0o700, exist_ok=True)
    path = job_file(record["job_id"], "metadata.json")
    atomic_write_json(path, record)
    publish_job(record, path)  # the listing index row; never fails the write
    return record


def _changes_progress(record: dict[str, Any], fields: dict[str, Any]) -> bool:
    for key in PROGRESS_FIELDS & set(fields):
        new = fields[key]
        if (None if new is REMOVE else new) != record.get(key):
            return True
    return False


def apply_job_fields(record: dict[str, Any], fields: dict[str, Any]) -> dict[str, Any]:
    """``record`` with ``fields`` applied: ``None``/``REMOVE`` delete a key; a terminal
    status is never replaced; a progress-relevant change bumps ``progress_revision``."""
    fields = dict(fields)
    if record["status"] in TERMINAL_JOB_STATUSES:
        fields.pop("status", None)
        fields.pop("finished_at", None)
    elif fields.get("status") in TERMINAL_JOB_STATUSES:
        fields.setdefault("finished_at", utc_now())
    bump = _changes_progress(record, fields)
    updated = dict(record)
    for key, value in fields.items():
        if value is None or value is REMOVE:
            updated.pop(key, None)
        else:
            updated[key] = value
    if bump:
        updated["progress_revision"] = int(record.get("progress_revision") or 0) + 1
    return updated


def update_job(job_id: str, **fields: Any) -> dict[str, Any]:
    """Change fields atomically under the runtime lock; returns the new record.

    A terminal job keeps its status (a late ``status`` is ignored, other
    fields still apply). ``None`` or ``REMOVE`` deletes a field.
    """
    with runtime_lock():
        record = read_job_record(job_id)
        return write_job_record(apply_job_fields(record, fields))


def transition_job(job_id: str, status: str, **fields: Any) -> dict[str, Any]:
    """Move a non-terminal job to ``status`` (with ``fields``); a terminal job stays as it is."""
    if status not in JOB_STATUSES:
        raise ValueError(f"job status must be one of {', '.join(JOB_STATUSES)}, got {status!r}")
    with runtime_lock():
        record = read_job_record(job_id)
        if record["status"] in TERMINAL_JOB_STATUSES:
            return record
        return write_job_record(apply_job_fields(record, {**fields, "status": status}))


def bump_progress(job_id: str) -> dict[str, Any]:
    """Advance ``progress_revision`` for progress that has no field of its own."""
    with runtime_lock():
        record = read_job_record(job_id)
        record["progress_revision"] = int(record.get("progress_revision") or 0) + 1
        return write_job_record(record)


def job_host_name(record: Mapping[str, Any]) -> str:
    """The execution host a job runs on: its recorded ``host``.

    Records written before jobs recorded their host run on their agent's profile host
    (the schema default when the record names no snapshot).
    """
    host = record.get("host")
    if host:
        return str(host)
    from mmo_kernel.profiles.schema import AgentSpec
    from mmo_kernel.profiles.snapshot_store import snapshot_profile

    snapshot = record.get("snapshot_hash")
    if snapshot is None:
        return str(AgentSpec.model_fields["host"].default)
    return snapshot_profile(snapshot).agents[record["agent"]].host


def job_execution_host(record: Mapping[str, Any]) -> ExecutionHost:
    """The installed driver of the job's host; launches, relaunches and digests go through it."""
    from mmo_kernel.plugin.manager import execution_host

    return execution_host(job_host_name(record), f"job {record['job_id']}: host")


def _installed_runtime_digest(record: dict[str, Any]) -> str:
    return job_execution_host(record).runtime_digest()


def runtime_current(record: dict[str, Any]) -> bool:
    """True when the record's host ran the installed code; False (never raising) otherwise."""
    try:
        if record.get("package_version") != package_version():
            return False
        if record.get("host_package_version") not in (None, package_version()):
            return False
        recorded = record.get("host_runtime_digest")
        installed = _installed_runtime_digest(record)
        return recorded is None or recorded == installed
    except Exception:  # noqa: BLE001 - an unreadable digest means "not current", never an error
        return False


def public_job(record: dict[str, Any]) -> dict[str, Any]:
    """The record as callers see it: everything, plus ``runtime_current``."""
    return {**record, "runtime_current": runtime_current(record)}


def progress_revision(record: dict[str, Any]) -> int:
    value = record.get("progress_revision")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


__all__ = [
    "ACTIVE_JOB_STATUSES", "HOST_IDENTITY_FIELDS", "JOB_STATUSES", "PROGRESS_FIELDS",
    "REMOVE", "RETIRED_JOB_FIELDS", "TERMINAL_JOB_STATUSES", "JobRecord", "apply_job_fields",
    "bump_progress", "check_job_id", "check_job_record", "control_revision", "job_dir",
    "job_execution_host", "job_file", "job_host_name", "jobs_root",
    "new_job_id", "progress_revision", "public_job", "read_job_record", "runtime_current",
    "transition_job", "update_job", "utc_now", "write_job_record",
]

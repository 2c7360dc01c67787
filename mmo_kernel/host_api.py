"""The one import for execution hosts: everything a host may use from the kernel.

An execution host is a plugin whose ``ExecutionHost`` subclass (``mmo_kernel.plugin``)
starts a detached process for a session's root (``launch_root``) or a worker job
(``launch_job``). That process owns the agent's turn loop; the kernel chose the host by
the agent's ``[agents.<id>] host`` and records the choice (``host`` on a job,
``root_execution_host`` on a session). This module, ``mmo_kernel.plugin`` and the host
kit ``mmo_kernel.hosts`` (control socket, goals, evidence, turn failures) are enough to
write one; a third-party host may rely on every name in ``__all__``:

- **Job records** (spec 04): ``read_job_record``, ``update_job`` (``None`` deletes a
  field) and ``transition_job`` (a terminal job never changes status); ``job_file`` for
  the files beside the record; ``JOB_HOST_FIELDS`` are the host identity fields a host
  clears when it retires on purpose (pause, stop); ``TERMINAL_JOB_STATUSES`` end a job.
- **Session records** (spec 03): ``read_session_record``, ``update_session`` and
  ``transition_session`` (``REMOVE`` deletes a field; a terminal status first stops the
  session's jobs that have no live host and can never be continued, naming them in
  ``stopped_jobs``: ``mmo_kernel.jobs.session_end``); ``session_file``;
  ``ROOT_HOST_FIELDS`` as above for a root host; ``TERMINAL_SESSION_STATUSES``.
- **Audit**: ``audit_event`` appends one event to a session's audit log under its run;
  ``append_jsonl`` appends to any JSONL log (an event log, say), fsynced per line;
  ``EvidenceLog`` keeps a busy log (a host's protocol events) open and fsyncs its
  lines before the process's next record write instead. A host process calls
  ``set_process_actor`` once at start, with ``"agent"`` and its agent's name, so every
  event it (or a thread it starts) records says who acted (``actor``, ``actor_name``).
- **Snapshots and agent homes**: ``snapshot_profile`` (the compiled profile a session
  runs), ``load_snapshot`` and ``snapshot_catalog`` (its routes and models),
  ``root_environment`` / ``session_environment`` (an agent's process environment:
  its ``CODEX_HOME``, credentials and MMO identity).
- **Writers' patches**: ``capture_job_patch`` records a workspace-write job's patch
  (and fails the job on an out-of-scope change); call it before completing the job.
- **Root completion deferral**: a finished root whose workers still run calls
  ``defer_root_completion``, waits with ``wait_for_recoverable_jobs`` and clears the
  flag with ``end_root_completion_deferral`` before completing its session.
- **State helpers**: ``atomic_write_json`` / ``atomic_write_text`` (private files,
  never torn), ``is_exact_int``, ``utc_now`` / ``utc_timestamp``, and process identity:
  ``spawn_detached`` (own process group, returns ``(pid, start_token)``) and
  ``spawn_module`` (the same for ``python -m MODULE``, forked from the state dir's warm
  host when one can serve: no interpreter start-up or imports per host),
  ``process_start_token`` / ``process_matches`` (a pid is only "ours" with its start
  token), ``terminate_process_groups`` and ``kill_processes``; ``pump_redacted`` copies
  a child's output pipe to a log with every known credential value redacted.
- **Orphan watch**: ``watch_orphaned`` (paths, record, groups, files), started once by a
  host, retires its agent server and ends the host when its session (or job) record is
  gone, e.g. because its state dir was deleted.

Records are plain dicts that omit unset fields; write them only through the functions
here, which validate and lock. Everything else in the kernel may change without notice.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mmo_kernel.hosts.liveness import watch_orphaned
from mmo_kernel.hosts.warm_host import spawn_module
from mmo_kernel.jobs.deferral import (
    defer_root_completion,
    end_root_completion_deferral,
    wait_for_recoverable_jobs,
)
from mmo_kernel.jobs.records import (
    HOST_IDENTITY_FIELDS,
    TERMINAL_JOB_STATUSES,
    job_file,
    read_job_record,
    transition_job,
    update_job,
)
from mmo_kernel.jobs.session_end import end_session as transition_session
from mmo_kernel.jobs.workspace import capture_job_patch
from mmo_kernel.profiles.snapshots import load_snapshot, snapshot_profile
from mmo_kernel.sessions.env import root_environment, session_environment
from mmo_kernel.sessions.homes import snapshot_catalog
from mmo_kernel.sessions.records import (
    TERMINAL_SESSION_STATUSES,
    read_session_record,
    session_file,
    session_run_id,
    utc_now,
)
from mmo_kernel.sessions.state import HOST_FIELDS, REMOVE, update_session
from mmo_kernel.state.actor import set_process_actor
from mmo_kernel.state.audit import EvidenceLog, append_audit, append_jsonl, utc_timestamp
from mmo_kernel.state.files import atomic_write_json, atomic_write_text
from mmo_kernel.state.processes import (
    kill_processes,
    process_matches,
    process_start_token,
    spawn_detached,
    terminate_process_groups,
)
from mmo_kernel.state.records import is_exact_int
from mmo_kernel.state.redaction import pump_redacted

JOB_HOST_FIELDS: tuple[str, ...] = HOST_IDENTITY_FIELDS
"""A job's host identity (runner, agent server, control socket, active turn)."""
ROOT_HOST_FIELDS: tuple[str, ...] = HOST_FIELDS
"""A session's root host identity (``root_pid`` ..., ``root_app_server_*``)."""


def audit_event(session: Mapping[str, Any], event: str, **fields: Any) -> dict[str, Any]:
    """Append ``event`` to the session's ``audit.jsonl`` under its run; returns the event."""
    run_id = session_run_id(session) or ""
    return append_audit(session_file(session["session_id"], "audit.jsonl"), event, run_id,
                        **fields)


__all__ = [
    "JOB_HOST_FIELDS", "REMOVE", "ROOT_HOST_FIELDS", "TERMINAL_JOB_STATUSES",
    "TERMINAL_SESSION_STATUSES", "EvidenceLog", "append_jsonl", "atomic_write_json",
    "atomic_write_text",
    "audit_event", "capture_job_patch", "defer_root_completion", "end_root_completion_deferral",
    "is_exact_int", "job_file", "kill_processes", "load_snapshot", "process_matches",
    "process_start_token", "pump_redacted", "read_job_record", "read_session_record",
    "root_environment",
    "session_environment", "session_file", "set_process_actor", "snapshot_catalog",
    "snapshot_profile",
    "spawn_detached", "spawn_module", "terminate_process_groups", "transition_job",
    "transition_session",
    "update_job", "update_session", "utc_now", "utc_timestamp", "wait_for_recoverable_jobs",
    "watch_orphaned",
]

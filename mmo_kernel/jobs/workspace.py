"""A writer job's workspace at its end: patch capture, scope enforcement, integration, hygiene.

The isolator prepared the writer's private workspace at spawn (the handle is
the record's ``workspace``). When the writer's turn loop ends the job host
calls ``capture_job_patch``; the patch is stored in the job's own directory
(``patch.json`` with the preimage, ``patch.diff`` for people) so review and
integration never depend on the worktree still existing. Integration is one
transaction (``mmo_kernel.jobs.integration``); worktrees and branches go away once
the job can no longer continue and its patch is integrated or rejected, the
job is cancelled, or ``clean_state`` retires it (spec 06).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mmo_kernel.jobs.authority import check_reason, load_session_job, require_disposition
from mmo_kernel.jobs.control_lock import job_control_lock
from mmo_kernel.jobs.integration import integrate_transaction
from mmo_kernel.jobs.integration_recovery import (
    JOURNAL_FILE,
    persist_taint,
    recover_locked,
    session_run_id_of,
)
from mmo_kernel.jobs.records import (
    TERMINAL_JOB_STATUSES,
    job_file,
    public_job,
    read_job_record,
    transition_job,
    update_job,
)
from mmo_kernel.plugin.drivers import WorkspaceIsolator
from mmo_kernel.sessions.records import read_session_record, session_dir, session_file
from mmo_kernel.sessions.state import taint_session
from mmo_kernel.state.audit import append_audit
from mmo_kernel.state.files import atomic_write_json, atomic_write_text, read_json
from mmo_kernel.workspace.patches import Patch, UnsafeSymlink, WorkspaceHandle

PATCH_FILE = "patch.json"
DIFF_FILE = "patch.diff"
OUT_OF_SCOPE_REASON = "out-of-scope mutation"


def workspace_handle(record: Mapping[str, Any]) -> WorkspaceHandle | None:
    """The writer's isolated-workspace handle from the record, if it has one."""
    raw = record.get("workspace")
    if not isinstance(raw, Mapping):
        return None
    return WorkspaceHandle.model_validate(dict(raw))


def isolator_for(record: Mapping[str, Any], handle: WorkspaceHandle) -> WorkspaceIsolator:
    """The isolator that made ``handle``, with the session profile's isolation options."""
    from mmo_kernel.plugin.manager import workspace_isolator

    options: dict[str, Any] = {}
    try:
        from mmo_kernel.profiles.snapshots import snapshot_profile

        session = read_session_record(record["session_id"])
        coordination = snapshot_profile(session["snapshot_hash"]).coordination
        if coordination.isolation == handle.isolator:
            options = dict(coordination.isolation_options)
    except (FileNotFoundError, ValueError, RuntimeError):
        options = {}  # session or snapshot gone: cleanup and capture need no options
    return workspace_isolator(handle.isolator, options=options)


def _store_patch(job_id: str, patch: Patch) -> dict[str, Any]:
    """Write the patch files into the job dir; returns the record's ``patch`` summary."""
    # a patch is the user's code, integrated as written: never redacted
    atomic_write_json(job_file(job_id, PATCH_FILE), patch.model_dump(mode="json"), redact=False)
    atomic_write_text(job_file(job_id, DIFF_FILE), patch.diff, redact=False)
    return {
        "changed_paths": list(patch.changed_paths),
        "format": patch.format,
        "isolator": patch.isolator,
        "base": patch.base,
        "diff_file": DIFF_FILE,
        "diff_sha256": hashlib.sha256(patch.diff.encode("utf-8")).hexdigest(),
        "diff_chars": len(patch.diff),
    }


def capture_job_patch(job_id: str) -> dict[str, Any]:
    """Capture a writer's patch when its turn loop ends; returns the updated record.

    Records ``patch`` and ``artifacts``. A change outside the write scope
    (compared with the base) fails the job with ``out-of-scope mutation``
    naming the paths and taints the session. A symlink leading outside the
    workspace fails the job with the isolator's ``unsafe symlink`` reason and
    stores no patch. A read-only job (no isolated workspace) is returned unchanged.
    """
    record = read_job_record(job_id)
    handle = workspace_handle(record)
    if handle is None or record.get("mode") == "read-only":
        return record
    isolator = isolator_for(record, handle)
    try:
        patch = isolator.capture_patch(handle)
    except UnsafeSymlink as refused:  # nothing is stored: such a patch is never integrated
        message = f"{refused}; the patch was refused at capture and not recorded"
        return transition_job(job_id, "failed", error=message, patch=None, artifacts=None,
                              failure={"kind": "unsafe_symlink", "retryable": False,
                                       "message": message, "paths": list(refused.links)})
    summary = _store_patch(job_id, patch)
    artifacts = [a.model_dump() for a in patch.artifacts]
    outside = isolator.out_of_scope(patch, list(handle.write_scope))
    if not outside:
        return update_job(job_id, patch=summary, artifacts=artifacts)
    summary["out_of_scope_paths"] = outside
    message = f"{OUT_OF_SCOPE_REASON}: {', '.join(outside)} (write scope: " \
              f"{', '.join(handle.write_scope)})"
    updated = transition_job(job_id, "failed", patch=summary, artifacts=artifacts, error=message,
                             failure={"kind": "out_of_scope_mutation", "retryable": False,
                                      "message": message, "paths": outside})
    taint_session(record["session_id"], OUT_OF_SCOPE_REASON, job_id=job_id, paths=outside)
    return updated


def load_patch(record: Mapping[str, Any]) -> Patch:
    """The captured patch of a job, from its own directory."""
    if not isinstance(record.get("patch"), Mapping):
        raise RuntimeError(f"job {record['job_id']} has no captured patch (only writer jobs "
                           "that finished have one)")
    try:
        return Patch.model_validate(read_json(job_file(record["job_id"], PATCH_FILE)))
    except FileNotFoundError:
        raise RuntimeError(f"job {record['job_id']}'s patch file {PATCH_FILE} is missing") from None


def read_patch_diff(job_id: str) -> str:
    """The captured diff text (``mmo job diff``); an error when the job has none."""
    record = read_job_record(job_id)
    return load_patch(record).diff


def job_workspace_cleanup(record: Mapping[str, Any]) -> bool:
    """Remove a finished writer's worktree and branch; True when something was removed.

    Never touches a job that could still continue (a non-terminal job of a session
    that still exists).
    Safe to repeat; usable as ``clean_state(job_cleanup=job_workspace_cleanup)``.
    """
    handle = workspace_handle(record)
    if handle is None or (record.get("status") not in TERMINAL_JOB_STATUSES
                          and session_dir(record["session_id"]).exists()):
        return False  # no worktree, or a job that could still continue
    if record.get("workspace_removed"):
        return False
    isolator_for(record, handle).cleanup(handle)
    try:
        update_job(record["job_id"], workspace_removed=True)
    except FileNotFoundError:
        pass  # the job dir is already gone; the worktree is what mattered
    return True


def _persist_integrated(record: dict[str, Any], session: dict[str, Any], reason: str,
                        caller: str) -> None:
    """Step 3 of the transaction: record ``integrated`` and audit it, or neither."""
    job_id = record["job_id"]
    current = read_job_record(job_id)
    if current.get("result_state") != "accepted":
        raise RuntimeError(f"job {job_id} result_state changed to "
                           f"{current.get('result_state')!r} during integration")
    update_job(job_id, result_state="integrated", integration_reason=reason,
               integrated_by=caller)
    try:
        append_audit(session_file(session["session_id"], "audit.jsonl"), "agent_patch_integrated",
                     session_run_id_of(session, record), job_id=job_id, agent=record["agent"],
                     reason=reason, changed_paths=list(record["patch"]["changed_paths"]),
                     caller=caller)
    except BaseException:
        update_job(job_id, result_state="accepted", integration_reason=None, integrated_by=None)
        raise


def integrate_patch(job_id: str, reason: str, session_id: str, caller_agent: str | None,
                    caller_job_id: str | None = None) -> dict[str, Any]:
    """Apply an accepted writer's patch to the canonical workspace as one transaction.

    Refused (nothing applied) for a tainted session, a result that is not
    ``accepted``, or a workspace that moved since the writer's base. Returns
    the public job record (``result_state = "integrated"``).
    """

    reason = check_reason(reason)
    session = read_session_record(session_id)
    if session.get("tainted"):
        raise RuntimeError(f"session {session_id} is tainted; patch integration is refused "
                           "(a resume with --allow-tainted still disables agent_patch_integrate)")
    with job_control_lock(job_id):
        recover_locked(job_id)
        record = load_session_job(job_id, session_id)
        require_disposition(record, session, caller_agent, caller_job_id, "integrate")
        state = record.get("result_state")
        if state == "integrated":
            raise RuntimeError(f"job {job_id}'s patch is already integrated")
        if state != "accepted":
            raise RuntimeError(f"job {job_id}'s result must be accepted before its patch is "
                               f"integrated (result_state is {state or 'unread'})")
        patch = load_patch(record)
        handle = workspace_handle(record)
        workspace = Path(handle.workspace if handle else session["cwd"])
        isolator = isolator_for(record, handle) if handle else _isolator_named(patch.isolator)
        caller = caller_job_id or caller_agent or session["root_agent"]
        integrate_transaction(
            isolator, workspace, patch, job_id=job_id,
            persist_integrated=lambda: _persist_integrated(record, session, reason, caller),
            persist_taint=lambda entry: persist_taint(session_id, entry),
            journal=job_file(job_id, JOURNAL_FILE),
        )
    job_workspace_cleanup(read_job_record(job_id))
    return public_job(read_job_record(job_id))


def _isolator_named(name: str) -> WorkspaceIsolator:
    from mmo_kernel.plugin.manager import workspace_isolator

    return workspace_isolator(name)


__all__ = ["capture_job_patch", "integrate_patch", "job_workspace_cleanup", "load_patch",
           "read_patch_diff", "workspace_handle"]

"""Integrating an accepted writer's patch as one transaction (spec 06, "Integration").

Steps: preimage check (refuse, nothing applied) -> apply -> check that no
changed path is a symlink leading outside the workspace -> persist
``integrated``. If the check or persisting fails the apply is reversed exactly
and the original error re-raised (the symlink check is the kernel's own, so
it holds whatever the isolator checked); if the reversal fails too the session is durably
tainted; if even the taint cannot be written the caller is told that. Each
outcome leaves exactly one state the user can be told about.

A process killed mid-transaction (kill -9, power loss) cannot reverse
anything itself, so before applying it writes a journal next to the job: its
identity and a snapshot of every path the patch touches. Whoever next loads
the job and finds the journal of a dead integrator rolls the workspace back
to that snapshot (``recover_integration``): the job stays ``accepted`` and
can be integrated again. A journal whose job already says ``integrated``
only lost its removal, and is removed.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from mmo_kernel.plugin.drivers import WorkspaceIsolator
from mmo_kernel.state.files import atomic_write_text
from mmo_kernel.state.processes import process_matches, process_start_token
from mmo_kernel.workspace.patches import (
    REVERSED_NOTE,
    ApplyReceipt,
    Patch,
    PatchReversalError,
    begin_receipt,
    check_applied_symlinks,
    provisional_created,
    reverse_apply,
)

TAINT_REASON = "integration_rollback_failed"
INTERRUPTED_TAINT_REASON = "integration_interrupted_rollback_failed"


class IntegrationJournal(BaseModel):
    """Who is integrating, and the workspace as it was before the apply."""

    model_config = ConfigDict(extra="forbid")

    job_id: str
    pid: int
    start_token: str | None
    started_at: str
    snapshot: ApplyReceipt


class IntegrationTainted(RuntimeError):
    """Rollback failed: the session is durably tainted and needs manual repair."""

    def __init__(self, message: str, paths: list[str]) -> None:
        super().__init__(message)
        self.paths = paths


class TaintNotPersisted(RuntimeError):
    """Rollback failed and the taint marker could not be written either."""

    def __init__(self, message: str, paths: list[str]) -> None:
        super().__init__(message)
        self.paths = paths


def _taint_reason(job_id: str, paths: list[str], original: BaseException,
                  reversal: BaseException) -> dict[str, Any]:
    """The ``taint_reasons`` entry: who, which paths, and both errors."""
    return {
        "reason": TAINT_REASON,
        "job_id": job_id,
        "paths": paths,
        "error": f"{type(original).__name__}: {original}",
        "reversal_error": str(reversal),
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def _fail_reversal(job_id: str, patch: Patch, original: BaseException,
                   reversal: PatchReversalError,
                   persist_taint: Callable[[Mapping[str, Any]], None]) -> None:
    """Persist the taint and raise the error that tells the user the exact state."""
    paths = sorted(set(patch.changed_paths) | set(reversal.paths))
    named = ", ".join(paths)
    state = "is partly reversed for" if reversal.partial else "keeps the applied change to"
    try:
        persist_taint(_taint_reason(job_id, paths, original, reversal))
    except BaseException as taint_error:
        raise TaintNotPersisted(
            f"integrating job {job_id} failed ({original}), reversing the applied patch failed "
            f"({reversal}), and the taint marker also could not be persisted ({taint_error}); "
            f"the workspace {state} {named}, the job stays accepted and the "
            "session record is unchanged: repair the workspace manually",
            paths,
        ) from taint_error
    raise IntegrationTainted(
        f"integrating job {job_id} failed ({original}) and reversing the applied patch failed "
        f"({reversal}); the session is now durably tainted and needs manual repair of: {named}",
        paths,
    ) from original


def integrate_transaction(
    isolator: WorkspaceIsolator,
    workspace: Path,
    patch: Patch,
    *,
    persist_integrated: Callable[[], None],
    persist_taint: Callable[[Mapping[str, Any]], None],
    job_id: str | None = None,
    journal: Path | None = None,
) -> ApplyReceipt:
    """Apply ``patch`` to ``workspace`` and persist ``integrated``, all or nothing.

    ``job_id`` (default: the patch label) goes into the taint reason.
    ``journal`` (a file path) lets the transaction survive its caller being
    killed (``recover_integration``). Raises ``PreimageMismatch`` (nothing
    applied), ``UnsafeSymlink`` or the original persistence error (workspace
    restored), ``IntegrationTainted`` or ``TaintNotPersisted``.
    """
    job = job_id or patch.label
    workspace = Path(workspace)
    isolator.check_preimage(workspace, patch)
    if journal is not None:
        _write_journal(journal, job, workspace, patch)
    try:
        receipt = isolator.apply(workspace, patch)
    except PatchReversalError as reversal:
        _fail_reversal(job, patch, reversal.__cause__ or reversal, reversal, persist_taint)
        raise  # unreachable: _fail_reversal always raises
    except BaseException:
        _drop_journal(journal)  # the isolator reversed its own failed apply
        raise
    try:
        check_applied_symlinks(workspace, patch.changed_paths, note=REVERSED_NOTE)
        persist_integrated()
    except BaseException as original:
        try:
            isolator.reverse(workspace, patch, receipt)
        except PatchReversalError as reversal:
            _fail_reversal(job, patch, original, reversal, persist_taint)
        except Exception as unexpected:
            _fail_reversal(job, patch, original,
                           PatchReversalError(patch.changed_paths, str(unexpected)), persist_taint)
        _drop_journal(journal)
        raise
    _drop_journal(journal)
    return receipt


def _write_journal(journal: Path, job_id: str, workspace: Path, patch: Patch) -> None:
    pid = os.getpid()
    entry = IntegrationJournal(
        job_id=job_id, pid=pid, start_token=process_start_token(pid),
        started_at=datetime.now(UTC).isoformat(timespec="seconds"),
        snapshot=begin_receipt(workspace, patch.changed_paths))
    # the snapshot holds the user's own files, byte for byte, like a patch: never redacted
    atomic_write_text(journal, entry.model_dump_json(), redact=False)


def _drop_journal(journal: Path | None) -> None:
    if journal is not None:
        journal.unlink(missing_ok=True)


def read_journal(journal: Path) -> IntegrationJournal | None:
    """The journal of an integration in progress (or interrupted); None when there is none."""
    try:
        return IntegrationJournal.model_validate_json(journal.read_bytes())
    except FileNotFoundError:
        return None


def recover_integration(journal: Path, *, integrated: bool,
                        persist_taint: Callable[[Mapping[str, Any]], None]) -> str | None:
    """Finish an integration whose process died; what was done, or None for nothing to do.

    ``integrated`` says whether the job record reached ``integrated`` (then only
    the journal's removal was lost: ``"completed"``). Otherwise the workspace
    is rolled back to the journal's snapshot (``"rolled_back"``); when even that
    fails the session is tainted naming the paths (``"tainted"``). The journal
    of an integrator that still runs is left alone (None).
    """
    entry = read_journal(journal)
    if entry is None or process_matches(entry.pid, entry.start_token):
        return None
    if integrated:
        _drop_journal(journal)
        return "completed"
    try:
        reverse_apply(Path(entry.snapshot.workspace), provisional_created(entry.snapshot))
    except PatchReversalError as reversal:
        persist_taint({"reason": INTERRUPTED_TAINT_REASON, "job_id": entry.job_id,
                       "paths": reversal.paths, "reversal_error": str(reversal),
                       "at": datetime.now(UTC).isoformat(timespec="seconds")})
        _drop_journal(journal)
        return "tainted"
    _drop_journal(journal)
    return "rolled_back"

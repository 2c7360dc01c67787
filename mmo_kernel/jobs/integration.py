"""Integrating an accepted writer's patch as one transaction (spec 06, "Integration").

Steps: preimage check (refuse, nothing applied) -> apply -> persist
``integrated``. If persisting fails the apply is reversed exactly and the
original error re-raised; if the reversal fails too the session is durably
tainted; if even the taint cannot be written the caller is told that. Each
outcome leaves exactly one state the user can be told about.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mmo_kernel.plugin.drivers import WorkspaceIsolator
from mmo_kernel.workspace.patches import ApplyReceipt, Patch, PatchReversalError

TAINT_REASON = "integration_rollback_failed"


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
) -> ApplyReceipt:
    """Apply ``patch`` to ``workspace`` and persist ``integrated``, all or nothing.

    ``job_id`` (default: the patch label) goes into the taint reason.
    Raises ``PreimageMismatch`` (nothing applied), the original persistence
    error (workspace restored), ``IntegrationTainted`` or ``TaintNotPersisted``.
    """
    job = job_id or patch.label
    workspace = Path(workspace)
    isolator.check_preimage(workspace, patch)
    try:
        receipt = isolator.apply(workspace, patch)
    except PatchReversalError as reversal:
        _fail_reversal(job, patch, reversal.__cause__ or reversal, reversal, persist_taint)
        raise  # unreachable: _fail_reversal always raises
    try:
        persist_integrated()
    except BaseException as original:
        try:
            isolator.reverse(workspace, patch, receipt)
        except PatchReversalError as reversal:
            _fail_reversal(job, patch, original, reversal, persist_taint)
        except Exception as unexpected:
            _fail_reversal(job, patch, original,
                           PatchReversalError(patch.changed_paths, str(unexpected)), persist_taint)
        raise
    return receipt

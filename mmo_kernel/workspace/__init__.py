"""The isolator kit: everything a workspace isolator driver imports (spec 06).

An isolator (``WorkspaceIsolator`` from :mod:`mmo_kernel.plugin`) prepares a
writer's private workspace, captures its change as a :class:`Patch`, applies
it to the canonical workspace with an :class:`ApplyReceipt` and undoes it
exactly on failure. This package is its public surface:

- models: :class:`WorkspaceHandle`, :class:`Patch`, :class:`Artifact`,
  :class:`PathState` (``PathKind``), :class:`ApplyReceipt`, and the refusals
  :class:`PreimageMismatch`, :class:`PatchReversalError` and
  :class:`UnsafeSymlink` (a symlink leading outside the workspace);
- patch helpers shared by every isolator: path checks (``check_relative_path``,
  ``contained_path``, ``check_label``, ``private_dest``), symlink checks
  (``check_symlinks`` at capture and before an apply, ``check_applied_symlinks``
  after one), file state
  (``read_state``, ``sha256_bytes``) and the apply/reverse engine
  (``check_preimage``, ``begin_receipt``, ``finish_receipt``,
  ``provisional_created``, ``verify_postimage``, ``reverse_apply``);
- write scopes: ``normalize_write_scopes``, ``paths_outside_scopes``,
  ``path_in_scopes``;
- atomic file writes (``atomic_write_bytes``, ``atomic_write_json``), so an
  isolator never leaves a half-written file behind.

Names load on first use: the kernel imports ``workspace.patches`` and
``workspace.write_scopes`` directly, and this ``__init__`` runs for each.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mmo_kernel import lazy_exports

if TYPE_CHECKING:
    from mmo_kernel.state.files import atomic_write_bytes, atomic_write_json
    from mmo_kernel.workspace.patches import (
        ApplyReceipt,
        Artifact,
        Patch,
        PatchReversalError,
        PathKind,
        PathState,
        PreimageMismatch,
        UnsafeSymlink,
        WorkspaceHandle,
        begin_receipt,
        check_applied_symlinks,
        check_label,
        check_preimage,
        check_relative_path,
        check_symlinks,
        contained_path,
        finish_receipt,
        private_dest,
        provisional_created,
        read_state,
        reverse_apply,
        sha256_bytes,
        verify_postimage,
    )
    from mmo_kernel.workspace.write_scopes import (
        normalize_write_scopes,
        path_in_scopes,
        paths_outside_scopes,
    )

__all__ = [
    "ApplyReceipt",
    "Artifact",
    "Patch",
    "PatchReversalError",
    "PathKind",
    "PathState",
    "PreimageMismatch",
    "UnsafeSymlink",
    "WorkspaceHandle",
    "atomic_write_bytes",
    "atomic_write_json",
    "begin_receipt",
    "check_applied_symlinks",
    "check_label",
    "check_preimage",
    "check_relative_path",
    "check_symlinks",
    "contained_path",
    "finish_receipt",
    "normalize_write_scopes",
    "path_in_scopes",
    "paths_outside_scopes",
    "private_dest",
    "provisional_created",
    "read_state",
    "reverse_apply",
    "sha256_bytes",
    "verify_postimage",
]

__getattr__ = lazy_exports(__name__, {
    "mmo_kernel.state.files": ("atomic_write_bytes", "atomic_write_json"),
    "mmo_kernel.workspace.patches": (
        "ApplyReceipt", "Artifact", "Patch", "PatchReversalError", "PathKind", "PathState",
        "PreimageMismatch", "UnsafeSymlink", "WorkspaceHandle", "begin_receipt",
        "check_applied_symlinks", "check_label", "check_preimage", "check_relative_path",
        "check_symlinks", "contained_path", "finish_receipt", "private_dest",
        "provisional_created", "read_state", "reverse_apply", "sha256_bytes", "verify_postimage",
    ),
    "mmo_kernel.workspace.write_scopes": (
        "normalize_write_scopes", "path_in_scopes", "paths_outside_scopes",
    ),
})

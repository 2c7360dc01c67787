"""The ``git_worktree`` driver: a private git worktree and branch per writer."""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, field_validator

from mmo_kernel.plugin import WorkspaceIsolator
from mmo_kernel.workspace import (
    ApplyReceipt,
    Patch,
    WorkspaceHandle,
    check_label,
    normalize_write_scopes,
    private_dest,
)

from . import base, capture

WORKTREE_DIR = "worktree"


class GitWorktreeOptions(BaseModel):
    """``[workspace_isolation] options`` for ``git_worktree``."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    branch_prefix: str = "mmo/"

    @field_validator("branch_prefix")
    @classmethod
    def _valid_prefix(cls, value: str) -> str:
        parts = value.split("/")
        ok = (
            value.endswith("/") and len(value) > 1 and all(parts[:-1])
            and all(p[0] not in ".-" and not p.endswith(".lock") for p in parts[:-1])
            and ".." not in value and not set(value) & set(" ~^:?*[\\@{")
        )
        if not ok:
            raise ValueError(
                "must be a git branch path ending in '/', e.g. \"mmo/\" "
                "(no spaces, '..', '~^:?*[\\\\@{', or parts starting with '.' or '-')"
            )
        return value


class GitWorktreeIsolator(WorkspaceIsolator):
    """A private git worktree per writer."""

    name = "git_worktree"
    Options = GitWorktreeOptions
    options: GitWorktreeOptions

    def check_workspace(self, workspace: Path) -> None:
        """A git work tree with at least one commit (a worktree starts from HEAD)."""
        base.repo_location(workspace)
        base.head_commit(workspace)

    def prepare(
        self, workspace: Path, dest: Path, write_scope: Sequence[str], label: str
    ) -> WorkspaceHandle:
        """Worktree at HEAD on ``<branch_prefix><label>`` plus the in-scope dirty state as base."""
        workspace = Path(os.path.abspath(workspace))
        check_label(label)
        scopes = normalize_write_scopes(workspace, write_scope)
        toplevel, prefix = base.repo_location(workspace)
        head = base.head_commit(workspace)
        dirty = base.dirty_paths(workspace, scopes)
        dest = private_dest(dest, toplevel)
        worktree = dest / WORKTREE_DIR
        branch = f"{self.options.branch_prefix}{label}"
        try:
            base.create_branch(toplevel, branch, head)
        except BaseException:
            dest.rmdir()
            raise
        handle = WorkspaceHandle(
            isolator=self.name, label=label, workspace=str(workspace), dest=str(dest),
            root=str(worktree / prefix if prefix else worktree), write_scope=scopes, base=head,
            branch=branch, worktree=str(worktree), repo_root=str(toplevel),
        )
        try:
            base.add_worktree(toplevel, worktree, branch)
            base.copy_dirty_state(workspace, Path(handle.root), dirty)
            commit = base.commit_base(worktree, label)
        except BaseException:
            self.cleanup(handle)
            raise
        return handle.model_copy(update={"base": commit})

    def capture_patch(self, handle: WorkspaceHandle) -> Patch:
        """The writer's changes against the base: paths, ``--binary`` diff, artifacts, preimage."""
        return capture.capture(handle, self.name)

    def apply(self, workspace: Path, patch: Patch) -> ApplyReceipt:
        """``git apply`` to the canonical workspace (working tree only, never the index)."""
        return capture.apply(Path(workspace), patch)

    def cleanup(self, handle: WorkspaceHandle) -> None:
        """Remove the worktree, its private branch and the writer dir; safe to repeat."""
        dest = Path(handle.dest)
        toplevel = Path(handle.repo_root or handle.workspace)
        if toplevel.is_dir():
            base.remove_worktree(toplevel, Path(handle.worktree or dest / WORKTREE_DIR))
            if handle.branch:
                base.delete_branch(toplevel, handle.branch)
        elif handle.worktree and os.path.lexists(handle.worktree):
            shutil.rmtree(handle.worktree)
        if dest.is_dir() and not any(dest.iterdir()):
            dest.rmdir()

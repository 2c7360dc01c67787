"""The ``git_worktree`` driver."""

from __future__ import annotations

from mmo_kernel.drivers import WorkspaceIsolator


class GitWorktreeIsolator(WorkspaceIsolator):
    """A private git worktree per writer."""

    name = "git_worktree"

"""MMO built-in plugin ``git_worktree``: A private git worktree per writer."""

from __future__ import annotations

from mmo_kernel import hookimpl

from .driver import GitWorktreeIsolator


@hookimpl
def mmo_register_workspace_isolators(register):
    register(GitWorktreeIsolator)

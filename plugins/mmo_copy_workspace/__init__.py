"""MMO built-in plugin ``copy``: A plain copy per writer, for workspaces that are not git repositories."""

from __future__ import annotations

from mmo_kernel import hookimpl

from .driver import CopyIsolator


@hookimpl
def mmo_register_workspace_isolators(register):
    register(CopyIsolator)

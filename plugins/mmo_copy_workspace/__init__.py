"""MMO built-in plugin ``copy``: a plain copy per writer, for non-git workspaces."""

from __future__ import annotations

from mmo_kernel import hookimpl

from .driver import CopyIsolator


@hookimpl
def mmo_register_workspace_isolators(register):
    register(CopyIsolator)

"""The ``copy`` driver."""

from __future__ import annotations

from mmo_kernel.drivers import WorkspaceIsolator


class CopyIsolator(WorkspaceIsolator):
    """A plain copy per writer, for workspaces that are not git repositories."""

    name = "copy"

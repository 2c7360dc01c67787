"""MMO kernel: hookspecs, plugin manager, models, state, API and CLI.

Built-in drivers live in ``plugins/`` and reach the kernel only through the
``mmo.plugins`` entry-point group, exactly like a third party's plugin.
"""

from __future__ import annotations

from importlib import metadata

import pluggy

PROJECT_NAME = "mmo"

hookimpl = pluggy.HookimplMarker(PROJECT_NAME)
"""Marker for plugin hook implementations: ``@mmo_kernel.hookimpl``."""


def package_version() -> str:
    """The installed distribution's version; records carry it to refuse foreign writers."""
    try:
        return metadata.version(PROJECT_NAME)
    except metadata.PackageNotFoundError:  # running from a source tree without install
        return "0.0.0+source"


__all__ = ["PROJECT_NAME", "hookimpl", "package_version"]

"""MMO kernel: hookspecs, plugin manager, models, state, API and CLI.

Built-in drivers live in ``plugins/`` and reach the kernel only through the
``mmo.plugins`` entry-point group, exactly like a third party's plugin.
Importing this package stays cheap (``mmo mcp`` starts for every agent
thread): pluggy and the distribution metadata are loaded on first use.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

PROJECT_NAME = "mmo"


@lru_cache(maxsize=1)
def package_version() -> str:
    """The installed distribution's version; records carry it to refuse foreign writers."""
    from importlib import metadata

    try:
        return metadata.version(PROJECT_NAME)
    except metadata.PackageNotFoundError:  # running from a source tree without install
        return "0.0.0+source"


@lru_cache(maxsize=1)
def _hookimpl() -> Any:
    import pluggy

    return pluggy.HookimplMarker(PROJECT_NAME)


def lazy_exports(package: str, sources: Mapping[str, tuple[str, ...]]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for a kit package: each re-exported name loads on first use.

    ``sources`` maps a defining module to the names the package re-exports from
    it. A package's ``__init__`` runs whenever any of its modules is imported,
    so importing every re-export up front would load siblings the importer
    never uses. The name is then cached on the package (one definition, no copy).
    """
    origin = {name: module for module, names in sources.items() for name in names}

    def __getattr__(name: str) -> Any:
        module = origin.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        import sys
        from importlib import import_module

        value = getattr(import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__


def __getattr__(name: str) -> Any:
    if name == "hookimpl":  # marker for plugin hook implementations: ``@mmo_kernel.hookimpl``
        return _hookimpl()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["PROJECT_NAME", "hookimpl", "package_version"]

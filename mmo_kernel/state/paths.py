"""Where MMO keeps state and configuration (spec 01, "Paths and environment")."""

from __future__ import annotations

import os
from pathlib import Path


def _xdg(var: str, fallback: str) -> Path:
    value = os.environ.get(var, "")
    return Path(value) if value else Path.home() / fallback


def state_dir() -> Path:
    """Sessions, jobs, snapshots and runtime sockets: ``MMO_STATE_DIR`` or XDG state."""
    explicit = os.environ.get("MMO_STATE_DIR", "")
    return Path(explicit) if explicit else _xdg("XDG_STATE_HOME", ".local/state") / "mmo"


def config_dir() -> Path:
    """settings.toml, credentials.env, catalog.d/, tool-mcp.d/, profiles/."""
    explicit = os.environ.get("MMO_CONFIG_DIR", "")
    return Path(explicit) if explicit else _xdg("XDG_CONFIG_HOME", ".config") / "mmo"


def user_codex_home() -> Path:
    """The user's own Codex home, source of ``auth.json``."""
    explicit = os.environ.get("CODEX_HOME", "")
    return Path(explicit) if explicit else Path.home() / ".codex"


def ensure_private_dir(path: Path) -> Path:
    """Create ``path`` (and parents) and make the leaf ``0700``."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(path, 0o700)
    return path


def settings_path() -> Path:
    """``settings.toml`` in the config dir."""
    return config_dir() / "settings.toml"


def credentials_path() -> Path:
    """``credentials.env`` in the config dir (secrets, ``0600``)."""
    return config_dir() / "credentials.env"


STATE_SUBDIRS: tuple[str, ...] = ("sessions", "jobs", "snapshots", "runtime")
"""Folders ``ensure_state_layout()`` creates (``0700``) under the state dir."""

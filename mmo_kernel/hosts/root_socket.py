"""Where a session's root app-server listens (shared by its host and the user's TUI)."""

from __future__ import annotations

from pathlib import Path

from mmo_kernel.hosts.control_socket import app_server_socket_path


def root_app_server_socket_path(session_id: str) -> Path:
    """``unix://`` socket of the root app-server; deterministic, so any resume finds it."""
    return app_server_socket_path(f"app-server:root:{session_id}")

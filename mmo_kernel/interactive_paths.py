"""Where an interactive session's app-server listens (shared by the host and the TUI)."""

from __future__ import annotations

from pathlib import Path

from .control_socket import app_server_socket_path


def interactive_socket_path(session_id: str) -> Path:
    """``unix://`` socket of the root app-server; deterministic, so any resume finds it."""
    return app_server_socket_path(f"app-server:root:{session_id}")

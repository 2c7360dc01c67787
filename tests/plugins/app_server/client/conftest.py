"""Fixtures for the app-server client tests: the real pinned Codex, offline.

Real Codex needs a model to run a turn, so ``responses_server`` is a tiny
Responses-API HTTP server (built from the gateway's SSE event builder) that
answers each ``POST /v1/responses`` from a script; real Codex talks to it
through a custom provider in a private ``CODEX_HOME``.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from plugins.app_server.client.scripted_model import (
    ResponsesServer,
    handler_for,
    write_codex_config,
)

from mmo_kernel.hosts.codex_cli import project_codex

PROJECT_ROOT = Path(__file__).resolve().parents[4]
PEER_SCRIPT = Path(__file__).with_name("peer.py")

@pytest.fixture
def responses_server() -> Iterator[ResponsesServer]:
    state = ResponsesServer()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler_for(state))
    httpd.daemon_threads = True
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield state
    state.gate.set()
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def codex_binary() -> Path:
    binary = project_codex(PROJECT_ROOT)
    if binary is None:
        pytest.fail("the pinned Codex CLI is not installed under .codex-cli; run `make setup`",
                    pytrace=False)
    return binary


@dataclass
class AppServerSetup:
    """Everything needed to spawn an app-server in one test."""

    argv: list[str]
    cwd: Path
    env: dict[str, str]
    home: Path
    logs: Path


@pytest.fixture
def real_codex(mmo_env: Any, mmo_process_guard: Any, codex_binary: Path,
               responses_server: ResponsesServer, tmp_path: Path) -> AppServerSetup:
    """The real Codex app-server against the scripted model, in private dirs."""
    home = tmp_path / "agent-home"
    write_codex_config(home, responses_server.url)
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    logs = tmp_path / "logs"
    logs.mkdir()
    user_home = tmp_path / "user-home"  # Codex's login shells must not read the real ~
    user_home.mkdir()
    env = dict(os.environ, CODEX_HOME=str(home), HOME=str(user_home), RUST_LOG="warn")
    return AppServerSetup([str(codex_binary), "app-server"], workspace, env, home, logs)


@pytest.fixture
def peer(mmo_env: Any, mmo_process_guard: Any, tmp_path: Path) -> AppServerSetup:
    """A scripted JSON-RPC peer for what real Codex cannot do on demand offline."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    logs = tmp_path / "logs"
    logs.mkdir()
    return AppServerSetup([sys.executable, str(PEER_SCRIPT)], workspace, dict(os.environ),
                          tmp_path, logs)

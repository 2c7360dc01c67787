"""Each test gets its own state dir, the Codex stand-in, and a real ``mmo ui`` on it."""

from __future__ import annotations

import pytest

from .harness import start_ui


@pytest.fixture
def offline(mmo_env, mmo_standin, mmo_process_guard):
    yield mmo_env
    from mmo_kernel.gateway.process import stop_gateway

    stop_gateway()


@pytest.fixture
def ui(offline):
    server = start_ui()
    yield server
    server.stop()

"""The kill matrix runs whole sessions on the deterministic Codex stand-in.

Each trial gets private state/config dirs, a git workspace and the stand-in
(``MMO_CODEX_BIN``); the shared gateway it starts is stopped at the end, and
the suite-wide process guard (tests/conftest.py) fails a trial that leaves a
process behind.
"""

from __future__ import annotations

import pytest


@pytest.fixture
def faults_env(mmo_env, mmo_standin, mmo_process_guard):
    yield mmo_env
    from mmo_kernel.gateway.process import stop_gateway

    stop_gateway()

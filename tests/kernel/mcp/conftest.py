"""Stand-in fixtures (from the package) and the process guard for every end-to-end test."""

import pytest
from mmo_codex_standin.fixtures import spawn_standin, standin_home, standin_workspace  # noqa: F401


@pytest.fixture(autouse=True)
def _no_leftover_processes(mmo_process_guard):
    yield

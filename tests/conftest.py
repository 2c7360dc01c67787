"""Suite-wide: no test may leave a process of its own running."""

import pytest


@pytest.fixture(autouse=True)
def _no_leftover_processes(mmo_process_guard):
    yield

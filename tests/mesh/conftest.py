import pytest


@pytest.fixture(autouse=True)
def _no_leftover_processes(mmo_process_guard):
    """Every mesh test must leave no server process behind."""
    yield

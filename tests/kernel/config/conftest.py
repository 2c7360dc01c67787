"""Every test here runs in a private MMO environment and may leave no process behind."""

import pytest


@pytest.fixture(autouse=True)
def _isolated(mmo_env, mmo_process_guard):
    yield

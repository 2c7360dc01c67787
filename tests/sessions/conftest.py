import pytest


@pytest.fixture(autouse=True)
def _private_env(mmo_env, mmo_process_guard):
    yield mmo_env

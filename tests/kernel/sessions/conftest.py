import pytest


@pytest.fixture(autouse=True)
def _private_env(mmo_env, mmo_process_guard):
    yield mmo_env


@pytest.fixture
def gateway_stopped_after():
    """Sessions start the shared gateway on demand; a test must not leave it running."""
    yield
    from mmo_kernel.gateway.process import stop_gateway

    stop_gateway()

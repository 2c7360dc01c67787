import pytest


@pytest.fixture(autouse=True)
def _no_leftover_processes(mmo_process_guard):
    """Every mesh test must leave no server process behind."""
    yield


@pytest.fixture
def team(mmo_env, mmo_standin, mmo_git_workspace):
    """A real job-lab session on the stand-in (offline routes); gateway stopped afterwards."""
    from mesh.realkit import JOB_LAB, OFFLINE, Team

    from mmo_kernel.api import create_session

    made = Team(create_session(JOB_LAB, cwd=mmo_git_workspace, bindings=OFFLINE))
    yield made
    made.close()
    from mmo_kernel.gateway.process import stop_gateway

    stop_gateway()

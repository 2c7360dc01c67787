import pytest


@pytest.fixture(autouse=True)
def _no_leftover_processes(mmo_process_guard):
    """Every mesh test must leave no server process behind."""
    yield


def _team(profile, cwd):
    from kernel.mesh.realkit import OFFLINE, Team

    from mmo_kernel.api import create_session

    made = Team(create_session(profile, cwd=cwd, bindings=OFFLINE))
    try:
        yield made
    finally:
        made.close()
        from mmo_kernel.gateway.process import stop_gateway

        stop_gateway()


@pytest.fixture
def team(mmo_env, mmo_standin, mmo_git_workspace):
    """A real job-lab session on the stand-in (offline routes); gateway stopped afterwards."""
    from kernel.mesh.realkit import JOB_LAB

    yield from _team(JOB_LAB, mmo_git_workspace)


@pytest.fixture
def depth_team(mmo_env, mmo_standin, mmo_git_workspace):
    """A real session of ``profiles/mesh-depth`` (lead -> manager -> plain, max_depth 2)."""
    from kernel.mesh.realkit import MESH_DEPTH

    yield from _team(MESH_DEPTH, mmo_git_workspace)


@pytest.fixture
def native_team(mmo_env, mmo_standin, mmo_git_workspace):
    """A real ``adaptive-engineering`` session: its root has the native agent repo_scout."""
    from kernel.mesh.realkit import NATIVE_PROFILE

    yield from _team(NATIVE_PROFILE, mmo_git_workspace)

"""Fixtures for the jobs core: private state, real sessions, real live "runner" processes."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from mmo_kernel.jobs.records import new_job_id, utc_now, write_job_record
from mmo_kernel.state.processes import spawn_detached, terminate_process_groups

OFFLINE = {"*": "local_scripted"}
LAB = "access-efficient-escalation-lab"


@pytest.fixture(autouse=True)
def _private_env(mmo_env, mmo_process_guard):
    yield mmo_env


@pytest.fixture
def make_session(mmo_standin, mmo_git_workspace) -> Iterator[Callable[..., dict[str, Any]]]:
    """Create real sessions (shared gateway started on demand, stopped after the test)."""
    from mmo_kernel.sessions.create import create_session

    def make(profile: str = LAB, cwd=None, bindings=None, **kwargs: Any) -> dict[str, Any]:
        return create_session(profile, cwd=cwd or mmo_git_workspace,
                              bindings=OFFLINE if bindings is None else bindings, **kwargs)

    yield make
    from mmo_kernel.gateway.process import stop_gateway

    stop_gateway()


@pytest.fixture
def sleeper() -> Iterator[Callable[[], tuple[int, str]]]:
    """Start real detached processes (own group) that stand in for a live job host."""
    started: list[int] = []

    def start() -> tuple[int, str]:
        pid, token = spawn_detached(["sleep", "60"], cwd="/", env=dict(os.environ))
        started.append(pid)
        return pid, token

    yield start
    terminate_process_groups(started, 1.0)


@pytest.fixture
def live_job(sleeper) -> Callable[..., dict[str, Any]]:
    """Write a job record whose runner is a real live process (or ``runner=False``: none)."""

    def make(session_id: str, agent: str, runner: bool = True, **fields: Any) -> dict[str, Any]:
        record: dict[str, Any] = {"job_id": new_job_id(agent), "session_id": session_id,
                                  "agent": agent, "status": "running", "created_at": utc_now(),
                                  "mode": "read-only", "depth": 1, "control_revision": 0}
        if runner:
            pid, token = sleeper()
            record.update(runner_pid=pid, runner_pgid=pid, runner_start_token=token)
        record.update(fields)
        return write_job_record(record)

    return make

"""A root or job host whose records are gone retires its app-server and exits (issue 13,
item 11): real hosts on the stand-in, mid-turn, then their state is deleted under them."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from support.waiting import wait_until

from mmo_kernel.state.processes import process_matches, reap_spawned

JOB_LAB = Path(__file__).resolve().parents[2] / "fixtures" / "profiles" / "job-lab"
EXIT_WAIT = 60.0
"""Generous: a host checks its records every second; a loaded machine may be slow."""


@pytest.fixture(autouse=True)
def _env(mmo_env, mmo_standin, mmo_process_guard):
    yield mmo_env
    from mmo_kernel.gateway.process import stop_gateway

    stop_gateway()


@pytest.fixture
def session(mmo_git_workspace):
    from mmo_kernel.lifecycle.root_exec import start_root
    from mmo_kernel.sessions.create import create_session

    record = create_session(JOB_LAB, cwd=mmo_git_workspace)
    start_root(record, "Lead slowly FAKE_SLEEP=120", (), None, 300)
    return record


def alive(record: dict, pid: str, token: str) -> bool:
    reap_spawned()  # the hosts are children of this test process: collect their zombies
    return process_matches(record.get(pid), record.get(token))


def gone(record: dict, *pairs: tuple[str, str]) -> bool:
    return not any(alive(record, pid, token) for pid, token in pairs)


ROOT_PROCESSES = (("root_pid", "root_start_token"),
                  ("root_app_server_pid", "root_app_server_start_token"))
JOB_PROCESSES = (("runner_pid", "runner_start_token"),
                 ("app_server_pid", "app_server_start_token"))


def test_a_root_host_whose_state_dir_is_deleted_retires_its_app_server_and_exits(
        session, mmo_env):
    from mmo_kernel.gateway.process import gateway_status
    from mmo_kernel.hosts import root_app_server_socket_path
    from mmo_kernel.sessions.records import read_session_record

    sid = session["session_id"]
    record = wait_until(lambda: (r := read_session_record(sid)).get("active_root_turn_id")
                        and r, timeout=EXIT_WAIT, what="the root host to run a turn")
    sockets = [Path(record["root_control_socket"]), root_app_server_socket_path(sid)]
    gateway = gateway_status()
    assert all(alive(record, *pair) for pair in ROOT_PROCESSES) and gateway["running"]
    assert all(path.exists() for path in sockets)

    shutil.rmtree(mmo_env.state_dir)
    wait_until(lambda: gone(record, *ROOT_PROCESSES), timeout=EXIT_WAIT,
               what="the orphaned root host and its app-server to exit")
    wait_until(lambda: gone(gateway, ("pid", "start_token")), timeout=EXIT_WAIT,
               what="the orphaned gateway to exit too")
    assert not any(path.exists() for path in sockets)  # nothing left in the runtime dir
    assert not mmo_env.state_dir.exists()  # and nothing re-created what was deleted


def test_a_job_host_whose_session_is_deleted_retires_its_app_server_and_exits(session):
    from mmo_kernel.jobs.records import job_dir, read_job_record
    from mmo_kernel.jobs.spawn import spawn_job
    from mmo_kernel.sessions.records import read_session_record, session_dir

    sid = session["session_id"]
    root = wait_until(lambda: (r := read_session_record(sid)).get("active_root_turn_id") and r,
                      timeout=EXIT_WAIT, what="the root host to run a turn")
    job_id = spawn_job(sid, "lead", None, "plain",
                       task="Work slowly. FAKE_SLEEP_SECONDS=120")["job_id"]
    job = wait_until(lambda: (r := read_job_record(job_id)).get("active_turn_id") and r,
                     timeout=EXIT_WAIT, what="the job host to run a turn")
    socket = Path(job["control_socket_path"])
    assert all(alive(job, *pair) for pair in JOB_PROCESSES) and socket.exists()

    shutil.rmtree(session_dir(sid))  # the job's own record stays: its session is gone
    wait_until(lambda: gone(job, *JOB_PROCESSES) and gone(root, *ROOT_PROCESSES),
               timeout=EXIT_WAIT, what="the job host, the root host and their app-servers")
    assert job_dir(job_id).is_dir() and not socket.exists()
    assert os.path.exists(job_dir(job_id) / "metadata.json")

"""Worker jobs run by the real job host on the stand-in."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

JOB_LAB = Path(__file__).resolve().parents[3] / "fixtures" / "profiles" / "job-lab"


@pytest.fixture(autouse=True)
def _env(mmo_env, mmo_standin, mmo_process_guard):
    yield mmo_env
    from mmo_kernel.gateway.process import stop_gateway

    stop_gateway()


@pytest.fixture
def session(mmo_git_workspace):
    from mmo_kernel.sessions.create import create_session

    return create_session(JOB_LAB, cwd=mmo_git_workspace)


def spawn(session, agent, task, **kwargs):
    from mmo_kernel.jobs.spawn import spawn_job

    accepted = spawn_job(session["session_id"], "lead", None, agent, task=task, **kwargs)
    return accepted["job_id"]


def finish(session, job_id, timeout=40):
    from mmo_kernel.jobs.records import read_job_record
    from mmo_kernel.jobs.waiting import wait_for_jobs

    waited = wait_for_jobs([job_id], session["session_id"], timeout)
    record = read_job_record(job_id)
    assert not waited["timed_out_waiting"], {k: record.get(k) for k in (
        "status", "goal_status", "error", "resume_request", "last_control_status")}
    record = read_job_record(job_id)
    _wait_runner_gone(record)
    return read_job_record(job_id)


def _wait_runner_gone(record, timeout=15):
    """A finished host still retires its app-server before it exits."""
    import time

    from mmo_kernel.state.processes import process_matches

    deadline = time.monotonic() + timeout
    while process_matches(record.get("runner_pid"), record.get("runner_start_token")):
        assert time.monotonic() < deadline, "the job host did not exit"
        time.sleep(0.05)


def turn_starts(record) -> list[dict]:
    rows = [json.loads(line) for line in Path(record["events_path"]).read_text().splitlines()]
    return [r["message"] for r in rows
            if r["direction"] == "sent" and r["message"].get("method") == "turn/start"]


def settle(job_id, status, timeout=40):
    """Wait until the job reaches ``status`` and its host has exited."""
    import time

    from mmo_kernel.jobs.records import read_job_record

    deadline = time.monotonic() + timeout
    while read_job_record(job_id)["status"] != status:
        assert time.monotonic() < deadline, read_job_record(job_id)["status"]
        time.sleep(0.05)
    _wait_runner_gone(read_job_record(job_id))
    return read_job_record(job_id)

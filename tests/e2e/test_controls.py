"""Steer, interrupt and finalize real Codex turns while a scripted command runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mmo_kernel.jobs.controls import control_job
from mmo_kernel.jobs.records import read_job_record
from mmo_kernel.sessions.create import create_session

from .conftest import JOB_LAB, events, finish, script, sent, spawn, wait_until

pytestmark = pytest.mark.real_codex


@pytest.fixture
def session(workspace):
    return create_session(JOB_LAB, cwd=workspace)


def command_running(job_id: str) -> bool:
    """True once the job's real app-server reported the scripted command as started."""
    record = read_job_record(job_id)
    if not (record.get("events_path") and Path(record["events_path"]).is_file()
            and record.get("control_socket_ready") and record.get("active_turn_id")):
        return False
    return any(r["message"].get("method") == "item/started"
               and r["message"]["params"]["item"].get("type") == "commandExecution"
               for r in events(record["events_path"]) if r["direction"] == "received")


def control(session: dict, job_id: str, action: str, **fields) -> dict:
    revision = read_job_record(job_id).get("control_revision") or 0
    return control_job(job_id, action, session["session_id"], "lead",
                       expected_revision=revision, **fields)


def history(record: dict) -> list[dict]:
    from mmo_kernel.jobs.records import job_file

    return json.loads(job_file(record["job_id"], "terminal-history.json").read_text())["turns"]


def test_steer_reaches_the_running_turn(session):
    job_id = spawn(session, "plain", script("shell sleep 3", "say not steered"))
    wait_until(lambda: command_running(job_id), what="the command to start")
    reply = control(session, job_id, "steer",
                    input=script("say steered after the command", intro="Change of plan."))
    started = read_job_record(job_id)["last_turn_id"]
    assert reply["result"]["turn_id"] == started
    done = finish(session, job_id)
    assert done["status"] == "completed"
    assert Path(done["result_path"]).read_text() == "steered after the command"
    turns = history(done)
    assert len(turns) == 1 and turns[0]["status"] == "completed"  # one turn, steered in place
    assert len(sent(done["events_path"], "turn/steer")) == 1


def test_interrupt_pauses_and_continue_runs_a_new_turn_on_the_thread(session):
    job_id = spawn(session, "plain", script("shell sleep 20", "say never"))
    wait_until(lambda: command_running(job_id), what="the command to start")
    control(session, job_id, "interrupt")
    wait_until(lambda: read_job_record(job_id)["status"] == "paused", timeout=15,
               what="the interrupted job to pause")
    control(session, job_id, "continue", input=script("say resumed", intro="Carry on."))
    done = finish(session, job_id)
    assert done["status"] == "completed"
    assert Path(done["result_path"]).read_text() == "resumed"
    assert [t["status"] for t in history(done)] == ["interrupted", "completed"]


def test_finalize_of_a_goal_worker_ends_with_a_strict_result(session):
    job_id = spawn(session, "strict_goal", script("shell sleep 20", "goal_complete", "say done"))
    wait_until(lambda: command_running(job_id), what="the command to start")
    control(session, job_id, "finalize")
    done = finish(session, job_id, timeout=40)
    assert done["status"] in ("completed", "completed_with_warnings")
    assert done["contract_valid"] is True
    result = json.loads(Path(done["result_path"]).read_text())
    assert set(result) == {"summary", "ok"}
    starts = sent(done["events_path"], "turn/start")
    assert "outputSchema" not in starts[0]["params"]
    assert starts[-1]["params"]["outputSchema"] == done["output_contract"]
    assert history(done)[0]["status"] == "interrupted"

"""Recovery after an app-server loss takes only the awaited turn from the thread (issue 13.9).

The stand-in dies on a job's *second* turn — before persisting it, or before even
answering its ``turn/start`` — while the thread already holds an earlier completed turn.
That earlier turn's answer must never become the job's result: the host recovers on the
same thread and asks for the lost turn again. Also: a loss while a goal worker's goal is
being set (``thread/goal/set``) is recovered like one during a turn.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mmo_kernel.jobs.records import job_file, read_job_record

JOB_LAB = Path(__file__).resolve().parents[2] / "fixtures" / "profiles" / "job-lab"
LIST_SCHEMA = json.loads((JOB_LAB / "contracts" / "list.json").read_text())


@pytest.fixture(autouse=True)
def _env(mmo_env, mmo_standin, mmo_process_guard):
    yield mmo_env
    from mmo_kernel.gateway.process import stop_gateway

    stop_gateway()


@pytest.fixture
def session(mmo_git_workspace):
    from mmo_kernel.sessions.create import create_session

    return create_session(JOB_LAB, cwd=mmo_git_workspace)


def run_job(session, agent: str, task: str) -> dict:
    """Spawn a job, wait until it is terminal and its host has exited; its record."""
    from support.waiting import wait_until

    from mmo_kernel.jobs.spawn import spawn_job
    from mmo_kernel.jobs.waiting import wait_for_jobs
    from mmo_kernel.state.processes import process_matches

    job_id = spawn_job(session["session_id"], "lead", None, agent, task=task)["job_id"]
    waited = wait_for_jobs([job_id], session["session_id"], 90)
    record = read_job_record(job_id)
    assert not waited["unfinished"], {k: record.get(k) for k in ("status", "error")}
    wait_until(lambda: not process_matches(record.get("runner_pid"),
                                           record.get("runner_start_token")),
               timeout=20, what="the job host to exit")
    return read_job_record(job_id)


def turn_starts(record: dict) -> list[str]:
    rows = [json.loads(line) for line in Path(record["events_path"]).read_text().splitlines()]
    return ["\n".join(i.get("text", "") for i in r["message"]["params"]["input"])
            for r in rows
            if r["direction"] == "sent" and r["message"].get("method") == "turn/start"]


def history(record: dict) -> list[dict]:
    return json.loads(job_file(record["job_id"], "terminal-history.json").read_text())["turns"]


def agent_text(turn: dict) -> str:
    return [i for i in turn["items"] if i["type"] == "agentMessage"][-1]["text"]


def _assert_repaired_after_the_lost_turn(record: dict) -> None:
    assert record["status"] == "completed", record.get("error")
    assert record["contract_valid"] is True and record["recovery_attempts"] == 1
    first, repair, again = turn_starts(record)
    assert repair.startswith("Repair only the final JSON result") and again == repair
    turns = history(record)
    assert [t["status"] for t in turns] == ["completed", "completed"]  # the lost one never was
    result = job_file(record["job_id"], "result.md").read_text()
    assert result == agent_text(turns[-1]) != agent_text(turns[0])
    assert json.loads(result) == json.loads(job_file(record["job_id"], "result.json").read_text())


def test_a_turn_lost_before_it_was_persisted_is_asked_again_never_taken_from_an_earlier_one(
        session):
    """The awaited (repair) turn id is known but the thread does not hold it: the earlier,
    invalid answer is not the result; the repair is delivered again on the same thread."""
    record = run_job(session, "array_strict", "List files. FAKE_INVALID_FIRST_RESULT "
                     "FAKE_APP_SERVER_CRASH_BEFORE_NEXT_TURN_PERSIST_ONCE")
    _assert_repaired_after_the_lost_turn(record)


def test_a_turn_start_lost_before_its_reply_counts_only_a_turn_newer_than_those_known(session):
    """The loss came before the ``turn/start`` reply (turn id unknown): the thread's last
    turn is the earlier one the host already knew, so it does not count."""
    record = run_job(session, "array_strict", "List files. FAKE_INVALID_FIRST_RESULT "
                     "FAKE_APP_SERVER_CRASH_BEFORE_NEXT_TURN_REPLY_ONCE")
    _assert_repaired_after_the_lost_turn(record)


def test_a_loss_while_a_goal_workers_goal_is_set_is_recovered_on_its_thread(session):
    """``thread/goal/set`` never answered (the goal was applied, the work turn persisted
    terminal): the host recovers on the same thread without a second first turn."""
    record = run_job(session, "strict_goal",
                     "Investigate FAKE_APP_SERVER_CRASH_BEFORE_GOAL_REPLY_ONCE")
    assert record["status"] == "completed", record.get("error")
    assert record["recovery_attempts"] == 1 and record["contract_valid"] is True
    assert record["goal_status"] == "complete"
    starts = turn_starts(record)
    assert len(starts) == 2  # the work turn once, then the strict final turn
    rows = [json.loads(line) for line in Path(record["events_path"]).read_text().splitlines()]
    threads = {r["message"]["params"]["threadId"] for r in rows
               if r["direction"] == "sent" and r["message"].get("method") == "turn/start"}
    assert threads == {record["app_server_thread_id"]}

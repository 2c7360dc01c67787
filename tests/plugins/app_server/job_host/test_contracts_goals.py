"""Result contracts and goal outcomes of real job hosts on the stand-in (spec 05)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import jsonschema

from mmo_kernel.contracts import shared_contracts_dir
from mmo_kernel.jobs.records import job_file

from .conftest import JOB_LAB, finish, settle, spawn, turn_starts


def contract(name: str) -> dict:
    return json.loads((JOB_LAB / "contracts" / name).read_text())


def received(record: dict, method: str) -> list[dict]:
    rows = [json.loads(line) for line in Path(record["events_path"]).read_text().splitlines()]
    return [r["message"] for r in rows
            if r["direction"] == "received" and r["message"].get("method") == method]


def sent_methods(record: dict) -> list[str]:
    rows = [json.loads(line) for line in Path(record["events_path"]).read_text().splitlines()]
    return [r["message"].get("method") for r in rows if r["direction"] == "sent"]


def input_text(start: dict) -> str:
    return "\n".join(i.get("text", "") for i in start["params"]["input"])


def schema_in(text: str) -> dict:
    """The JSON Schema the text carries in its fenced ```json block."""
    assert "JSON Schema" in text and "```json\n" in text, text
    return json.loads(text.split("```json\n", 1)[1].split("\n```", 1)[0])


# -- 13: the worker is told its result contract (validated_text) ----------------------------


def test_validated_text_worker_is_told_its_schema_and_answers_it_first_time(session):
    record = finish(session, spawn(session, "array_strict", "List the files of the repo."))
    assert record["contract_transport"] == "validated_text"
    starts = turn_starts(record)
    assert len(starts) == 1, [input_text(s)[:80] for s in starts]
    assert "outputSchema" not in starts[0]["params"]
    assert schema_in(input_text(starts[0])) == contract("list.json") == record["output_contract"]
    assert record["status"] == "completed" and record["contract_valid"] is True
    assert not record.get("contract_repair_attempted")
    jsonschema.validate(json.loads(job_file(record["job_id"], "result.json").read_text()),
                        contract("list.json"))


def test_the_repair_turn_carries_the_schema_and_runs_on_the_same_thread(session):
    record = finish(session, spawn(session, "array_strict",
                                   "List files. FAKE_INVALID_FIRST_RESULT"))
    starts = turn_starts(record)
    assert len(starts) == 2
    repair = input_text(starts[1])
    assert repair.startswith("Repair only the final JSON result")
    assert "Validation error:" in repair
    assert schema_in(repair) == contract("list.json")
    assert {s["params"]["threadId"] for s in starts} == {record["app_server_thread_id"]}
    assert record["contract_repair_attempted"] is True
    assert record["status"] == "completed" and record["contract_valid"] is True
    history = json.loads(job_file(record["job_id"], "terminal-history.json").read_text())
    assert len(history["turns"]) == 2


# -- 14: no extra automatic turn after a goal worker's first turn ----------------------------


def test_a_goal_worker_runs_its_work_turn_and_the_final_turn_only(session):
    record = finish(session, spawn(session, "strict_goal", "Investigate and report"))
    assert record["status"] == "completed" and record["goal_status"] == "complete"
    assert len(turn_starts(record)) == 2
    started = received(record, "turn/started")
    assert len(started) == 2, "Codex started a goal continuation turn of its own"


def test_the_final_turn_waits_for_a_continuation_turn_that_completed_the_goal(session):
    """Codex's own continuation turn can complete the goal and still be running when the
    host sees the goal complete: the strict final turn starts only after that turn ended
    (a ``turn/start`` with another ``outputSchema`` into a running turn is refused:
    ``ActiveTurnOutputSchemaMismatch``, seen on Codex 0.169 under load)."""
    record = finish(session, spawn(session, "strict_goal",
                                   "Investigate and report. FAKE_GOAL_COMPLETE_EARLY"))
    assert record["status"] == "completed", record.get("error")
    assert record["goal_status"] == "complete"
    rows = [json.loads(line) for line in Path(record["events_path"]).read_text().splitlines()]
    order = [(r["direction"], r["message"].get("method"), r["message"].get("params", {}))
             for r in rows]
    [(_, _, auto)] = [o for o in order if o[1] == "turn/started"][1:2]
    auto_id = auto["turn"]["id"]
    auto_done = next(i for i, o in enumerate(order)
                     if o[1] == "turn/completed" and o[2]["turn"]["id"] == auto_id)
    final = [i for i, o in enumerate(order) if o[0] == "sent" and o[1] == "turn/start"][-1]
    assert final > auto_done and "outputSchema" in order[final][2]


# -- 15: budgetLimited outcomes ---------------------------------------------------------------


def _assert_valid_budget_limited(record: dict) -> None:
    assert record["status"] == "completed_with_warnings", record.get("error")
    assert record["goal_status"] == "budgetLimited" and record["result_kind"] == "final"
    assert "fully validated strict result" in record["warning"]
    assert record["contract_valid"] is True and not record.get("contract_repair_attempted")
    jsonschema.validate(json.loads(job_file(record["job_id"], "result.json").read_text()),
                        contract("list.json"))
    assert len(turn_starts(record)) == 1  # no repair, no final turn


def test_budget_limited_goal_with_a_valid_result_completes_with_warnings(session):
    record = finish(session, spawn(session, "array_goal",
                                   "List files. FAKE_GOAL_BUDGET_LIMIT_BEFORE_TURN"))
    _assert_valid_budget_limited(record)


def test_budget_limited_valid_result_survives_a_transport_loss(session):
    record = finish(session, spawn(
        session, "array_goal",
        "List files. FAKE_GOAL_BUDGET_LIMIT_BEFORE_TURN FAKE_APP_SERVER_CRASH_AFTER_PERSIST_ONCE"))
    _assert_valid_budget_limited(record)
    assert record["recovery_attempts"] == 1 and "thread/resume" in sent_methods(record)


def test_budget_limited_partial_survives_a_transport_loss_then_finalize_completes(session):
    from mmo_kernel.jobs.controls import control_job

    job_id = spawn(session, "strict_goal", "Work FAKE_GOAL_BUDGET_LIMIT_BEFORE_TURN "
                   "FAKE_APP_SERVER_CRASH_AFTER_PERSIST_ONCE")
    suspended = settle(job_id, "suspended")
    assert suspended["goal_status"] == "budgetLimited", suspended.get("error")
    assert suspended["result_kind"] == "partial" and suspended["recovery_attempts"] == 1
    assert len(turn_starts(suspended)) == 1  # recovered from the thread: no second turn/start
    partial = Path(suspended["partial_result_path"])
    assert "persisted app-server thread" in partial.read_text()
    control_job(job_id, "finalize", session["session_id"], "lead",
                expected_revision=suspended.get("control_revision", 0))
    done = finish(session, job_id)
    assert done["status"] == "completed_with_warnings" and done["contract_valid"] is True
    assert done["app_server_thread_id"] == suspended["app_server_thread_id"]
    starts = turn_starts(done)
    assert len(starts) == 2 and starts[-1]["params"]["outputSchema"] == contract("report.json")
    assert Path(done["partial_result_path"]).is_file()  # the partial is kept too


# -- 16: a literal worker's result satisfies literal_result.json ------------------------------


def test_a_literal_worker_result_satisfies_its_own_contract(session):
    literal = {"operation": "summarize_supplied", "text": "Alpha.\nBeta.", "max_points": 2}
    record = finish(session, spawn(session, "literal_scout", None, literal_task=literal))
    assert record["status"] == "completed", record.get("error")
    assert record["contract_valid"] is True
    value = json.loads(job_file(record["job_id"], "result.json").read_text())
    jsonschema.validate(value, json.loads((shared_contracts_dir() / "literal_result.json")
                                          .read_text()))
    assert "output" not in value
    assert value["operation"] == "summarize_supplied"
    assert value["input_sha256"] == hashlib.sha256(b"Alpha.\nBeta.").hexdigest()
    assert value["input_sha256"] == record["literal_input_sha256"]
    assert json.loads(job_file(record["job_id"], "result.md").read_text()) == value

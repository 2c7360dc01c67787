"""The job host: contract transports, goal mode, recovery and results (spec 04, 05)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
from pathlib import Path

import jsonschema
from support.waiting import wait_until

from mmo_kernel.jobs.records import job_file, read_job_record

from .conftest import JOB_LAB, finish, settle, spawn, turn_starts


def contract(name):
    return json.loads((JOB_LAB / "contracts" / name).read_text())


def test_strict_turn_worker_gets_the_schema_on_its_only_turn(session):
    record = finish(session, spawn(session, "strict_turn", "Report on the repo"))
    assert record["status"] == "completed" and record["contract_valid"] is True
    starts = turn_starts(record)
    assert len(starts) == 1 and starts[0]["params"]["outputSchema"] == contract("report.json")
    result_md = job_file(record["job_id"], "result.md").read_text()
    history = json.loads(job_file(record["job_id"], "terminal-history.json").read_text())
    last = [i for i in history["turns"][-1]["items"] if i["type"] == "agentMessage"][-1]
    assert result_md == last["text"]
    structured = json.loads(job_file(record["job_id"], "result.json").read_text())
    jsonschema.validate(structured, contract("report.json"))
    assert record["usage"]["input_tokens"] >= 100 and record["result_state"] == "unread"
    assert Path(record["events_path"]).read_text().count('"direction":"sent"') > 0


def test_the_job_record_names_the_app_server_command(session):
    from mmo_kernel.api import load_job

    record = finish(session, spawn(session, "strict_turn", "Report on the repo"))
    assert record.get("command") == [session["codex_binary"], "app-server"], record.get("command")
    assert load_job(record["job_id"])["command"] == record["command"]


def test_goal_worker_works_unconstrained_then_serializes_with_the_schema(session):
    record = finish(session, spawn(session, "strict_goal", "Investigate and report"))
    assert record["status"] == "completed" and record["contract_valid"] is True
    starts = turn_starts(record)
    assert len(starts) == 2
    assert "outputSchema" not in starts[0]["params"]
    assert starts[1]["params"]["outputSchema"] == contract("report.json")
    assert record["goal_status"] == "complete"


def test_unprojectable_strict_contract_gets_exactly_one_repair_turn(session):
    record = finish(session, spawn(
        session, "array_strict",
        'List files. FAKE_INVALID_FIRST_RESULT\nThe result schema:\n```json\n'
        + json.dumps(contract("list.json")) + "\n```"))
    starts = turn_starts(record)
    assert all("outputSchema" not in s["params"] for s in starts)
    assert len(starts) == 2
    assert starts[1]["params"]["input"][0]["text"].startswith("Repair only the final JSON result")
    assert record["contract_repair_attempted"] is True
    assert record["status"] == "completed" and record["contract_valid"] is True
    history = json.loads(job_file(record["job_id"], "terminal-history.json").read_text())
    assert len(history["turns"]) == 2


def test_warn_contract_never_constrains_and_completes_with_warnings(session):
    record = finish(session, spawn(session, "warn_worker", "Report. FAKE_INVALID_FIRST_RESULT"))
    assert all("outputSchema" not in s["params"] for s in turn_starts(record))
    assert record["status"] == "completed_with_warnings"
    assert record["contract_valid"] is False and len(turn_starts(record)) == 1
    assert not job_file(record["job_id"], "result.json").exists()


def test_budget_limited_goal_without_a_valid_result_suspends_then_finalize_completes(session):
    from mmo_kernel.jobs.controls import control_job

    job_id = spawn(session, "strict_goal", "Work FAKE_SLEEP=1 FAKE_GOAL_BUDGET_LIMIT_BEFORE_TURN")
    record = settle(job_id, "suspended")  # suspended is not terminal: wait_for_jobs would wait on
    assert record["status"] == "suspended" and record["result_kind"] == "partial"
    assert record["goal_status"] == "budgetLimited"
    partial = Path(record["partial_result_path"]).read_text()
    assert "persisted app-server thread" in partial
    control_job(job_id, "finalize", session["session_id"], "lead",
                expected_revision=record.get("control_revision", 0))
    done = finish(session, job_id)
    assert done["status"] == "completed_with_warnings" and done["contract_valid"] is True
    assert turn_starts(done)[-1]["params"]["outputSchema"] == contract("report.json")
    assert done["app_server_thread_id"] == record["app_server_thread_id"]




def test_app_server_crash_is_recovered_by_the_runner(session):
    record = finish(session, spawn(session, "strict_turn", "Report FAKE_APP_SERVER_CRASH_ONCE"))
    assert record["status"] == "completed" and record["recovery_attempts"] == 1
    assert record["contract_valid"] is True


def test_finalization_turn_persisted_before_a_crash_is_not_sent_twice(session):
    record = finish(session, spawn(
        session, "strict_goal", "Investigate FAKE_APP_SERVER_CRASH_DURING_FINALIZATION_ONCE"))
    assert record["status"] == "completed" and record["recovery_attempts"] == 1
    schema_turns = [s for s in turn_starts(record) if "outputSchema" in s["params"]]
    assert len(schema_turns) == 1


def test_writer_patch_is_captured_and_the_workspace_untouched(session, mmo_git_workspace):
    record = finish(session, spawn(session, "writer", "Write FAKE_WRITE src/generated.py::x = 1",
                                   mode="workspace-write", write_scope_values=["src"]))
    assert record["status"] == "completed"
    assert record["patch"]["changed_paths"] == ["src/generated.py"]
    assert [a["relative_path"] for a in record["artifacts"]] == ["src/generated.py"]
    assert not (mmo_git_workspace / "src" / "generated.py").exists()


def test_writer_outside_its_scope_fails_and_taints_the_session(session):
    from mmo_kernel.sessions.records import read_session_record

    record = finish(session, spawn(session, "writer", "Write FAKE_WRITE docs/x.md::oops",
                                   mode="workspace-write", write_scope_values=["src"]))
    assert record["status"] == "failed" and "out-of-scope mutation" in record["error"]
    assert "docs/x.md" in record["error"]
    assert read_session_record(session["session_id"])["tainted"] is True


def test_a_killed_runner_suspends_the_job_and_continue_resumes_the_thread(session, tmp_path):
    from mmo_kernel.jobs.controls import control_job
    from mmo_kernel.jobs.listing import load_job

    gate = tmp_path / "gate"  # every turn of the thread holds until it exists
    job_id = spawn(session, "plain", f"Slow work FAKE_HOLD_UNTIL={gate}")
    wait_until(lambda: read_job_record(job_id).get("active_turn_id"), timeout=30,
               what="the job to start a turn")
    running = read_job_record(job_id)
    os.killpg(running["runner_pgid"], signal.SIGKILL)
    wait_until(lambda: load_job(job_id)["status"] == "suspended", timeout=10,
               what="the job to be reconciled to suspended")
    suspended = read_job_record(job_id)
    assert "persisted app-server thread" in Path(suspended["partial_result_path"]).read_text()
    gate.write_text("go")
    result = control_job(job_id, "continue", session["session_id"], "lead",
                         expected_revision=suspended.get("control_revision", 0),
                         input="Carry on, quickly this time.")
    assert result["result"]["recovery_requested"] is True
    done = finish(session, job_id)
    assert done["status"] == "completed"
    assert done["app_server_thread_id"] == running["app_server_thread_id"]
    assert done["started_at"] == running["started_at"]
    assert done["mcp_caller_token_hash"] != running["mcp_caller_token_hash"]


def _first_seen(job_id, status, timeout=30.0):
    """The record the moment it first says ``status`` (polled tightly: the race is short)."""
    import time

    deadline = time.monotonic() + timeout
    while (record := read_job_record(job_id))["status"] != status:
        assert time.monotonic() < deadline, record["status"]
        time.sleep(0.002)
    return record


def test_a_job_is_suspended_only_after_its_host_retired_so_continue_relaunches_it(session):
    """The runner may still be exiting, but it can no longer answer: no control reaches a
    vanished socket, ``continue`` relaunches the job on its thread (spec 04)."""
    from mmo_kernel.jobs.controls import control_job
    from mmo_kernel.state.files import runtime_lock
    from mmo_kernel.state.processes import process_matches

    job_id = spawn(session, "plain", "Work FAKE_PROVIDER_USAGE_LIMIT_ONCE")
    suspended = _first_seen(job_id, "suspended")
    runner = suspended["runner_pid"]
    with runtime_lock():  # so the runner is not stopped while it holds the state lock
        frozen = process_matches(runner, suspended["runner_start_token"])
        if frozen:  # hold the exiting runner where it is: the record already says suspended
            os.kill(runner, signal.SIGSTOP)
    try:
        assert not process_matches(suspended["app_server_pid"],
                                   suspended["app_server_start_token"]), \
            "suspended while its app-server still runs"
        result = control_job(job_id, "continue", session["session_id"], "lead",
                             expected_revision=suspended.get("control_revision", 0),
                             input="Carry on.")
    finally:
        if frozen:  # a runner already exiting ignores SIGSTOP and may be gone by now
            with contextlib.suppress(ProcessLookupError):
                os.kill(runner, signal.SIGCONT)
    assert result["result"]["recovery_requested"] is True
    done = finish(session, job_id)
    assert done["status"] == "completed", done.get("error")
    assert done["app_server_thread_id"] == suspended["app_server_thread_id"]
    assert [t["params"]["input"][0]["text"] for t in turn_starts(done)][-1] == "Carry on."


def test_root_completion_is_deferred_while_a_worker_runs(mmo_git_workspace):
    import time

    from mmo_kernel.lifecycle.controls import load_session
    from mmo_kernel.lifecycle.root_exec import start_root, wait_for_root
    from mmo_kernel.sessions.create import create_session
    from mmo_kernel.sessions.records import session_file
    from mmo_kernel.state.audit import read_jsonl

    session = create_session(JOB_LAB, cwd=mmo_git_workspace)
    job_id = spawn(session, "plain", "Slow FAKE_SLEEP=4")
    start_root(session, "Lead quickly", (), None, 60)
    wait_until(lambda: load_session(session["session_id"]).get("root_completion_deferred"),
               timeout=30, what="the root completion to be deferred")
    deferred = load_session(session["session_id"])
    assert deferred["status"] == "detached"
    assert deferred["root_completion_deferred_jobs"] == [job_id]
    out = wait_for_root(session["session_id"], 60, time.monotonic())
    assert out["status"] == "detached" and out["root_status"] == "root_completion_deferred"
    done = wait_until(lambda: (r := load_session(session["session_id"]))["status"]
                      == "completed" and r, timeout=30, what="the deferred completion")
    assert done["root_completion_deferred"] is False
    assert done["root_completion_deferred_jobs"] == []
    assert read_job_record(job_id)["status"] == "completed"
    events = [e["event"] for e in read_jsonl(session_file(session["session_id"], "audit.jsonl"))]
    assert events.count("root_completion_deferred") == 1
    from mmo_kernel.state.processes import process_matches

    wait_until(lambda: not process_matches(done["root_pid"], done["root_start_token"]),
               what="the root host to exit after completing")


def test_compact_during_an_active_turn_is_delivered_and_the_work_goes_on(session):
    from mmo_kernel.jobs.controls import control_job

    job_id = spawn(session, "plain", "Slow work FAKE_SLEEP=2")
    wait_until(lambda: read_job_record(job_id).get("active_turn_id"), timeout=30,
               what="the job to start a turn")
    working = read_job_record(job_id)
    out = control_job(job_id, "compact", session["session_id"], "lead",
                      expected_revision=working.get("control_revision", 0))
    assert out["result"]["compaction"] == "after_interrupt"
    assert out["result"]["interrupted_turn_id"] == working["active_turn_id"]
    assert out["job"]["last_control_status"] == "applied"
    done = finish(session, job_id)
    assert done["status"] == "completed", done.get("error")
    rows = [json.loads(line) for line in Path(done["events_path"]).read_text().splitlines()]
    sent = [r["message"].get("method") for r in rows if r["direction"] == "sent"]
    assert sent.count("thread/compact/start") == 1
    assert sent.index("turn/interrupt") < sent.index("thread/compact/start")
    history = json.loads(job_file(job_id, "terminal-history.json").read_text())
    kinds = [[i["type"] for i in t["items"]] for t in history["turns"]]
    assert any("contextCompaction" in k for k in kinds), kinds
    assert len(turn_starts(done)) == 2  # the task, then the continuation after compaction
    assert job_file(job_id, "result.md").read_text().strip()


def test_stop_of_an_interrupted_job_stops_it_without_another_turn(session):
    from mmo_kernel.jobs.controls import control_job

    job_id = spawn(session, "plain", "Slow work FAKE_SLEEP=30")
    wait_until(lambda: read_job_record(job_id).get("active_turn_id"), timeout=30,
               what="the job to start a turn")
    control_job(job_id, "interrupt", session["session_id"], "lead",
                expected_revision=read_job_record(job_id).get("control_revision", 0))
    settle_status = read_job_record(job_id)
    wait_until(lambda: read_job_record(job_id)["status"] == "paused", timeout=20,
               what="the interrupted job to pause")
    control_job(job_id, "stop", session["session_id"], "lead",
                expected_revision=read_job_record(job_id).get("control_revision", 0))
    stopped = settle(job_id, "stopped")
    assert len(turn_starts(stopped)) == 1, settle_status


def test_session_cold_pause_pauses_live_workers_and_continue_resumes_them(session):
    from mmo_kernel.lifecycle.controls import cancel_session, continue_session, pause_session
    from mmo_kernel.lifecycle.root_exec import start_root
    from mmo_kernel.sessions.records import read_session_record

    start_root(session, "Lead slowly FAKE_SLEEP=30", (), None, 60)
    job_id = spawn(session, "plain", "Slow work FAKE_SLEEP=30")
    wait_until(lambda: read_job_record(job_id).get("active_turn_id")
               and read_session_record(session["session_id"]).get("active_root_turn_id"),
               timeout=30, what="root and worker both to start a turn")
    out = pause_session(session["session_id"])
    assert out["session"]["status"] == "paused"
    assert out["affected_jobs"] == [job_id]
    paused = read_job_record(job_id)
    assert paused["status"] == "paused" and "cold_pause_pending" not in paused
    resumed = continue_session(session["session_id"], "finish up")
    assert resumed["resumed_jobs"] == [job_id] and resumed["resume_errors"] == {}
    wait_until(lambda: read_job_record(job_id)["status"] == "running", timeout=20,
               what="the worker to be relaunched")
    cancel_session(session["session_id"])
    assert read_job_record(job_id)["status"] == "cancelled"


RACER = r"""
import json, sys, time
from pathlib import Path
from mmo_kernel.errors import AdmissionError
from mmo_kernel.jobs.spawn import spawn_jobs
session_id, go = sys.argv[1], Path(sys.argv[2])
while not go.exists():
    time.sleep(0.001)
specs = [{"agent": "writer", "task": "Edit FAKE_SLEEP=20", "mode": "workspace-write",
          "write_scopes": ["src"]},
         {"agent": "plain", "task": "Read along FAKE_SLEEP=20"}]
try:
    out = spawn_jobs(specs, session_id, "lead", None)
    print(json.dumps({"won": [j["job_id"] for j in out["accepted"]]}))
except AdmissionError as exc:
    print(json.dumps({"lost": str(exc)}))
"""


def test_two_sessions_racing_for_one_write_scope_exactly_one_batch_wins(
        mmo_git_workspace, tmp_path):
    import subprocess
    import sys

    from mmo_kernel.jobs.cancel import cancel_job
    from mmo_kernel.jobs.listing import list_jobs
    from mmo_kernel.sessions.create import create_session

    sessions = [create_session(JOB_LAB, cwd=mmo_git_workspace)["session_id"] for _ in range(2)]
    go = tmp_path / "go"
    racers = [subprocess.Popen([sys.executable, "-c", RACER, sid, str(go)], text=True,
                               stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
              for sid in sessions]
    go.touch()
    results = [json.loads(r.communicate(timeout=60)[0]) for r in racers]
    winners = [r for r in results if "won" in r]
    losers = [r for r in results if "lost" in r]
    assert len(winners) == 1 and len(losers) == 1, results
    assert "write scope conflicts" in losers[0]["lost"]
    loser_session = sessions[results.index(losers[0])]
    assert list_jobs(loser_session) == []  # nothing of the losing batch was created
    winner_session = sessions[results.index(winners[0])]
    for job_id in winners[0]["won"]:
        cancel_job(job_id, winner_session, reason="test over", caller_agent="lead")


def test_a_provider_bad_request_fails_the_worker_as_rejected(session):
    record = finish(session, spawn(session, "plain", "Answer FAKE_PROVIDER_BAD_REQUEST"))
    assert record["status"] == "failed"
    assert record["error"] == "Provider rejected the request as invalid", record["error"]
    assert "400 Bad Request" in record["failure"]["message"]
    assert "400 Bad Request" in Path(record["partial_result_path"]).read_text()


def test_a_jobs_usage_is_its_threads_total_across_tool_calls_and_turns(session):
    """A turn that calls tools makes several model requests; ``last`` is only the final
    one, so the record's usage is the thread's ``total`` (what the provider billed)."""
    record = finish(session, spawn(
        session, "strict_goal", "Investigate FAKE_MCP_CALL nowhere.echo {} and report"))
    usage_updates = [json.loads(line)["message"]["params"]["tokenUsage"]
                     for line in Path(record["events_path"]).read_text().splitlines()
                     if '"thread/tokenUsage/updated"' in line]
    assert len(usage_updates) > len(turn_starts(record))  # tool requests are reported too

    thread_total = usage_updates[-1]["total"]
    assert record["usage"] == {"input_tokens": thread_total["inputTokens"],
                               "output_tokens": thread_total["outputTokens"],
                               "total_tokens": thread_total["totalTokens"]}

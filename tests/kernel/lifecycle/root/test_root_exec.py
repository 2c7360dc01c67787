"""run_root_exec end to end on the stand-in: every outcome of spec 03."""

from __future__ import annotations

import hashlib
import json
import os
import signal
from pathlib import Path

import pytest

from mmo_kernel.lifecycle.controls import load_session
from mmo_kernel.lifecycle.root_exec import run_root_exec
from mmo_kernel.sessions.records import read_run_record, read_session_record, session_file

from .conftest import GOAL_PROFILE, OFFLINE, TURN_PROFILE, sent_methods, wait_until


def run(profile, workspace, prompt, wall=60, **kwargs):
    return run_root_exec(profile, workspace, prompt, wall, bindings=OFFLINE, **kwargs)


def test_turn_mode_completes_with_the_final_message_and_evidence(workspace):
    out = run(TURN_PROFILE, workspace, "Summarize the repo")
    assert out["status"] == "completed" and out["exit_code"] == 0
    assert "FAKE_CODEX_OK" in out["result"]
    session = out["session"]
    sid = session["session_id"]
    assert session["root_thread_id"] and session["result_kind"] == "final"
    assert session_file(sid, "root-result.md").read_text() == out["result"]
    history = json.loads(session_file(sid, "root-terminal-history.json").read_text())
    assert history["thread_id"] == session["root_thread_id"]
    assert history["turns"][-1]["status"] == "completed"
    assert session["current_run_id"] is None
    run_record = read_run_record(sid, session["last_run_id"])
    assert run_record["status"] == "completed"
    assert not session_file(sid, "capabilities.json").exists()
    rows = [json.loads(line) for line in Path(out["events_path"]).read_text().splitlines()]
    assert {r["direction"] for r in rows} == {"sent", "received"}
    assert "turn/start" in sent_methods(out["events_path"])
    assert Path(out["events_path"]).read_text().count('"method":"turn/start"') == 1
    assert session["root_usage"]["input_tokens"] >= 100


def test_goal_mode_sets_a_capped_objective_and_completes_through_the_goal(workspace):
    prompt = "Fix everything. " + "details " * 1000
    out = run(GOAL_PROFILE, workspace, prompt)
    assert out["status"] == "completed"
    session = out["session"]
    objective = session["root_goal_objective"]
    assert len(objective) == 4000
    assert objective.endswith(f"sha256={hashlib.sha256(prompt.encode()).hexdigest()}")
    assert session["root_goal_status"] == "complete"
    lines = Path(out["events_path"]).read_text().splitlines()
    rows = [json.loads(line)["message"] for line in lines]
    starts = [m for m in rows if m.get("method") == "turn/start"]
    assert starts[0]["params"]["input"][0]["text"].endswith(prompt)  # full prompt delivered
    goal_sets = [m for m in rows if m.get("method") == "thread/goal/set"]
    assert goal_sets[0]["params"]["tokenBudget"] == session["root_goal_token_budget"]


def test_wall_expiry_detaches_and_the_host_finishes_later(workspace):
    out = run(TURN_PROFILE, workspace, "work slowly FAKE_SLEEP=6", wall=3)
    assert out["status"] == "detached" and out["exit_code"] == 124
    assert out["root_status"] == "harness_wall_detached"
    sid = out["session"]["session_id"]
    partial = Path(out["session"]["partial_result_path"]).read_text()
    assert "external harness wall expired" in partial
    done = wait_until(lambda: load_session(sid)["status"] == "completed" and load_session(sid),
                      what="the detached root to complete")
    assert "FAKE_CODEX_OK" in session_file(sid, "root-result.md").read_text()
    assert done["started_at"] == out["session"]["started_at"]
    from mmo_kernel.state.processes import process_matches

    wait_until(lambda: not process_matches(done["root_pid"], done["root_start_token"]),
               what="the host to exit after completing")


def test_usage_limit_suspends_with_the_reset_time(workspace):
    out = run(TURN_PROFILE, workspace, "FAKE_PROVIDER_USAGE_LIMIT")
    assert out["status"] == "suspended" and out["exit_code"] == 1
    failure = out["session"]["failure"]
    assert failure["kind"] == "provider_usage_limited" and failure["retryable"] is True
    assert "2026-08-22 05:24:28" in failure["retry_at_raw"]
    assert Path(out["session"]["partial_result_path"]).is_file()


def test_bad_request_fails_the_session(workspace):
    out = run(TURN_PROFILE, workspace, "FAKE_PROVIDER_BAD_REQUEST")
    assert out["status"] == "failed"
    assert out["session"]["failure"]["kind"] == "turn_failed"


def test_empty_final_message_fails_with_a_partial(workspace):
    out = run(TURN_PROFILE, workspace, "FAKE_EMPTY_RESULT")
    assert out["status"] == "failed"
    session = out["session"]
    assert "without a readable terminal result" in session["error"]
    assert session["result_kind"] == "partial"
    text = Path(session["result_path"]).read_text()
    assert "root completed without a readable terminal result" in text


def test_read_only_root_can_never_get_a_write_sandbox(workspace):
    with pytest.raises(PermissionError, match="permanently read-only") as err:
        run("incident-hypothesis-triage", workspace, "go", sandbox_mode="workspace-write")
    assert err.value.mmo_session_status == "failed"
    assert load_session(err.value.mmo_session_id)["status"] == "failed"


def test_app_server_crash_is_recovered_on_the_same_thread(workspace):
    out = run(TURN_PROFILE, workspace, "FAKE_APP_SERVER_CRASH_ONCE please")
    assert out["status"] == "completed"
    assert out["session"]["root_recovery_attempts"] == 1
    methods = sent_methods(out["events_path"])
    assert methods.count("thread/start") == 1 and "thread/resume" in methods


def test_terminal_turn_persisted_before_a_crash_is_not_started_again(workspace):
    out = run(TURN_PROFILE, workspace, "FAKE_APP_SERVER_CRASH_AFTER_PERSIST_ONCE")
    assert out["status"] == "completed" and "FAKE_CODEX_OK" in out["result"]
    assert sent_methods(out["events_path"]).count("turn/start") == 1
    assert out["session"]["root_recovery_attempts"] == 1


def test_a_transport_loss_during_goal_bootstrap_is_recovered_without_a_second_turn(workspace):
    """The app-server dies after turn/start, before the thread/goal/set reply (spec 03)."""
    out = run(GOAL_PROFILE, workspace, "FAKE_APP_SERVER_CRASH_BEFORE_GOAL_REPLY_ONCE FAKE_SLEEP=1")
    assert out["status"] == "completed", out["session"].get("error")
    assert "FAKE_CODEX_OK" in out["result"]
    session = out["session"]
    assert session["root_recovery_attempts"] == 1
    assert session["root_goal_status"] == "complete"
    methods = sent_methods(out["events_path"])
    assert methods.count("turn/start") == 1 and "thread/resume" in methods
    history = json.loads(session_file(session["session_id"],
                                      "root-terminal-history.json").read_text())
    assert [t["status"] for t in history["turns"]] == ["completed"]


def test_approval_requests_are_declined_under_never_and_the_turn_continues(workspace):
    out = run(TURN_PROFILE, workspace, "FAKE_REQUEST_COMMAND_APPROVAL")
    assert out["status"] == "completed"
    lines = Path(out["events_path"]).read_text().splitlines()
    rows = [json.loads(line)["message"] for line in lines]
    answers = [m for m in rows if "result" in m and isinstance(m.get("id"), str)
               and m["id"].startswith("fake-approval-")]
    assert answers and answers[0]["result"] == {"decision": "decline"}


def test_an_orphaned_tool_child_is_killed_with_the_app_server(workspace):
    out = run(TURN_PROFILE, workspace, "FAKE_ORPHAN_CHILD")
    assert out["status"] == "completed"
    pid = int((workspace / "fake-orphan.pid").read_text())
    wait_until(lambda: not _alive(pid), what="the orphan to be killed")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _kill_controller_mid_turn(workspace, prompt):
    """Run a root in the background and SIGKILL its controller's group mid-turn."""
    from .conftest import Background, session_id_of_latest

    bg = Background(run, TURN_PROFILE, workspace, prompt)
    sid = session_id_of_latest()
    record = wait_until(lambda: (r := load_session(sid)).get("active_root_turn_id") and r,
                        what="the root turn")
    os.killpg(record["root_pgid"], signal.SIGKILL)
    return sid, record, bg.join()


def test_killing_the_controller_suspends_and_keeps_the_app_server(workspace):
    _, record, out = _kill_controller_mid_turn(workspace, "slow FAKE_SLEEP=30")
    assert out["status"] == "suspended"
    session = out["session"]
    assert session["root_app_server_pid"] == record["root_app_server_pid"]
    assert _alive(record["root_app_server_pid"])
    os.killpg(record["root_app_server_pgid"], signal.SIGKILL)


def test_continue_after_a_controller_crash_adopts_the_app_server_and_its_turn(workspace):
    """No second turn beside the one still running: the new host waits for it."""
    from mmo_kernel.lifecycle.controls import continue_session

    sid, before, out = _kill_controller_mid_turn(workspace, "slow FAKE_SLEEP=8")
    assert out["status"] == "suspended"
    continue_session(sid, "mind the tests")
    wait_until(lambda: load_session(sid)["status"] == "completed",
               what="the adopted turn to complete", timeout=60)
    events = session_file(sid, "root-events.jsonl").read_text()
    assert events.count('"method":"turn/start"') == 1
    rows = [json.loads(line)["message"] for line in events.splitlines()]
    [steer] = [m for m in rows if m.get("method") == "turn/steer"]
    assert steer["params"]["expectedTurnId"] == before["active_root_turn_id"]
    assert steer["params"]["input"][0]["text"] == "mind the tests"
    history = json.loads(session_file(sid, "root-terminal-history.json").read_text())
    assert [t["id"] for t in history["turns"]] == [before["active_root_turn_id"]]
    assert "FAKE_CODEX_OK" in session_file(sid, "root-result.md").read_text()
    host = read_session_record(sid)["root_pid"]
    wait_until(lambda: not _alive(before["root_app_server_pid"]) and not _alive(host),
               what="the finished host to retire the adopted app-server and exit")


JOB_LAB = Path(__file__).resolve().parents[3] / "fixtures" / "profiles" / "job-lab"


def test_a_deferred_completion_returns_detached_at_once(workspace):
    """The root finishes while its worker still works: detached now, completed later."""
    from mmo_kernel.jobs.listing import list_jobs
    from mmo_kernel.jobs.records import TERMINAL_JOB_STATUSES

    gate = workspace.parent / "release-the-worker"
    # the worker holds on the gate; "\u005f" keeps the root's own turn from reading the
    # marker in its prompt (the JSON of the call decodes it for the worker)
    prompt = ('Delegate and finish.\nFAKE_MCP_CALL mmo_mesh.agent_spawn '
              f'{{"agent": "plain", "task": "Slow FAKE_HOLD\\u005fUNTIL={gate}"}}')
    out = run(JOB_LAB, workspace, prompt, wall=120)
    session = out["session"]
    sid = session["session_id"]
    [job] = list_jobs(sid)
    assert out["status"] == "detached", (out["status"], job["status"])
    assert out["exit_code"] == 124 and out["root_status"] == "root_completion_deferred"
    assert session["root_completion_deferred"] is True
    assert session["root_completion_deferred_jobs"] == [job["job_id"]]
    assert job["status"] not in TERMINAL_JOB_STATUSES
    assert "FAKE_CODEX_OK" in out["result"]  # the root's last message, kept as a partial
    assert session["result_kind"] == "partial"
    gate.write_text("go")
    done = wait_until(lambda: (r := load_session(sid))["status"] == "completed" and r,
                      timeout=60, what="the deferred completion")
    assert done["root_completion_deferred"] is False and done["result_kind"] == "final"
    assert "FAKE_CODEX_OK" in session_file(sid, "root-result.md").read_text()
    from mmo_kernel.state.processes import process_matches

    wait_until(lambda: not process_matches(done["root_pid"], done["root_start_token"]),
               what="the host to exit after completing")


def test_a_bad_request_is_recorded_as_rejected_and_the_raw_text_stays_in_evidence(workspace):
    out = run(TURN_PROFILE, workspace, "FAKE_PROVIDER_BAD_REQUEST")
    session = out["session"]
    assert out["status"] == "failed"
    assert session["error"] == "Provider rejected the request as invalid", session["error"]
    assert session["failure"]["kind"] == "turn_failed"
    assert "400 Bad Request" in session["failure"]["message"]
    assert "400 Bad Request" in Path(out["events_path"]).read_text()
    assert "400 Bad Request" in Path(session["partial_result_path"]).read_text()


def test_a_goal_root_whose_work_is_done_runs_one_turn_and_does_not_spin(workspace):
    out = run(GOAL_PROFILE, workspace, "Summarize the repo")
    assert out["status"] == "completed"
    assert out["session"]["root_goal_status"] == "complete"
    rows = [json.loads(line) for line in Path(out["events_path"]).read_text().splitlines()]
    started = [r for r in rows if r["direction"] == "received"
               and r["message"].get("method") == "turn/started"]
    assert len(started) == 1, "Codex continued a goal whose work was done"


def test_a_team_with_writers_is_refused_before_the_run_in_a_directory_that_is_not_git(tmp_path):
    """Found at the first writer, the mistake used to cost a whole root turn."""
    from mmo_kernel.lifecycle.root_exec import run_root_exec
    from mmo_kernel.sessions.records import iter_session_records

    plain = tmp_path / "not-a-repo"
    plain.mkdir()
    with pytest.raises(ValueError) as refused:
        run_root_exec("adaptive-engineering", plain, "fix it", 60,
                      bindings={"*": "local_scripted"})
    message = str(refused.value)
    assert "not inside a git work tree" in message and "git init" in message
    assert 'isolation = "copy"' in message
    assert iter_session_records() == []

"""The matrix's checks find what they look for: each one fed the evidence of a broken run.

A kill trial passes only when these checks find nothing, so each must be able
to fail: a duplicate ``turn/start``, a re-sent prompt, re-run completed work, a
torn log line, a job admitted twice or lost, a process left behind.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from faults.evidence import (
    CONTINUE_AFTER_LOSS_PREFIX,
    job_problems,
    record_problems,
    trial_processes,
    turn_start_problems,
)
from support.waiting import wait_until

SID = "20260101-000000-job-lab-abcdef"
THREAD = "01a23300-0000-7000-8000-000000000001"


def _jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _events(path: Path, replies: list[str]) -> None:
    """One ``turn/start`` per reply (request ids restart per client), answered with it."""
    rows = []
    for turn in replies:
        rows.append({"recorded_at": "t", "direction": "sent", "message": {
            "id": 3, "method": "turn/start", "params": {"threadId": THREAD}}})
        rows.append({"recorded_at": "t", "direction": "received", "message": {
            "id": 3, "result": {"turn": {"id": turn}}}})
    _jsonl(path, rows)


def _rollout(state: Path, turns: list[tuple[str, str, str]]) -> None:
    """The stand-in's rollout for THREAD: ``(turn id, input text, status)`` per turn."""
    rows = [{"timestamp": "t", "type": "session_meta", "payload": {"id": THREAD}}]
    for turn, text, status in turns:
        rows.append({"timestamp": "t", "type": "event_msg", "payload": {
            "type": "task_started", "turn_id": turn, "input_text": text}})
        if status != "interrupted":
            rows.append({"timestamp": "t", "type": "event_msg", "payload": {
                "type": "task_complete", "turn_id": turn, "status": status}})
    path = (state / "sessions" / SID / "homes" / "lead" / "sessions" / "2026" / "01" / "01"
            / f"rollout-2026-01-01T00-00-00-{THREAD}.jsonl")
    _jsonl(path, rows)


def test_a_turn_start_that_joined_a_running_turn_is_found(tmp_path):
    _events(tmp_path / "sessions" / SID / "root-events.jsonl", ["turn-a", "turn-a"])
    _rollout(tmp_path, [("turn-a", "the task", "completed")])
    problems = turn_start_problems(tmp_path, SID)
    assert any("2 turn/start answered with the same turn turn-a" in p for p in problems)
    assert any("2 turn/start for 1 turns" in p for p in problems)


def test_a_resent_prompt_and_rerun_completed_work_are_found(tmp_path):
    _events(tmp_path / "sessions" / SID / "root-events.jsonl", ["a", "b", "c"])
    _rollout(tmp_path, [("a", "the task", "completed"), ("b", "the task", "completed"),
                        ("c", CONTINUE_AFTER_LOSS_PREFIX + " ...", "completed")])
    problems = turn_start_problems(tmp_path, SID)
    assert any("its first prompt was sent again" in p for p in problems)
    assert any("turn c re-ran the work of turn b" in p for p in problems)


def test_a_clean_history_has_no_turn_start_problem(tmp_path):
    _events(tmp_path / "sessions" / SID / "root-events.jsonl", ["a", "b"])
    _rollout(tmp_path, [("a", "the task", "interrupted"),
                        ("b", CONTINUE_AFTER_LOSS_PREFIX + " ...", "completed")])
    assert turn_start_problems(tmp_path, SID) == []


def test_torn_and_malformed_log_lines_are_found(tmp_path):
    audit = tmp_path / "sessions" / SID / "audit.jsonl"
    audit.parent.mkdir(parents=True)
    audit.write_bytes(b'{"event": "run_started", "at": "t", "run_id": "r"}\n{"event": "ag')
    events = tmp_path / "jobs" / "job-1" / "events.jsonl"
    events.parent.mkdir(parents=True)
    events.write_bytes(b'{"recorded_at": "t"}\nnot json\n')
    problems = record_problems(tmp_path)
    assert any(str(audit) in p and "torn" in p for p in problems)
    assert any(str(events) in p and "line 1 is not a" in p for p in problems)
    assert any(str(events) in p and "line 2 does not parse" in p for p in problems)
    assert any("session.json" in p or SID in p for p in problems)  # no record at all


def test_a_job_admitted_twice_or_without_its_record_is_found(tmp_path):
    started = {"event": "agent_started", "at": "t", "run_id": "r"}
    _jsonl(tmp_path / "sessions" / SID / "audit.jsonl",
           [dict(started, job_id="job-1"), dict(started, job_id="job-1")])
    problems = job_problems(tmp_path, SID, {"job-2"})
    assert "job job-1 was admitted 2 times" in problems
    assert "job job-1 was admitted but its record is gone" in problems
    assert "job job-2 was admitted but its record is gone" in problems


def test_a_process_naming_the_state_dir_is_found_until_it_exits(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                             env={**os.environ, "MMO_STATE_DIR": str(tmp_path)})
    try:
        wait_until(lambda: child.pid in {p.pid for p in trial_processes(tmp_path, "x", set())},
                   what="the child to be found")
    finally:
        child.kill()
        child.wait()
    assert child.pid not in {p.pid for p in trial_processes(tmp_path, "x", set())}

"""wait_for_jobs: terminal wake-up, progress wake-up, timeouts, bounded previews."""

from __future__ import annotations

import json
import threading
import time

import pytest
from support.waiting import Background, blocked_in, wait_until

from mmo_kernel.jobs.deferral import (
    defer_root_completion,
    end_root_completion_deferral,
    recoverable_jobs,
    wait_for_recoverable_jobs,
)
from mmo_kernel.jobs.records import job_dir, update_job
from mmo_kernel.jobs.waiting import wait_for_jobs
from mmo_kernel.sessions.records import read_session_record, session_file
from mmo_kernel.state.audit import read_jsonl

SLEEPING = "state/changes.py"
"""Where the waiter sleeps between polls (on the rename watch)."""


def _later(seconds: float, action) -> threading.Thread:
    def run() -> None:
        time.sleep(seconds)
        action()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_finished_minimal_records_return_at_once_with_bounded_previews(mmo_env, live_job):
    short = live_job("s1", "w", runner=False, status="completed")
    (job_dir(short["job_id"]) / "result.md").write_text("all good")
    update_job(short["job_id"], result_path=str(job_dir(short["job_id"]) / "result.md"))
    long = live_job("s1", "w", runner=False, status="failed", partial_result_path="partial.md")
    (job_dir(long["job_id"]) / "partial.md").write_text("é" * 5000)

    # returns because the jobs are finished, long before its hour-long timeout
    result = Background(wait_for_jobs, [short["job_id"], long["job_id"]], "s1", 3600).join()
    assert result["unfinished"] == [] and result["timed_out_waiting"] is False
    assert result["results"][short["job_id"]]["preview"] == "all good"
    assert result["results"][short["job_id"]]["truncated"] is False
    entry = result["results"][long["job_id"]]
    assert entry["preview"] == "é" * 4000 and entry["truncated"] is True
    assert entry["result_kind"] == "partial" and entry["total_chars"] == 5000
    assert "agent_result" in result["result_reading_note"]
    assert "4000" in result["result_reading_note"]
    assert "bounded previews" in result["result_reading_note"]
    assert set(result["progress_revisions"]) == {short["job_id"], long["job_id"]}
    assert "results" not in wait_for_jobs([short["job_id"]], "s1", 1, include_results=False)


def test_a_result_path_outside_the_job_dir_is_never_read(mmo_env, live_job, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("do not show")
    job = live_job("s1", "w", runner=False, status="completed", result_path=str(secret))
    entry = wait_for_jobs([job["job_id"]], "s1", 1)["results"][job["job_id"]]
    assert entry["preview"] == "" and "unsafe result path" in entry["error"]


def test_a_running_job_times_out_and_a_finish_wakes_the_waiter(mmo_env, live_job):
    job = live_job("s1", "w")
    started = time.monotonic()
    result = wait_for_jobs([job["job_id"]], "s1", 0.4)
    assert time.monotonic() - started >= 0.4  # it waited its whole timeout
    assert result == {"unfinished": [job["job_id"]], "progress_revisions": {job["job_id"]: 0},
                      "changed_job_ids": [], "timed_out_waiting": True}

    waiter = Background(wait_for_jobs, [job["job_id"]], "s1", 3600)
    wait_until(lambda: blocked_in(waiter.thread, "wait_for_jobs", SLEEPING),
               what="the waiter to wait")
    update_job(job["job_id"], status="completed")  # while it waits
    result = waiter.join()
    assert result["timed_out_waiting"] is False
    assert result["unfinished"] == [] and result["changed_job_ids"] == [job["job_id"]]
    assert result["results"][job["job_id"]]["note"] == "no result was recorded"


def test_a_record_write_wakes_the_waiter_without_waiting_for_a_poll(mmo_env, live_job,
                                                                   monkeypatch):
    from mmo_kernel.jobs import waiting

    monkeypatch.setattr(waiting, "POLL_SECONDS", 3600.0)  # only the rename watch can wake it
    job = live_job("s1", "w")
    waiter = Background(wait_for_jobs, [job["job_id"]], "s1", 3600)
    wait_until(lambda: blocked_in(waiter.thread, "wait_for_jobs", SLEEPING),
               what="the waiter to wait")
    update_job(job["job_id"], status="completed")
    result = waiter.join(60)
    assert result["unfinished"] == [] and result["timed_out_waiting"] is False


def test_after_revision_returns_as_soon_as_a_job_progresses(mmo_env, live_job):
    first, second = live_job("s1", "w"), live_job("s1", "w")
    revisions = {first["job_id"]: 0, second["job_id"]: 0}
    waiter = Background(wait_for_jobs, list(revisions), "s1", 3600, after_revision=revisions)
    wait_until(lambda: blocked_in(waiter.thread, "wait_for_jobs", SLEEPING),
               what="the waiter to wait")
    update_job(second["job_id"], active_turn_id="turn-1")  # while it waits
    result = waiter.join()
    assert result["timed_out_waiting"] is False
    assert result["changed_job_ids"] == [second["job_id"]]
    assert result["progress_revisions"] == {first["job_id"]: 0, second["job_id"]: 1}
    assert sorted(result["unfinished"]) == sorted(revisions) and "results" not in result


def test_a_runner_that_dies_while_waited_on_is_noticed(mmo_env, live_job):
    import os
    import signal

    job = live_job("s1", "w")
    waiter = Background(wait_for_jobs, [job["job_id"]], "s1", 60,
                        after_revision={job["job_id"]: 0})
    wait_until(lambda: blocked_in(waiter.thread, "wait_for_jobs", SLEEPING),
               what="the waiter to wait")
    os.killpg(job["runner_pid"], signal.SIGKILL)  # while it waits
    result = waiter.join()
    assert result["changed_job_ids"] == [job["job_id"]] and not result["timed_out_waiting"]


@pytest.mark.parametrize("after, timeout", [
    ({"a": 0}, 1), ({}, 1), ([1], 1), (None, -1), (None, True)])
def test_bad_arguments_are_refused(mmo_env, live_job, after, timeout):
    job = live_job("s1", "w", runner=False, status="completed")
    after = {job["job_id"]: 0, **after} if isinstance(after, dict) and after else after
    phrase = "exactly the requested jobs" if after is not None else "timeout_seconds"
    with pytest.raises(ValueError, match=phrase):
        wait_for_jobs([job["job_id"]], "s1", timeout, after_revision=after)


def test_jobs_of_another_session_are_unknown(mmo_env, live_job):
    job = live_job("s1", "w", runner=False, status="completed")
    with pytest.raises(FileNotFoundError):
        wait_for_jobs([job["job_id"]], "s2", 1)


def test_root_completion_is_deferred_while_workers_run(make_session, live_job):
    session = make_session()
    sid = session["session_id"]
    running = live_job(sid, "flagship_escalation")
    live_job(sid, "literal_scout", runner=False, status="completed")
    assert recoverable_jobs(sid) == [running["job_id"]]
    assert defer_root_completion(sid) == [running["job_id"]]
    assert defer_root_completion(sid) == [running["job_id"]]
    record = read_session_record(sid)
    assert record["status"] == "detached" and record["root_completion_deferred"] is True
    assert record["root_completion_deferred_jobs"] == [running["job_id"]]
    events = [e for e in read_jsonl(session_file(sid, "audit.jsonl"))
              if e["event"] == "root_completion_deferred"]
    assert len(events) == 1 and events[0]["job_ids"] == [running["job_id"]]

    assert wait_for_recoverable_jobs(sid, timeout_seconds=0.3) == [running["job_id"]]
    _later(0.2, lambda: update_job(running["job_id"], status="completed")).join(0)
    assert wait_for_recoverable_jobs(sid, timeout_seconds=10) == []
    cleared = end_root_completion_deferral(sid)
    assert cleared["root_completion_deferred"] is False
    assert cleared["root_completion_deferred_jobs"] == []
    assert defer_root_completion(sid) == []


def test_a_spawned_job_is_waited_on_until_its_real_host_finishes(make_session):
    from mmo_kernel.jobs.records import read_job_record
    from mmo_kernel.jobs.spawn import spawn_job
    from mmo_kernel.state.processes import process_matches, reap_spawned

    session = make_session()
    sid = session["session_id"]
    job = spawn_job(sid, "escalation_lead", None, "flagship_escalation", task="hello")
    result = wait_for_jobs([job["job_id"]], sid, 60)
    assert result["unfinished"] == [] and not result["timed_out_waiting"]
    entry = result["results"][job["job_id"]]
    assert entry["status"] == "completed" and entry["result_kind"] == "final"
    assert json.loads(entry["preview"])["recommendation"]  # the contract's JSON, previewed
    assert result["progress_revisions"][job["job_id"]] == read_job_record(
        job["job_id"])["progress_revision"] > 1
    deadline = time.monotonic() + 10
    while process_matches(job["runner_pid"], job["runner_start_token"]):
        assert time.monotonic() < deadline, "the job host did not exit after finishing"
        reap_spawned()
        time.sleep(0.05)

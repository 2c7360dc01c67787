"""load_job reconciles records with real processes: lost runners, interrupted cold pauses."""

from __future__ import annotations

import os
import signal

from mmo_kernel.jobs.listing import holds_capacity, list_jobs, load_job
from mmo_kernel.jobs.records import job_dir, read_job_record, update_job
from mmo_kernel.state.processes import process_alive, process_matches


def _kill(pid: int) -> None:
    os.killpg(pid, signal.SIGKILL)
    while process_alive(pid):
        pass


def test_a_running_job_whose_runner_died_is_suspended_and_its_app_server_killed(
        mmo_env, live_job, sleeper):
    app_pid, app_token = sleeper()
    job = live_job("s1", "worker", app_server_pid=app_pid, app_server_pgid=app_pid,
                   app_server_start_token=app_token, app_server_thread_id="thr-7")
    log = job_dir(job["job_id"]) / "runner.log"
    log.write_text("runner started\n")
    (job_dir(job["job_id"]) / "events.jsonl").write_text(
        '{"direction":"received","message":{"method":"item/completed","params":'
        '{"item":{"type":"agentMessage","text":"half way there"}}}}\n')
    assert load_job(job["job_id"])["status"] == "running"  # runner alive: untouched
    _kill(job["runner_pid"])

    record = load_job(job["job_id"])
    assert record["status"] == "suspended"
    assert record["result_kind"] == "partial" and record["failure"]["kind"] == "host_lost"
    assert not process_matches(app_pid, app_token)
    assert record["runner_pid"] == job["runner_pid"]  # a suspension keeps host identity
    partial = (job_dir(job["job_id"]) / "partial-result.md").read_text()
    assert "half way there" in partial
    assert "persisted app-server thread" in partial and "thr-7" in partial
    assert record["partial_result_path"] == str(job_dir(job["job_id"]) / "partial-result.md")
    assert log.read_text() == "runner started\n"
    assert not holds_capacity(record)
    assert record["progress_revision"] > job["progress_revision"]


def test_list_jobs_reconciles_too(mmo_env, live_job):
    job = live_job("s1", "worker", status="waiting")
    _kill(job["runner_pid"])
    assert [r["status"] for r in list_jobs("s1")] == ["suspended"]


def test_an_interrupted_cold_pause_is_finished_on_load(mmo_env, live_job, sleeper):
    app_pid, app_token = sleeper()
    job = live_job("s1", "worker", app_server_pid=app_pid, app_server_pgid=app_pid,
                   app_server_start_token=app_token, cold_pause_pending=True,
                   control_socket_path="/tmp/x.sock")
    partial = job_dir(job["job_id"]) / "partial-result.md"
    partial.write_text("work so far\n")
    update_job(job["job_id"], partial_result_path=str(partial))

    record = load_job(job["job_id"])
    assert record["status"] == "paused" and "cold_pause_pending" not in record
    for name in ("runner_pid", "runner_start_token", "app_server_pid", "control_socket_path"):
        assert name not in record
    assert not process_matches(job["runner_pid"], job["runner_start_token"])
    assert not process_matches(app_pid, app_token)
    assert partial.read_text() == "work so far\n"
    assert not holds_capacity(record)


def test_a_cold_pause_in_progress_is_left_alone(mmo_env, live_job, tmp_path, monkeypatch):
    from mmo_kernel.sessions.records import session_dir
    from mmo_kernel.state.files import lifecycle_lock

    directory = session_dir("20260101-000000-s-abcdef")
    directory.mkdir(parents=True)
    job = live_job("20260101-000000-s-abcdef", "worker", cold_pause_pending=True)
    with lifecycle_lock(directory):
        assert load_job(job["job_id"])["status"] == "running"
    assert load_job(job["job_id"])["status"] == "paused"


def test_a_terminal_job_with_a_stale_marker_only_loses_the_marker(mmo_env, live_job):
    job = live_job("s1", "worker", runner=False, status="completed", cold_pause_pending=True)
    record = load_job(job["job_id"])
    assert record["status"] == "completed" and "cold_pause_pending" not in record
    assert read_job_record(job["job_id"]) == record


def test_a_queued_job_that_was_never_launched_fails_after_the_grace(mmo_env, live_job):
    fresh = live_job("s1", "worker", runner=False, status="queued")
    assert load_job(fresh["job_id"])["status"] == "queued"
    stale = live_job("s1", "worker", runner=False, status="queued",
                     created_at="2020-01-01T00:00:00+00:00")
    record = load_job(stale["job_id"])
    assert record["status"] == "failed" and "never launched" in record["error"]
    assert not holds_capacity(record)


def _published(job_id: str, field: str) -> dict:
    import time

    deadline = time.monotonic() + 20
    while True:
        record = read_job_record(job_id)
        if record.get(field):
            return record
        assert time.monotonic() < deadline, f"the host never published {field}"
        time.sleep(0.05)


def test_killing_a_real_runner_suspends_the_job_on_its_persisted_thread(make_session):
    from mmo_kernel.jobs.cancel import cancel_job
    from mmo_kernel.jobs.spawn import spawn_job

    session = make_session()
    job = spawn_job(session["session_id"], "escalation_lead", None, "flagship_escalation",
                    task="Work slowly. FAKE_SLEEP_SECONDS=30")
    record = _published(job["job_id"], "active_turn_id")
    _kill(record["runner_pid"])

    suspended = load_job(job["job_id"])
    assert suspended["status"] == "suspended"
    assert not process_matches(record["app_server_pid"], record["app_server_start_token"])
    partial = (job_dir(job["job_id"]) / "partial-result.md").read_text()
    assert "persisted app-server thread" in partial
    assert record["app_server_thread_id"] in partial
    assert "Traceback" not in (job_dir(job["job_id"]) / "runner.log").read_text()
    cancel_job(job["job_id"], session["session_id"])


def test_cancel_during_a_real_turn_kills_runner_and_app_server(make_session):
    from mmo_kernel.jobs.cancel import cancel_job
    from mmo_kernel.jobs.spawn import spawn_job

    session = make_session()
    job = spawn_job(session["session_id"], "escalation_lead", None, "flagship_escalation",
                    task="Work slowly. FAKE_SLEEP_SECONDS=30")
    record = _published(job["job_id"], "app_server_start_token")
    result = cancel_job(job["job_id"], session["session_id"], reason="no longer needed")
    assert result["jobs"][0]["status"] == "cancelled"
    assert not process_matches(record["runner_pid"], record["runner_start_token"])
    assert not process_matches(record["app_server_pid"], record["app_server_start_token"])
    assert load_job(job["job_id"])["status"] == "cancelled"

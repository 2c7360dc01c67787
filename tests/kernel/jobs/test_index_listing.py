"""Listings served from the index: filters, limit, summaries, reconciliation (issue 15, item 2).

``list_jobs`` and ``iter_sessions`` filter by session, status, agent, profile and
creation time and keep the newest N, from the index; only rows whose status a
reconciliation may change are reconciled, and they are filtered after it. Each
answer is compared with what the records on disk say.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest

from mmo_kernel.jobs.index_rows import RECONCILED_JOB_STATUSES, SUMMARY_KEYS
from mmo_kernel.jobs.listing import iter_job_records, list_jobs, live_jobs
from mmo_kernel.jobs.records import (
    ACTIVE_JOB_STATUSES,
    job_dir,
    job_file,
    read_job_record,
    write_job_record,
)
from mmo_kernel.lifecycle.views import iter_sessions
from mmo_kernel.sessions.index_rows import SUMMARY_KEYS as SESSION_KEYS
from mmo_kernel.sessions.records import new_record_id, write_session_record
from mmo_kernel.state.processes import process_start_token

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _private(mmo_env, mmo_process_guard):
    yield mmo_env


def at(minutes: int) -> str:
    return (T0 + timedelta(minutes=minutes)).isoformat(timespec="microseconds")


def session(minute: int, status: str = "completed", profile: str = "demo",
            root: str = "lead", **extra) -> str:
    sid = f"20260101-12{minute:02d}00-{profile}-{minute:06x}"
    write_session_record({
        "session_id": sid, "status": status, "profile_id": profile, "snapshot_hash": "ab" * 32,
        "cwd": "/tmp", "session_kind": "noninteractive", "root_agent": root,
        "created_at": at(minute), **extra})
    return sid


def job(job_id: str, session_id: str, minute: int, status: str = "completed",
        agent: str = "worker", **extra) -> dict:
    return write_job_record({"job_id": job_id, "session_id": session_id, "agent": agent,
                             "status": status, "created_at": at(minute), **extra})


def ids(rows) -> list[str]:
    return [r["job_id"] for r in rows]


def dead_runner() -> dict:
    """Host identity of a runner that existed and is gone (a real, reaped process)."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"],
                             stdin=subprocess.DEVNULL)
    token = process_start_token(child.pid)
    child.kill()
    child.wait()
    return {"runner_pid": child.pid, "runner_pgid": child.pid, "runner_start_token": token}


@pytest.fixture
def history():
    """Two sessions of two profiles; seven jobs, one per minute, of several agents."""
    a = session(0, profile="demo")
    b = session(1, profile="other", status="paused", root="boss")
    plan = [("j0", a, "completed", "worker"), ("j1", a, "failed", "reviewer"),
            ("j2", b, "completed", "worker"), ("j3", a, "cancelled", "worker"),
            ("j4", b, "completed", "reviewer"), ("j5", a, "completed", "worker"),
            ("j6", b, "failed", "worker")]
    for minute, (job_id, sid, status, agent) in enumerate(plan):
        job(job_id, sid, minute, status, agent, profile_id="demo" if sid == a else "other")
    return {"a": a, "b": b}


def test_filters_and_limit_match_the_records(history):
    a, b = history["a"], history["b"]
    assert ids(list_jobs()) == ["j6", "j5", "j4", "j3", "j2", "j1", "j0"]
    assert ids(list_jobs(a)) == ["j5", "j3", "j1", "j0"]
    assert ids(list_jobs(status="failed")) == ["j6", "j1"]
    assert ids(list_jobs(status=["failed", "cancelled"])) == ["j6", "j3", "j1"]
    assert ids(list_jobs(agent="reviewer")) == ["j4", "j1"]
    assert ids(list_jobs(profile="other")) == ["j6", "j4", "j2"]
    assert ids(list_jobs(since=at(4))) == ["j6", "j5", "j4"]
    assert ids(list_jobs(since=T0 + timedelta(minutes=5))) == ["j6", "j5"]
    assert ids(list_jobs(since="2026-01-01T13:05:00+01:00")) == ["j6", "j5"]  # other zone
    assert ids(list_jobs(limit=2)) == ["j6", "j5"]
    assert ids(list_jobs(a, status="completed", agent="worker", limit=1)) == ["j5"]
    assert ids(list_jobs(b, since=at(3), limit=5)) == ["j6", "j4"]
    assert list_jobs(agent="nobody") == []
    full = list_jobs(a, limit=1)[0]
    assert full == read_job_record("j5")  # full records by default, exactly as on disk


def test_summaries_are_the_records_fields_without_reading_them(history):
    rows = list_jobs(summary=True, limit=3)
    assert [tuple(r) for r in rows] == [SUMMARY_KEYS] * 3
    for row in rows:
        record = read_job_record(row["job_id"])
        assert {k: row[k] for k in SUMMARY_KEYS if k != "updated_at"} == {
            k: record.get(k) for k in SUMMARY_KEYS if k != "updated_at"}
        mtime = job_file(row["job_id"], "metadata.json").stat().st_mtime_ns
        assert abs(datetime.fromisoformat(row["updated_at"]).timestamp() - mtime / 1e9) < 1e-5
    sessions = iter_sessions(summary=True)
    assert [tuple(s) for s in sessions] == [SESSION_KEYS] * 2
    assert [(s["session_id"], s["root_agent"], s["status"]) for s in sessions] == [
        (history["b"], "boss", "paused"), (history["a"], "lead", "completed")]


def test_a_job_without_a_profile_is_found_by_its_sessions_profile(history):
    job("j7", history["b"], 7)  # a hand-made record naming no profile
    assert "profile_id" not in read_job_record("j7")
    assert ids(list_jobs(profile="other", limit=2)) == ["j7", "j6"]
    assert list_jobs(summary=True, limit=1)[0]["profile_id"] == "other"


def test_bad_arguments_are_refused_by_name(history):
    with pytest.raises(ValueError, match="job status must be one of .*'done'"):
        list_jobs(status="done")
    with pytest.raises(ValueError, match="limit must be a positive integer"):
        list_jobs(limit=0)
    with pytest.raises(ValueError, match="limit must be a positive integer"):
        list_jobs(limit=True)
    with pytest.raises(ValueError, match="since must be an ISO date or time"):
        list_jobs(since="yesterday")
    with pytest.raises(ValueError, match="session status must be one of"):
        iter_sessions(status="done")


def test_a_job_whose_runner_died_is_reconciled_before_it_is_filtered(history):
    """The index says ``running``; the runner is gone, so the listing says ``suspended``
    and a ``suspended`` filter finds it."""
    job("j9", history["b"], 9, status="running", **dead_runner())
    (job_dir("j9") / "events.jsonl").write_text("")
    assert ids(list_jobs(status="suspended")) == ["j9"]
    assert read_job_record("j9")["status"] == "suspended"
    assert ids(list_jobs(status="running")) == []


def test_summaries_reconcile_the_rows_that_need_it(history):
    job("j9", history["b"], 9, status="waiting", **dead_runner())
    (job_dir("j9") / "events.jsonl").write_text("")
    [row] = list_jobs(summary=True, limit=1)
    assert (row["job_id"], row["status"]) == ("j9", "suspended")
    assert read_job_record("j9")["status"] == "suspended"


def test_a_never_launched_job_is_failed_by_the_listing(history):
    job("j9", history["a"], 9, status="queued")  # created 2026-01-01: long past the grace
    assert [(r["job_id"], r["status"]) for r in list_jobs(limit=1)] == [("j9", "failed")]
    assert read_job_record("j9")["error"] == "the job host was never launched"


def test_only_statuses_a_reconciliation_can_move_are_reconciled():
    assert RECONCILED_JOB_STATUSES == ACTIVE_JOB_STATUSES


def test_a_limit_is_filled_after_reconciliation_drops_rows(history):
    """The 20 newest rows are ``running`` in the index but suspended on reconciliation
    (more than one batch of rows); a ``running``-or-``completed`` page of two still holds
    the two newest that are."""
    runner = dead_runner()
    for n in range(10, 30):
        job(f"j{n}", history["b"], n, status="running", **runner)
        (job_dir(f"j{n}") / "events.jsonl").write_text("")
    assert ids(list_jobs(status=["running", "completed"], limit=2)) == ["j5", "j4"]
    assert {read_job_record(f"j{n}")["status"] for n in range(10, 30)} == {"suspended"}


def test_unreadable_records_are_listed_beyond_the_limit_and_fail_strict_listings(history):
    bad = job_dir("j9")
    bad.mkdir()
    (bad / "metadata.json").write_text(json.dumps({"job_id": "j9", "session_id": history["a"],
                                                   "created_at": at(-5), "status": 7}))
    rows = list_jobs(include_unreadable=True, limit=2, status="failed")
    assert [(r["job_id"], r["status"]) for r in rows] == [("j6", "failed"), ("j1", "failed"),
                                                          ("j9", "unreadable")]
    assert ids(list_jobs(history["b"], include_unreadable=True)) == ["j6", "j4", "j2"]
    with pytest.raises(RuntimeError, match="invalid job state in .*j9"):
        list_jobs(history["b"])  # strict: one bad record anywhere is reported
    with pytest.raises(RuntimeError, match="invalid job state in .*j9"):
        iter_job_records()


def test_iter_job_records_and_live_jobs_read_only_what_they_need(history):
    job("j9", history["b"], 9, status="running", runner_pid=None)
    assert ids(iter_job_records(history["b"])) == ["j9", "j6", "j4", "j2"]
    assert ids(iter_job_records(status="running")) == ["j9"]
    assert ids(live_jobs()) == ["j9"]
    assert ids(live_jobs(history["a"])) == []


def test_session_filters_and_limit(history):
    c = session(2, status="failed", profile="demo", root="boss")
    d = session(3, status="paused", profile="other")
    assert [s["session_id"] for s in iter_sessions()] == [d, c, history["b"], history["a"]]
    assert [s["session_id"] for s in iter_sessions(all_sessions=False)] == [d, history["b"]]
    assert [s["session_id"] for s in iter_sessions(status="failed")] == [c]
    assert [s["session_id"] for s in iter_sessions(agent="boss")] == [c, history["b"]]
    assert [s["session_id"] for s in iter_sessions(profile="demo")] == [c, history["a"]]
    assert [s["session_id"] for s in iter_sessions(since=at(2))] == [d, c]
    assert [s["session_id"] for s in iter_sessions(limit=3)] == [d, c, history["b"]]
    assert [s["session_id"] for s in iter_sessions(all_sessions=False, limit=1)] == [d]


def test_a_session_whose_host_died_is_reconciled_before_it_is_filtered():
    sid = new_record_id("demo")
    runner = dead_runner()
    write_session_record({
        "session_id": sid, "status": "running", "profile_id": "demo", "snapshot_hash": "ab" * 32,
        "cwd": "/tmp", "session_kind": "noninteractive", "root_agent": "lead",
        "created_at": at(0), "root_pid": runner["runner_pid"],
        "root_start_token": runner["runner_start_token"], "root_thread_id": "thr-1"})
    [row] = iter_sessions(status="suspended")
    assert (row["session_id"], row["status"]) == (sid, "suspended")
    assert iter_sessions(status="running") == []

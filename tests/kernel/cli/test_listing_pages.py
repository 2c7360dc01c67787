"""``mmo jobs`` and ``mmo sessions`` show a page by default; ``mmo doctor --reindex``
rebuilds the listing index (issue 15, items 1 and 2). The real ``mmo`` executable."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime, timedelta

import pytest

from mmo_kernel.cli.paging import DEFAULT_PAGE
from mmo_kernel.jobs.records import job_file, read_job_record, write_job_record
from mmo_kernel.sessions.records import write_session_record
from mmo_kernel.state import index

from .conftest import mmo, mmo_json


def stamp(minutes_ago: float) -> str:
    """A creation time that long before now (the fixtures and tests take seconds, not
    minutes, so ages of whole minutes stay apart)."""
    return (datetime.now(UTC) - timedelta(minutes=minutes_ago)).isoformat(timespec="microseconds")


def session(n: int, status: str, minutes_ago: float) -> str:
    sid = f"20260101-12{n // 60:02d}{n % 60:02d}-demo-{n:06x}"
    write_session_record({
        "session_id": sid, "status": status, "profile_id": "demo", "snapshot_hash": "ab" * 32,
        "cwd": "/tmp", "session_kind": "noninteractive", "root_agent": "lead",
        "created_at": stamp(minutes_ago)})
    return sid


@pytest.fixture
def jobs() -> list[str]:
    """55 finished jobs, the newest last; every fifth one a reviewer's."""
    sid = session(0, "completed", 1000)
    made = []
    for n in range(55):
        job_id = f"20260101-13{n // 60:02d}{n % 60:02d}-worker-{n:06x}"
        write_job_record({"job_id": job_id, "session_id": sid,
                          "agent": "reviewer" if n % 5 == 0 else "worker",
                          "status": "completed", "created_at": stamp(55 - n)})
        made.append(job_id)
    return made[::-1]  # newest first


def test_mmo_jobs_shows_the_newest_page_and_says_there_is_more(jobs):
    out = mmo("jobs")
    assert out.returncode == 0, out.stderr
    assert len(out.stdout.splitlines()) == 1 + DEFAULT_PAGE
    assert f"the newest {DEFAULT_PAGE} jobs" in out.stderr and "--all" in out.stderr
    page = mmo_json("jobs")
    assert [j["job_id"] for j in page["jobs"]] == jobs[:DEFAULT_PAGE]
    assert page["has_more"] is True


def test_mmo_jobs_limit_all_agent_and_since(jobs):
    assert [j["job_id"] for j in mmo_json("jobs", "--since", "11m")["jobs"]] == jobs[:10]
    assert [j["job_id"] for j in mmo_json("jobs", "--limit", "3")["jobs"]] == jobs[:3]
    everything = mmo_json("jobs", "--all")
    assert [j["job_id"] for j in everything["jobs"]] == jobs and everything["has_more"] is False
    out = mmo("jobs", "--all")
    assert len(out.stdout.splitlines()) == 1 + 55 and "newest" not in out.stderr
    reviewers = mmo_json("jobs", "--agent", "reviewer")["jobs"]
    assert [j["job_id"] for j in reviewers] == [j for n, j in enumerate(jobs[::-1])
                                                 if n % 5 == 0][::-1]
    since = read_job_record(jobs[2])["created_at"]  # an ISO time: from it on, inclusive
    assert [j["job_id"] for j in mmo_json("jobs", "--since", since)["jobs"]] == jobs[:3]
    assert mmo_json("jobs", "--all", "--limit", "2")["has_more"] is True


def test_bad_paging_arguments_are_usage_errors(jobs):
    for args, phrase in ((("--limit", "0"), "--limit: must be a positive integer"),
                         (("--limit", "x"), "--limit: must be a positive integer"),
                         (("--since", "last week"), "--since: must be an age")):
        out = mmo("jobs", *args)
        assert out.returncode == 2 and phrase in out.stderr, out.stderr


def test_a_short_id_in_a_page_is_unique_among_every_job(jobs):
    """Short ids are judged against all jobs, not only the page the table shows: an older
    job of the same second makes the newest one's time stamp ambiguous."""
    twin = jobs[0][:-6] + "ffffff"
    write_job_record({"job_id": twin, "session_id": "s1", "agent": "worker",
                      "status": "completed", "created_at": stamp(999)})
    out = mmo("jobs", "--limit", "1")
    short = out.stdout.splitlines()[1].split()[0]
    assert jobs[0].startswith(short) and not twin.startswith(short)
    assert mmo_json("job", "show", short)["job_id"] == jobs[0]


def test_mmo_sessions_pages_and_all_still_includes_finished_ones():
    live = [session(n, "paused", 100 - n) for n in range(1, 4)]
    done = [session(n, "completed", 100 - n) for n in range(4, 6)]
    active = mmo_json("sessions")
    assert [s["session_id"] for s in active["sessions"]] == live[::-1]
    assert active["has_more"] is False
    every = mmo_json("sessions", "--all")
    assert [s["session_id"] for s in every["sessions"]] == (live + done)[::-1]
    page = mmo_json("sessions", "--all", "--limit", "2")
    assert [s["session_id"] for s in page["sessions"]] == done[::-1] and page["has_more"]
    out = mmo("sessions", "--limit", "1")
    assert out.returncode == 0 and "the newest 1 sessions" in out.stderr
    assert "active sessions only" in out.stderr
    assert len(out.stdout.splitlines()) == 2


def test_mmo_doctor_reindex_rebuilds_the_index_and_reports_counts(jobs):
    session(7, "paused", 5)
    bad = job_file(jobs[0], "metadata.json")
    db = sqlite3.connect(index.index_path())
    with db:  # a row that lies while its identity matches: only a rebuild repairs it
        db.execute("UPDATE rows SET status = 'running' WHERE id = ?", (jobs[1],))
    db.close()
    bad.write_text("{ broken")
    report = json.loads(mmo("doctor", "--reindex", "--json").stdout)
    assert report["reindex"] == {"sessions": 2, "jobs": 55, "unreadable": 1}
    check = report["checks"][0]
    assert check["name"] == "index" and check["status"] == "warn"
    assert "55 job records" in check["detail"] and "1 unreadable" in check["detail"]
    db = sqlite3.connect(index.index_path())
    assert db.execute("SELECT status FROM rows WHERE id = ?", (jobs[1],)).fetchone() == (
        "completed",)
    db.close()
    listed = {j["job_id"]: j["status"] for j in mmo_json("jobs", "--all")["jobs"]}
    assert listed[jobs[1]] == "completed" and listed[jobs[0]] == "unreadable"
    table = mmo("doctor", "--reindex")
    assert table.stdout.splitlines()[1].split()[:2] == ["index", "warn"]

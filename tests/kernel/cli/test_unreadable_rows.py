"""One unreadable record is a row of its own; every other record is still listed
(issue 13, item 10). The real ``mmo`` executable over hand-written records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mmo_kernel import package_version
from mmo_kernel.jobs.records import job_dir
from mmo_kernel.sessions.records import (
    new_record_id,
    session_file,
    utc_now,
    write_run_record,
    write_session_record,
)

from .conftest import mmo, mmo_json


def make_session(status: str) -> str:
    sid, run_id, now = new_record_id("demo"), new_record_id("run"), utc_now()
    run_field = "last_run_id" if status == "completed" else "current_run_id"
    write_session_record({
        "session_id": sid, "status": status, "profile_id": "demo", "snapshot_hash": "ab" * 32,
        "cwd": "/tmp", "session_kind": "noninteractive", "root_agent": "lead",
        "created_at": now, "run_created_at": now, run_field: run_id, "run_sequence": 1,
        "root_mcp_token_hash": "00" * 32, **({"finished_at": now} if status == "completed"
                                              else {})})
    write_run_record({"run_id": run_id, "session_id": sid, "sequence": 1, "kind": "initial",
                      "status": status, "created_at": now, "root_mcp_token_hash": "00" * 32})
    return sid


def make_job(session_id: str, **extra) -> str:
    job_id = new_record_id("worker")
    job_dir(job_id).mkdir(parents=True)
    (job_dir(job_id) / "metadata.json").write_text(json.dumps({
        "schema_version": 1, "package_version": package_version(), "job_id": job_id,
        "session_id": session_id, "agent": "worker", "status": "completed",
        "created_at": utc_now(), **extra}))
    return job_id


def corrupt(path: Path, **changes) -> None:
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))


@pytest.fixture
def sessions():
    """A finished session, a paused one, and one whose record has a wrongly typed field."""
    done, paused, bad = make_session("completed"), make_session("paused"), make_session("paused")
    path = session_file(bad, "session.json")
    corrupt(path, created_at=5)
    return {"done": done, "paused": paused, "bad": bad,
            "reason": f"{path}: field 'created_at': Input should be a valid string"}


def test_mmo_sessions_lists_the_unreadable_record_as_a_row_and_all_the_others(sessions):
    out = mmo("sessions", "--all")
    assert out.returncode == 0, out.stderr
    rows = {line.split()[0]: line for line in out.stdout.splitlines()[1:]}
    assert len(rows) == 3
    bad = next(line for short, line in rows.items() if sessions["bad"].startswith(short))
    assert bad.split(None, 1)[1] == f"unreadable: {sessions['reason']}"
    assert sum("completed" in line for line in rows.values()) == 1
    assert sum(" paused " in line for line in rows.values()) == 1


def test_filters_keep_the_unreadable_row_whose_status_is_unknown(sessions):
    active = mmo("sessions")  # finished ones left out; the unreadable one may be active
    assert active.returncode == 0, active.stderr
    assert len(active.stdout.splitlines()) == 3 and "unreadable: " in active.stdout
    assert "completed" not in active.stdout
    failed = mmo("sessions", "--status", "failed")
    assert failed.returncode == 0 and failed.stdout.count("unreadable: ") == 1


def test_mmo_sessions_json_marks_the_unreadable_record(sessions):
    listed = {s["session_id"]: s for s in mmo_json("sessions", "--all")["sessions"]}
    assert set(listed) == {sessions["done"], sessions["paused"], sessions["bad"]}
    bad = listed[sessions["bad"]]
    assert bad["status"] == "unreadable" and bad["error"] == sessions["reason"]
    assert bad["record_path"] == str(session_file(sessions["bad"], "session.json"))
    assert listed[sessions["paused"]]["status"] == "paused"


def test_mmo_jobs_and_session_show_list_an_unreadable_job_as_a_row(sessions):
    sid = sessions["paused"]
    good = make_job(sid)
    bad = make_job(sid, depth="1")
    reason = f"{job_dir(bad) / 'metadata.json'}: field 'depth': Input should be a valid integer"
    out = mmo("jobs")
    assert out.returncode == 0, out.stderr
    rows = out.stdout.splitlines()[1:]
    assert len(rows) == 2 and f"unreadable: {reason}" in out.stdout
    listed = {j["job_id"]: j for j in mmo_json("jobs", "--session", sid)["jobs"]}
    assert listed[good]["status"] == "completed"
    assert listed[bad] == {"job_id": bad, "session_id": sid, "status": "unreadable",
                           "error": reason, "created_at": listed[bad]["created_at"],
                           "record_path": str(job_dir(bad) / "metadata.json")}
    shown = mmo("session", "show", sid)
    assert shown.returncode == 0, shown.stderr
    assert "jobs (2)" in shown.stdout and f"unreadable: {reason}" in shown.stdout


def test_the_api_offers_the_rows_and_keeps_its_strict_default(sessions):
    from mmo_kernel.api import iter_session_records, iter_sessions, list_jobs

    rows = iter_sessions(include_unreadable=True)
    assert {r["session_id"]: r["status"] for r in rows} == {
        sessions["done"]: "completed", sessions["paused"]: "paused",
        sessions["bad"]: "unreadable"}
    job = make_job(sessions["paused"], status=7)
    assert [j["status"] for j in list_jobs(include_unreadable=True)] == ["unreadable"]
    assert list_jobs(sessions["done"], include_unreadable=True) == []
    with pytest.raises(RuntimeError, match="invalid session state"):
        iter_session_records()  # what admission and `--last` rely on: never a silent skip
    with pytest.raises(RuntimeError, match=f"invalid job state in .*{job}"):
        list_jobs()

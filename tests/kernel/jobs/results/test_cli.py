"""``mmo jobs`` / ``mmo job ...`` through the real ``mmo`` executable."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from kernel.jobs.results.conftest import WRITER, make_job

from mmo_kernel.jobs.records import job_dir, read_job_record

MMO = str(Path(sys.executable).with_name("mmo"))


def mmo(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([MMO, *args], capture_output=True, text=True, stdin=subprocess.DEVNULL,
                          timeout=60)


def test_jobs_lists_a_readable_table_and_json(session):
    job = make_job(session, result="hello", task_kind="review parser")
    table = mmo("jobs", "--session", session["session_id"])
    assert table.returncode == 0, table.stderr
    header, row = table.stdout.splitlines()[:2]
    assert header.split()[:3] == ["JOB", "AGENT", "STATUS"]
    short = row.split()[0]  # tables show short ids: a unique prefix
    assert job["job_id"].startswith(short) and "completed" in row and "review parser" in row
    listed = json.loads(mmo("jobs", "--json").stdout)["jobs"]
    assert [j["job_id"] for j in listed] == [job["job_id"]]


def test_show_result_and_accept_as_the_sessions_root(session):
    job = make_job(session, result="the final answer\n")
    shown = json.loads(mmo("job", "show", job["job_id"], "--json").stdout)
    assert shown["job_id"] == job["job_id"] and shown["runtime_current"] in (True, False)
    refused = mmo("job", "accept", job["job_id"], "--reason", "ok")
    assert refused.returncode == 1 and "result must be read" in refused.stderr
    assert "Traceback" not in refused.stderr and len(refused.stderr.splitlines()) == 1
    read = mmo("job", "result", job["job_id"])
    assert read.returncode == 0 and read.stdout == "the final answer\n"
    assert "result_state read" in read.stderr
    accepted = json.loads(mmo("job", "accept", job["job_id"], "--reason", "ok", "--json").stdout)
    assert accepted["result_state"] == "accepted"


def test_result_paging_and_a_bad_cursor(session):
    job = make_job(session, result="abcdefghij")
    first = mmo("job", "result", job["job_id"], "--max-chars", "4", "--json")
    page = json.loads(first.stdout)
    assert page["content"] == "abcd" and page["next_cursor"] == 4
    bad = mmo("job", "result", job["job_id"], "--cursor", "99")
    assert bad.returncode == 1 and "exceeds the result length" in bad.stderr


def test_control_uses_the_current_revision_by_default(session, fake_host):
    job = make_job(session, WRITER, status="running", control_revision=0)
    fake_host(job["job_id"])
    out = mmo("job", "control", job["job_id"], "steer", "--input", "narrow it down")
    assert out.returncode == 0, out.stderr
    assert "revision 1" in out.stdout
    stale = mmo("job", "control", job["job_id"], "interrupt", "--expected-revision", "0")
    assert stale.returncode == 1 and "stale control revision" in stale.stderr
    bad = mmo("job", "control", job["job_id"], "respond", "--request-id", "7",
              "--response", "not json")
    assert bad.returncode == 1 and "--response must be a JSON object" in bad.stderr
    assert read_job_record(job["job_id"])["control_revision"] == 1


def test_trace_table(session):
    job = make_job(session, WRITER)
    events = job_dir(job["job_id"]) / "events.jsonl"
    events.write_text(json.dumps({"direction": "received",
                                  "message": {"method": "turn/started", "params": {}}}) + "\n")
    out = mmo("job", "trace", job["job_id"])
    assert out.returncode == 0 and "turn/started" in out.stdout


def test_help_teaches_the_commands():
    out = mmo("job", "--help")
    for word in ("show", "result", "trace", "control", "cancel", "diff", "accept", "reject",
                 "integrate"):
        assert word in out.stdout
    control = mmo("job", "control", "--help").stdout
    assert "--expected-revision" in control and "respond --request-id" in control


def test_unknown_job_is_one_clear_line(session):
    out = mmo("job", "show", "20250101-000000-nope-abcdef")
    assert out.returncode == 1 and "no MMO job" in out.stderr and "Traceback" not in out.stderr

"""Edge guarantees of result and trace reading and of job listing, each on the real path (04).

Each test pins one documented boundary that a plausible slip would move:
the ``max_chars`` ceiling, the separator in the job-dir containment check,
a cursor exactly at a non-zero length, and what counts as a job directory.
"""

from __future__ import annotations

import json

import pytest
from kernel.jobs.results.conftest import REVIEWER, ROOT, WRITER, make_job

from mmo_kernel.jobs.listing import list_jobs
from mmo_kernel.jobs.records import job_dir, read_job_record, write_job_record
from mmo_kernel.jobs.results import MAX_PAGE_CHARS, read_result
from mmo_kernel.jobs.traces import read_agent_trace_record, read_trace
from mmo_kernel.sessions.records import utc_now


def test_max_chars_is_capped_at_200000(session):
    assert MAX_PAGE_CHARS == 200_000
    text = "abcdefghij" * 25_000  # 250,000 characters
    job = make_job(session, result=text)
    page = read_result(job["job_id"], session["session_id"], max_chars=200_000)
    assert len(page["content"]) == 200_000 and page["next_cursor"] == 200_000
    for too_big in (200_001, 10**9):
        with pytest.raises(ValueError, match="max_chars must be an integer from 1 to 200000"):
            read_result(job["job_id"], session["session_id"], max_chars=too_big)
    with pytest.raises(ValueError, match="max_chars must be an integer from 1 to 200000"):
        read_result(job["job_id"], session["session_id"], max_chars=0)


def _sibling(job: dict, suffix: str = "0") -> dict:
    """A second job whose id extends the first one's: ``<id>0`` beside ``<id>``."""
    record = {"job_id": job["job_id"] + suffix, "session_id": job["session_id"],
              "agent": REVIEWER, "status": "completed", "created_at": utc_now()}
    write_job_record(record)
    (job_dir(record["job_id"]) / "result.md").write_text("the sibling's result")
    return record


@pytest.mark.parametrize("form", ["absolute", "relative"])
def test_a_sibling_job_dir_sharing_the_id_prefix_is_outside(session, form):
    job = make_job(session, result="mine")
    sibling = _sibling(job)
    target = job_dir(sibling["job_id"]) / "result.md"
    value = str(target) if form == "absolute" else f"../{sibling['job_id']}/result.md"
    write_job_record({**read_job_record(job["job_id"]), "result_path": value})
    with pytest.raises(RuntimeError, match="unsafe result path: .* points outside the job's"):
        read_result(job["job_id"], session["session_id"])


def test_a_cursor_at_the_result_length_is_past_the_end(session):
    job = make_job(session, result="0123456789")
    with pytest.raises(ValueError, match=r"cursor 10 exceeds the result length \(10 char"):
        read_result(job["job_id"], session["session_id"], cursor=10)
    assert read_job_record(job["job_id"])["result_state"] == "unread"
    last = read_result(job["job_id"], session["session_id"], cursor=9)
    assert last["content"] == "9" and last["next_cursor"] is None


def _rows(job_id: str, count: int) -> None:
    lines = [json.dumps({"direction": "received", "message": {"method": f"m{i}"}})
             for i in range(count)]
    (job_dir(job_id) / "events.jsonl").write_text("\n".join(lines) + "\n")


def test_a_trace_cursor_at_the_log_length_is_an_empty_page_for_tailing(session):
    job = make_job(session, WRITER, status="running")
    _rows(job["job_id"], 3)
    page = read_trace(job["job_id"], session["session_id"], ROOT, cursor=3)
    assert page["records"] == [] and page["next_cursor"] == 3 and page["has_more"] is False
    with pytest.raises(ValueError, match=r"cursor 4 exceeds the trace length \(3 lines\)"):
        read_trace(job["job_id"], session["session_id"], ROOT, cursor=4)


def test_a_trace_record_cursor_at_its_length_is_past_the_end(session):
    job = make_job(session, WRITER)
    _rows(job["job_id"], 1)
    whole = read_agent_trace_record(job["job_id"], session["session_id"], ROOT,
                                    record_cursor=0)
    total = whole["total_chars"]
    assert total > 0 and whole["next_cursor"] is None
    with pytest.raises(ValueError, match=f"cursor {total} exceeds the record length"):
        read_agent_trace_record(job["job_id"], session["session_id"], ROOT, record_cursor=0,
                                cursor=total)


def test_a_job_directory_without_metadata_json_is_not_listed(session):
    listed = make_job(session, result="x")
    half_made = job_dir(listed["job_id"] + "-half")  # e.g. a spawn that died before its record
    half_made.mkdir()
    (half_made / "prompt.txt").write_text("the task")
    ids = [r["job_id"] for r in list_jobs()]
    assert ids == [listed["job_id"]]
    assert [r["job_id"] for r in list_jobs(include_unreadable=True)] == [listed["job_id"]]
    assert [r["job_id"] for r in list_jobs(session["session_id"])] == [listed["job_id"]]

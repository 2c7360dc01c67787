"""read_result / accept_result edges found by mutation testing (spec 04 results)."""

from __future__ import annotations

import pytest
from kernel.jobs.results.conftest import REVIEWER, WRITER, make_job

from mmo_kernel.jobs.records import read_job_record
from mmo_kernel.jobs.results import accept_result, read_result


def test_a_cursor_equal_to_a_one_character_result_is_refused(session):
    job = make_job(session, result="x")
    with pytest.raises(ValueError, match="exceeds the result length"):
        read_result(job["job_id"], session["session_id"], cursor=1)
    assert read_job_record(job["job_id"])["result_state"] == "unread"


def test_a_first_page_reports_the_recorded_result_state(session):
    job = make_job(session, result="0123456789", result_state="accepted")
    page = read_result(job["job_id"], session["session_id"], max_chars=4)
    assert page["truncated"] is True and page["result_state"] == "accepted"


def test_a_first_page_of_a_record_without_a_result_state_is_unread(session):
    job = make_job(session, result="0123456789", result_state=None)
    page = read_result(job["job_id"], session["session_id"], max_chars=4)
    assert page["truncated"] is True and page["result_state"] == "unread"


def test_a_worker_caller_job_must_run_the_agent_it_claims(session):
    writer = make_job(session, WRITER, status="running")
    job = make_job(session, REVIEWER, result="r")
    with pytest.raises(PermissionError, match="runs agent"):
        read_result(job["job_id"], session["session_id"], caller_job_id=writer["job_id"],
                    caller_agent=REVIEWER)
    assert read_job_record(job["job_id"])["result_state"] == "unread"


def test_a_worker_agent_without_its_job_id_cannot_accept(session):
    job = make_job(session, REVIEWER, result="r")
    read_result(job["job_id"], session["session_id"])
    with pytest.raises(PermissionError, match="own caller_job_id"):
        accept_result(job["job_id"], "mine now", session["session_id"], WRITER)
    assert read_job_record(job["job_id"])["result_state"] == "read"

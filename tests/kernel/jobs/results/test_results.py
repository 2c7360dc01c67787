"""read_result paging and formats, path safety, accept/reject authority and audit (spec 04)."""

from __future__ import annotations

import json
import os

import pytest
from kernel.jobs.results.conftest import REVIEWER, ROOT, WRITER, audit_events, make_job

from mmo_kernel.jobs.records import job_dir, read_job_record, write_job_record
from mmo_kernel.jobs.results import accept_result, read_result, reject_result

TEXT = "Résumé ✓ — line one\nline two 🚀\n" * 40


def _all_pages(job_id, session_id, max_chars):
    pages, cursor = [], 0
    while cursor is not None:
        page = read_result(job_id, session_id, cursor=cursor, max_chars=max_chars)
        pages.append(page)
        cursor = page["next_cursor"]
    return pages


def test_pages_are_exact_slices_that_reproduce_the_result(session):
    job = make_job(session, result=TEXT)
    pages = _all_pages(job["job_id"], session["session_id"], 97)
    assert "".join(p["content"] for p in pages).encode() == TEXT.encode()
    assert all(p["total_chars"] == len(TEXT) and p["content_format"] == "text" for p in pages)
    assert [p["truncated"] for p in pages] == [True] * (len(pages) - 1) + [False]
    assert pages[-1]["next_cursor"] is None
    assert all("job" not in p and "result_path" not in json.dumps(p) for p in pages)
    assert str(job_dir(job["job_id"])) not in json.dumps(pages)


def test_only_the_last_page_marks_the_result_read_and_audits_once(session):
    job = make_job(session, result=TEXT)
    first = read_result(job["job_id"], session["session_id"], max_chars=10)
    assert first["result_state"] == "unread"
    assert read_job_record(job["job_id"])["result_state"] == "unread"
    last = read_result(job["job_id"], session["session_id"], cursor=10, max_chars=10**5)
    assert last["result_state"] == "read" and last["next_cursor"] is None
    read_result(job["job_id"], session["session_id"])
    reads = [e for e in audit_events(session) if e["event"] == "agent_result_read"]
    assert len(reads) == 1 and reads[0]["job_id"] == job["job_id"]
    assert reads[0]["run_id"] == session["current_run_id"]


def test_cursor_past_the_end_fails_and_changes_nothing(session):
    job = make_job(session, result="short")
    with pytest.raises(ValueError, match="exceeds the result length"):
        read_result(job["job_id"], session["session_id"], cursor=6)
    assert read_job_record(job["job_id"])["result_state"] == "unread"


def test_validated_contract_returns_parsed_json_and_counts_the_text(session):
    value = {"summary": "ok", "items": [1, 2]}
    job = make_job(session, result=json.dumps(value, indent=2), structured=value,
                   contract_valid=True)
    page = read_result(job["job_id"], session["session_id"], max_chars=5)
    assert page["content_format"] == "json" and page["content"] == value
    assert page["total_chars"] == len(json.dumps(value, indent=2))
    assert page["next_cursor"] is None and page["result_state"] == "read"


def test_json_null_stays_none_and_invalid_contract_is_text(session):
    null_job = make_job(session, result="null", structured=None, contract_valid=True)
    page = read_result(null_job["job_id"], session["session_id"])
    assert page["content_format"] == "json" and page["content"] is None
    warned = make_job(session, result='{"x": 1}', structured={"x": 1}, contract_valid=False)
    assert read_result(warned["job_id"], session["session_id"])["content_format"] == "text"


def test_minimal_hand_written_record_with_a_result_path_is_readable(session):
    job = make_job(session)
    (job_dir(job["job_id"]) / "out.md").write_text("hello")
    write_job_record({**read_job_record(job["job_id"]), "result_path": "out.md"})
    page = read_result(job["job_id"], session["session_id"])
    assert page["content"] == "hello" and page["result_kind"] == "final"
    assert read_job_record(job["job_id"])["result_state"] == "read"


def test_partial_result_when_there_is_no_final_one(session):
    job = make_job(session, partial="work so far", status="suspended")
    page = read_result(job["job_id"], session["session_id"])
    assert page["result_kind"] == "partial" and page["content"] == "work so far"


@pytest.mark.parametrize(("field", "phrase"), [
    ("result_path", "unsafe result path"),
    ("partial_result_path", "unsafe partial-result path"),
    ("structured_result_path", "unsafe structured-result path"),
])
def test_paths_outside_the_job_dir_are_refused(session, tmp_path, field, phrase):
    outside = tmp_path / "secret.md"
    outside.write_text("{}")
    job = make_job(session, result="fine", contract_valid=True, status="completed")
    if field == "partial_result_path":
        write_job_record({**read_job_record(job["job_id"]), "result_path": None,
                          "result_kind": "partial"})
    write_job_record({**read_job_record(job["job_id"]), field: str(outside)})
    with pytest.raises(RuntimeError, match=phrase):
        read_result(job["job_id"], session["session_id"])


@pytest.mark.parametrize(("field", "phrase"), [
    ("partial_result_path", "unsafe partial-result path"),
    ("structured_result_path", "unsafe structured-result path"),
])
def test_an_unsafe_path_fails_even_when_this_read_would_not_open_it(session, tmp_path, field,
                                                                     phrase):
    outside = tmp_path / "elsewhere.md"
    outside.write_text("{}")
    # A final text result without a validated contract: neither the partial nor the
    # structured result would be read, yet a record naming a file elsewhere is refused.
    job = make_job(session, result="fine", contract_valid=False, **{field: str(outside)})
    with pytest.raises(RuntimeError, match=phrase):
        read_result(job["job_id"], session["session_id"])
    assert read_job_record(job["job_id"])["result_state"] == "unread"


def test_a_symlink_leaving_the_job_dir_is_refused(session, tmp_path):
    job = make_job(session)
    (tmp_path / "elsewhere.md").write_text("x")
    os.symlink(tmp_path / "elsewhere.md", job_dir(job["job_id"]) / "result.md")
    write_job_record({**read_job_record(job["job_id"]), "result_path": "result.md"})
    with pytest.raises(RuntimeError, match="unsafe result path"):
        read_result(job["job_id"], session["session_id"])


def test_a_job_of_another_session_is_unknown(session):
    job = make_job(session, result="x")
    with pytest.raises(FileNotFoundError):
        read_result(job["job_id"], "20250101-000000-other-abcdef")


def test_accept_requires_read_records_reason_and_audits(session):
    job = make_job(session, result="done")
    with pytest.raises(RuntimeError, match="result must be read"):
        accept_result(job["job_id"], "looks right", session["session_id"], ROOT)
    read_result(job["job_id"], session["session_id"])
    with pytest.raises(ValueError, match="reason"):
        accept_result(job["job_id"], "  ", session["session_id"], ROOT)
    public = accept_result(job["job_id"], "looks right", session["session_id"], ROOT)
    assert public["result_state"] == "accepted" and public["disposition_reason"] == "looks right"
    event = [e for e in audit_events(session) if e["event"] == "agent_result_accepted"][-1]
    assert event["job_id"] == job["job_id"] and event["reason"] == "looks right"
    with pytest.raises(RuntimeError, match="result must be read"):
        reject_result(job["job_id"], "changed my mind", session["session_id"], ROOT)


def test_only_root_and_ancestors_dispose_never_siblings_or_grants(session):
    parent = make_job(session, WRITER, status="running")
    child = make_job(session, REVIEWER, result="r", caller_job_id=parent["job_id"])
    sibling = make_job(session, REVIEWER, status="running")
    read_result(child["job_id"], session["session_id"], caller_job_id=sibling["job_id"],
                caller_agent=REVIEWER)  # any agent of the session may read
    with pytest.raises(PermissionError, match="not a descendant"):
        accept_result(child["job_id"], "mine", session["session_id"], REVIEWER,
                      caller_job_id=sibling["job_id"])
    assert read_job_record(child["job_id"])["result_state"] == "read"
    done = reject_result(child["job_id"], "wrong approach", session["session_id"], WRITER,
                         caller_job_id=parent["job_id"])
    assert done["result_state"] == "rejected"
    assert [e["event"] for e in audit_events(session)][-1] == "agent_result_rejected"


def test_disposition_waits_for_a_finished_job(session):
    job = make_job(session, partial="so far", status="suspended")
    read_result(job["job_id"], session["session_id"])
    with pytest.raises(RuntimeError, match="while it is suspended"):
        accept_result(job["job_id"], "early", session["session_id"], ROOT)

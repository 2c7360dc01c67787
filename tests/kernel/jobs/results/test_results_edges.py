"""Reading and disposing of results at their edges (spec 04 "Results").

``test_results.py`` covers paging, formats and authority; these pin each
page field, each argument refusal, which file is served when both a final and
a partial result exist, what a disposition records and audits, and the path
checks of ``jobs.result_files`` one by one, so a changed comparison, default or
field in ``jobs.results`` / ``jobs.result_files`` fails a test (``make mutate``).
"""

from __future__ import annotations

import json
import os

import pytest
from kernel.jobs.results.conftest import REVIEWER, ROOT, WRITER, audit_events, make_job

from mmo_kernel.jobs.records import job_dir, read_job_record, update_job
from mmo_kernel.jobs.result_files import contained_result_file, read_result_file, result_source
from mmo_kernel.jobs.results import accept_result, read_result, reject_result


def _read(session, job, **kwargs):
    return read_result(job["job_id"], session["session_id"], **kwargs)


def test_a_result_page_has_exactly_its_fields(session):
    job = make_job(session, result="abcdef")
    first = _read(session, job, cursor=1, max_chars=2)
    assert first == {"job_id": job["job_id"], "status": "completed", "content_format": "text",
                     "content": "bc", "cursor": 1, "next_cursor": 3, "truncated": True,
                     "total_chars": 6, "result_kind": "final", "result_state": "unread"}
    last = _read(session, job, cursor=3, max_chars=3)
    assert (last["content"], last["next_cursor"], last["truncated"], last["result_state"]) == (
        "def", None, False, "read")
    assert _read(session, job, cursor=5, max_chars=1)["content"] == "f"


@pytest.mark.parametrize("cursor", [-1, True, "0", None, 1.0])
def test_a_bad_cursor_is_named(session, cursor):
    job = make_job(session, result="abc")
    with pytest.raises(ValueError) as info:
        _read(session, job, cursor=cursor)
    assert str(info.value) == f"cursor must be a non-negative integer, got {cursor!r}"


@pytest.mark.parametrize("max_chars", [0, -5, 200001, True, "10", None])
def test_a_bad_max_chars_is_named(session, max_chars):
    job = make_job(session, result="abc")
    with pytest.raises(ValueError) as info:
        _read(session, job, max_chars=max_chars)
    assert str(info.value) == f"max_chars must be an integer from 1 to 200000, got {max_chars!r}"
    assert read_job_record(job["job_id"])["result_state"] == "unread"


def test_max_chars_one_and_the_default_twenty_thousand(session):
    job = make_job(session, result="x" * 20001)
    assert _read(session, job, max_chars=1)["next_cursor"] == 1
    page = _read(session, job)
    assert len(page["content"]) == 20000 and page["next_cursor"] == 20000


def test_an_empty_result_is_one_empty_last_page(session):
    job = make_job(session, result="")
    page = _read(session, job)
    assert (page["content"], page["total_chars"], page["next_cursor"], page["truncated"],
            page["result_state"]) == ("", 0, None, False, "read")
    with pytest.raises(ValueError) as info:
        _read(session, job, cursor=1)
    assert str(info.value) == "cursor 1 exceeds the result length (0 characters)"


def test_which_file_is_the_result(session):
    both = make_job(session, result="final text", partial="partial text")
    assert both["result_kind"] == "final"
    page = _read(session, both)
    assert (page["result_kind"], page["content"]) == ("final", "final text")
    update_job(both["job_id"], result_kind="partial")
    page = _read(session, both)
    assert (page["result_kind"], page["content"]) == ("partial", "partial text")
    only_final = make_job(session, result="only final", result_kind="partial")
    page = _read(session, only_final)
    assert (page["result_kind"], page["content"]) == ("final", "only final")


def test_no_result_yet_is_refused_with_the_jobs_status(session):
    job = make_job(session, status="running")
    with pytest.raises(RuntimeError) as info:
        _read(session, job)
    assert str(info.value).startswith(f"job {job['job_id']} has no result yet (status running); ")


def test_structured_content_only_with_a_validated_contract_and_at_cursor_zero(session):
    value = {"a": [1, 2]}
    text = json.dumps(value)
    job = make_job(session, result=text, structured=value, contract_valid=True)
    page = _read(session, job)
    assert (page["content"], page["content_format"], page["total_chars"], page["next_cursor"],
            page["truncated"]) == (value, "json", len(text), None, False)
    later = _read(session, job, cursor=2, max_chars=3)
    assert (later["content"], later["content_format"]) == (text[2:5], "text")
    for valid in (False, None):
        plain = make_job(session, result=text, structured=value, contract_valid=valid)
        assert _read(session, plain)["content_format"] == "text"
    broken = make_job(session, result=text, structured=value, contract_valid=True)
    (job_dir(broken["job_id"]) / "result.json").write_text("{not json")
    assert _read(session, broken)["content"] == text
    missing = make_job(session, result=text, structured=value, contract_valid=True)
    (job_dir(missing["job_id"]) / "result.json").unlink()
    assert _read(session, missing)["content_format"] == "text"


def test_a_partial_result_is_never_structured(session):
    value = {"a": 1}
    job = make_job(session, partial="so far", structured=value, contract_valid=True,
                   status="suspended")
    page = _read(session, job)
    assert (page["result_kind"], page["content_format"], page["content"]) == (
        "partial", "text", "so far")


def test_reading_the_last_page_is_audited_with_its_caller(session):
    parent = make_job(session, WRITER, status="running")
    job = make_job(session, REVIEWER, result="r")
    read_result(job["job_id"], session["session_id"], caller_job_id=parent["job_id"],
                caller_agent=WRITER)
    [event] = [e for e in audit_events(session) if e["event"] == "agent_result_read"]
    assert (event["job_id"], event["agent"], event["result_kind"], event["caller_agent"],
            event["caller_job_id"], event["run_id"]) == (
        job["job_id"], REVIEWER, "final", WRITER, parent["job_id"], session["current_run_id"])


def test_a_disposed_result_stays_disposed_when_read_again(session):
    job = make_job(session, result="r")
    _read(session, job)
    accept_result(job["job_id"], "fine", session["session_id"], ROOT)
    again = _read(session, job)
    assert again["result_state"] == "accepted"
    assert read_job_record(job["job_id"])["result_state"] == "accepted"
    assert [e["event"] for e in audit_events(session)].count("agent_result_read") == 1


def test_an_unknown_caller_job_is_refused_before_reading(session):
    job = make_job(session, result="r")
    with pytest.raises((PermissionError, FileNotFoundError)):
        read_result(job["job_id"], session["session_id"], caller_job_id="nobody-0000",
                    caller_agent=REVIEWER)
    assert read_job_record(job["job_id"])["result_state"] == "unread"


def test_a_disposition_records_who_disposed_and_why(session):
    parent = make_job(session, WRITER, status="running")
    by_job = make_job(session, REVIEWER, result="r", caller_job_id=parent["job_id"])
    _read(session, by_job)
    out = accept_result(by_job["job_id"], "ok", session["session_id"], WRITER,
                        caller_job_id=parent["job_id"])
    assert (out["result_state"], out["disposition_reason"], out["disposed_by"]) == (
        "accepted", "ok", parent["job_id"])
    assert "runtime_current" in out
    by_root = make_job(session, result="r")
    _read(session, by_root)
    out = reject_result(by_root["job_id"], "no", session["session_id"], ROOT)
    assert (out["result_state"], out["disposed_by"]) == ("rejected", ROOT)
    assert "runtime_current" in out
    anonymous = make_job(session, result="r")
    _read(session, anonymous)
    out = accept_result(anonymous["job_id"], "cli", session["session_id"], None)
    assert out["disposed_by"] == ROOT  # the session's root when no caller is named
    events = [e for e in audit_events(session) if e["event"].startswith("agent_result_")
              and e["event"] != "agent_result_read"]
    assert [(e["event"], e["job_id"], e["reason"]) for e in events] == [
        ("agent_result_accepted", by_job["job_id"], "ok"),
        ("agent_result_rejected", by_root["job_id"], "no"),
        ("agent_result_accepted", anonymous["job_id"], "cli")]
    assert (events[0]["caller_agent"], events[0]["caller_job_id"]) == (WRITER, parent["job_id"])
    assert (events[1]["caller_agent"], events[1]["caller_job_id"]) == (ROOT, None)


def test_disposition_refusals_name_the_job_and_its_state(session):
    running = make_job(session, status="running", partial="p")
    with pytest.raises(RuntimeError) as info:
        reject_result(running["job_id"], "no", session["session_id"], ROOT)
    assert str(info.value) == (f"cannot reject the result of job {running['job_id']} while it is "
                               "running; wait for it to finish (or stop it)")
    unread = make_job(session, result="r")
    with pytest.raises(RuntimeError) as info:
        accept_result(unread["job_id"], "ok", session["session_id"], ROOT)
    assert str(info.value).startswith(
        f"result must be read before it can be accepted (job {unread['job_id']} result_state is "
        "unread); ")
    with pytest.raises(RuntimeError) as info:
        reject_result(unread["job_id"], "ok", session["session_id"], ROOT)
    assert str(info.value).startswith("result must be read before it can be rejected (job ")
    _read(session, unread)
    accept_result(unread["job_id"], "ok", session["session_id"], ROOT)
    with pytest.raises(RuntimeError) as info:
        accept_result(unread["job_id"], "again", session["session_id"], ROOT)
    assert "result_state is accepted" in str(info.value)
    assert read_job_record(unread["job_id"])["disposition_reason"] == "ok"


# -- result_files -----------------------------------------------------------------


def test_result_files_are_found_by_default_name_or_by_the_recorded_path(session):
    job = make_job(session, result="r")
    directory = job_dir(job["job_id"])
    assert contained_result_file(job, "result_path") == directory / "result.md"
    bare = {"job_id": job["job_id"]}
    assert contained_result_file(bare, "result_path") == directory / "result.md"
    assert contained_result_file(bare, "result_path", default=False) is None
    assert contained_result_file(bare, "partial_result_path") is None  # no such file
    (directory / "sub").mkdir()
    (directory / "sub" / "out.md").write_text("nested")
    nested = {"job_id": job["job_id"], "result_path": "sub/out.md"}
    assert read_result_file(nested, "result_path") == "nested"
    absolute = {"job_id": job["job_id"], "result_path": str(directory / "sub" / "out.md")}
    assert contained_result_file(absolute, "result_path") == directory / "sub" / "out.md"


@pytest.mark.parametrize(("field", "phrase"), [
    ("result_path", "unsafe result path"),
    ("partial_result_path", "unsafe partial-result path"),
    ("structured_result_path", "unsafe structured-result path"),
])
def test_result_file_refusals_name_the_field(session, tmp_path, field, phrase):
    job = make_job(session, result="r")
    job_id = job["job_id"]
    for value in ("", 5, ["result.md"]):
        with pytest.raises(RuntimeError) as info:
            contained_result_file({"job_id": job_id, field: value}, field)
        assert str(info.value) == f"{phrase}: {field} of job {job_id} must be a path string"
    outside = tmp_path / "x.md"
    outside.write_text("x")
    for value in (str(outside), "../x.md", f"{job_dir(job_id)}0/x.md"):
        with pytest.raises(RuntimeError) as info:
            read_result_file({"job_id": job_id, field: value}, field)
        assert str(info.value) == (f"{phrase}: {field} of job {job_id} points outside the job's "
                                   "directory")
    link = job_dir(job_id) / "link.md"
    link.symlink_to(outside)
    with pytest.raises(RuntimeError) as info:
        read_result_file({"job_id": job_id, field: "link.md"}, field)
    assert str(info.value) == f"{phrase}: link.md of job {job_id} is a symlink"
    fifo = job_dir(job_id) / "fifo.md"
    os.mkfifo(fifo)
    with pytest.raises(RuntimeError) as info:
        read_result_file({"job_id": job_id, field: "fifo.md"}, field)
    assert str(info.value) == f"{phrase}: fifo.md of job {job_id} is not a regular file"


def test_result_text_is_decoded_with_replacement(session):
    job = make_job(session, result="r")
    (job_dir(job["job_id"]) / "result.md").write_bytes(b"caf\xe9 \xff")
    assert read_result_file(job, "result_path") == "caf\ufffd \ufffd"


def test_the_result_source_is_the_final_result_else_the_partial_one(session):
    final = make_job(session, result="done")
    assert result_source(final) == ("done", "final")
    kinded = make_job(session, result="done", result_kind="partial")
    assert result_source(kinded) == ("done", "partial")
    unkinded = make_job(session, result="done")
    assert result_source({k: v for k, v in unkinded.items() if k != "result_kind"}) == (
        "done", "final")
    partial = make_job(session, partial="half", status="suspended")
    assert result_source(partial) == ("half", "partial")
    nothing = make_job(session)
    assert result_source(nothing) == (None, None)
    (job_dir(nothing["job_id"]) / "result.md").write_text("not recorded")
    assert result_source(nothing) == (None, None)  # an unrecorded file is not the result


def test_an_unrecorded_partial_file_is_not_the_result(session):
    job = make_job(session, status="suspended")
    (job_dir(job["job_id"]) / "partial-result.md").write_text("not recorded")
    assert result_source(job) == (None, None)


def test_a_socket_is_never_served_as_a_result(session):
    import socket

    job = make_job(session, result="r")
    path = job_dir(job["job_id"]) / "result.md"
    path.unlink()
    server = socket.socket(socket.AF_UNIX)
    try:
        here = os.getcwd()
        os.chdir(path.parent)  # a socket path is limited to 108 bytes
        try:
            server.bind(path.name)
        finally:
            os.chdir(here)
        # refused (today with the raw OSError ENXIO of the open, not "unsafe result path")
        with pytest.raises((RuntimeError, OSError)):
            read_result_file(job, "result_path")
    finally:
        server.close()

"""Trace paging at its edges: every argument bound, cursor end and page field (spec 04).

``test_traces.py`` covers filtering and lossless paging; these pin the exact
bounds (``max_chars`` up to ``TRACE_BOUND_BYTES // 4``, a cursor equal to the
length), the refusal messages and each field of a page, so a changed
comparison or constant in ``jobs.traces`` fails a test (``make mutate``).
"""

from __future__ import annotations

import hashlib
import json

import pytest
from kernel.jobs.results.conftest import ROOT, WRITER, make_job

from mmo_kernel.jobs.records import job_dir
from mmo_kernel.jobs.traces import (
    TRACE_BOUND_BYTES,
    encode,
    read_agent_trace_record,
    read_trace,
    resolve_agent_run_ref,
)
from mmo_kernel.state.audit import append_jsonl


def _job_with_rows(session, rows, *, status="completed", tail=b""):
    job = make_job(session, WRITER, status=status)
    path = job_dir(job["job_id"]) / "events.jsonl"
    for row in rows:
        append_jsonl(path, row)
    if tail:
        with path.open("ab") as handle:
            handle.write(tail)
    return job["job_id"]


def _record(session, job_id, **kwargs):
    return read_agent_trace_record(job_id, session["session_id"], ROOT, **kwargs)


def test_a_record_page_has_exactly_its_fields(session):
    job_id = _job_with_rows(session, [{"message": {"method": "m", "params": {"x": "y" * 50}}}])
    full = encode({"record_cursor": 0, "agent_run_ref": job_id,
                   "message": {"method": "m", "params": {"x": "y" * 50}}})
    page = _record(session, job_id, record_cursor=0, cursor=0, max_chars=10)
    assert page == {
        "agent_run_ref": job_id, "record_cursor": 0, "content": full[:10], "cursor": 0,
        "next_cursor": 10, "total_chars": len(full),
        "filtered_sha256": hashlib.sha256(full.encode()).hexdigest(), "malformed": False,
        "private_reasoning_included": False,
    }
    last = _record(session, job_id, record_cursor=0, cursor=len(full) - 1, max_chars=1)
    assert (last["content"], last["next_cursor"]) == (full[-1], None)
    whole = _record(session, job_id, record_cursor=0, max_chars=len(full))
    assert (whole["content"], whole["next_cursor"]) == (full, None)


@pytest.mark.parametrize(("name", "value", "low"), [
    ("record_cursor", -1, 0), ("record_cursor", True, 0), ("record_cursor", "0", 0),
    ("cursor", -1, 0), ("cursor", False, 0), ("cursor", 1.0, 0),
    ("max_chars", 0, 1), ("max_chars", True, 1), ("max_chars", None, 1),
])
def test_each_bad_record_page_argument_is_named(session, name, value, low):
    job_id = _job_with_rows(session, [{"message": {"method": "m"}}])
    with pytest.raises(ValueError) as info:
        _record(session, job_id, **{name: value})
    assert str(info.value) == f"{name} must be an integer >= {low}, got {value!r}"


def test_max_chars_is_bounded_by_a_quarter_of_the_trace_bound(session):
    job_id = _job_with_rows(session, [{"message": {"method": "m"}}])
    bound = TRACE_BOUND_BYTES // 4
    assert _record(session, job_id, max_chars=bound)["next_cursor"] is None
    assert _record(session, job_id, max_chars=1)["next_cursor"] == 1
    with pytest.raises(ValueError) as info:
        _record(session, job_id, max_chars=bound + 1)
    assert str(info.value) == f"max_chars must be at most {bound}"


def test_record_cursor_must_name_a_non_blank_line(session):
    job_id = _job_with_rows(session, [{"message": {"method": "m"}}], tail=b"\n")
    for record_cursor, lines in ((1, 2), (2, 2), (5, 2)):
        with pytest.raises(ValueError) as info:
            _record(session, job_id, record_cursor=record_cursor)
        assert str(info.value) == (f"record_cursor {record_cursor} names no trace record of "
                                   f"{job_id} ({lines} lines)")


def test_a_cursor_at_or_past_the_record_end_is_refused(session):
    job_id = _job_with_rows(session, [{"message": {"method": "m"}}])
    length = _record(session, job_id)["total_chars"]
    for cursor in (length, length + 1):
        with pytest.raises(ValueError) as info:
            _record(session, job_id, cursor=cursor)
        assert str(info.value) == (f"cursor {cursor} exceeds the record length "
                                   f"({length} chars)")


def test_an_unterminated_last_line_is_a_record_only_once_the_job_is_final(session):
    tail = b'{"message": {"method": "last"}}'
    done = _job_with_rows(session, [{"message": {"method": "m"}}], tail=tail)
    assert '"last"' in _record(session, done, record_cursor=1)["content"]
    live = _job_with_rows(session, [{"message": {"method": "m"}}], status="running", tail=tail)
    with pytest.raises(ValueError, match="names no trace record"):
        _record(session, live, record_cursor=1)
    assert [r["record_cursor"] for r in read_trace(done, session["session_id"], ROOT)[
        "records"]] == [0, 1]


def test_a_malformed_record_is_returned_whole_whatever_max_chars(session):
    job_id = _job_with_rows(session, [], tail=b"not json at all\n")
    page = _record(session, job_id, max_chars=3)
    assert page["malformed"] is True and page["next_cursor"] is None
    assert page["content"] == encode({"malformed_event": "not json at all"})


@pytest.mark.parametrize("ref", ["", "   ", None, 7])
def test_an_empty_or_non_string_run_ref_is_refused(ref):
    with pytest.raises(ValueError) as info:
        resolve_agent_run_ref(ref)
    assert str(info.value) == "agent_run_ref must be a non-empty string (a job id)"


def test_a_run_ref_is_the_job_id_without_surrounding_blanks(session):
    job_id = _job_with_rows(session, [{"message": {"method": "m"}}])
    assert resolve_agent_run_ref(f"  {job_id}\n") == job_id
    with pytest.raises(FileNotFoundError):
        resolve_agent_run_ref("20260101-000000-nobody-000000")


# -- pages of a trace ---------------------------------------------------------------

LIMIT_BYTES = TRACE_BOUND_BYTES - 8 * 1024  # a record above this is shortened in a page
PAGE_BYTES = TRACE_BOUND_BYTES - 1024  # a page's records stop before this


def _compact(value):
    """The compact sorted JSON the trace sizes are defined on (spec 04), computed here."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True)


def _size(value):
    return len(_compact(value).encode("utf-8", "surrogatepass"))


def _trace(session, job_id, **kwargs):
    return read_trace(job_id, session["session_id"], ROOT, **kwargs)


def _row(text, **extra):
    return {"message": {"method": "m", "params": {"t": text}}, **extra}


def _filtered(job_id, index, row):
    return {"record_cursor": index, "agent_run_ref": job_id, **row}


def test_a_trace_page_has_exactly_its_fields(session):
    job_id = _job_with_rows(session, [_row("é"), _row("b")])
    page = _trace(session, job_id, cursor=1, limit=1)
    assert page == {
        "job_id": job_id, "agent_run_ref": job_id, "status": "completed",
        "records": [_filtered(job_id, 1, _row("b"))], "cursor": 1, "next_cursor": 2,
        "has_more": False, "private_reasoning_included": False,
        "trace_bound_bytes": TRACE_BOUND_BYTES,
    }
    empty = _trace(session, job_id, cursor=2)
    assert (empty["records"], empty["next_cursor"], empty["has_more"]) == ([], 2, False)
    assert _record(session, job_id)["content"] == _compact(_filtered(job_id, 0, _row("é")))


@pytest.mark.parametrize("cursor", [-1, True, "0", None])
def test_a_bad_trace_cursor_is_named(session, cursor):
    job_id = _job_with_rows(session, [_row("a")])
    with pytest.raises(ValueError) as info:
        _trace(session, job_id, cursor=cursor)
    assert str(info.value) == f"cursor must be a non-negative integer line number, got {cursor!r}"


@pytest.mark.parametrize("limit", [0, 501, True, "5", None])
def test_a_bad_trace_limit_is_named(session, limit):
    job_id = _job_with_rows(session, [_row("a")])
    with pytest.raises(ValueError) as info:
        _trace(session, job_id, limit=limit)
    assert str(info.value) == f"limit must be an integer from 1 to 500, got {limit!r}"


def test_limit_one_and_five_hundred_are_accepted(session):
    job_id = _job_with_rows(session, [_row(str(i)) for i in range(502)])
    assert [r["record_cursor"] for r in _trace(session, job_id, limit=1)["records"]] == [0]
    page = _trace(session, job_id, limit=500)
    assert len(page["records"]) == 500 and page["next_cursor"] == 500 and page["has_more"]
    last = _trace(session, job_id, cursor=500, limit=500)
    assert [r["record_cursor"] for r in last["records"]] == [500, 501]
    with pytest.raises(ValueError) as info:
        _trace(session, job_id, cursor=503)
    assert str(info.value) == "cursor 503 exceeds the trace length (502 lines)"


def test_blank_lines_are_skipped_but_keep_their_numbers(session):
    job_id = _job_with_rows(session, [_row("a")], tail=b"\n  \n")
    path = job_dir(job_id) / "events.jsonl"
    with path.open("ab") as handle:
        handle.write(b'{"message": {"method": "later"}}\n\n')
    page = _trace(session, job_id)
    assert [r["record_cursor"] for r in page["records"]] == [0, 3]
    assert (page["next_cursor"], page["has_more"]) == (4, False)  # trailing blanks are skipped
    assert _trace(session, job_id, cursor=1, limit=1)["records"][0]["record_cursor"] == 3


@pytest.mark.parametrize("spare", [0, 1])
def test_a_page_takes_records_up_to_exactly_its_byte_bound(session, spare):
    """``spare`` 0: the second record fills the page to the byte; 1: it is one byte over."""
    job_id = make_job(session, WRITER, status="completed")["job_id"]
    first = _row("a" * 300000)
    used = _size({"job_id": job_id, "records": [], "next_cursor": 0})
    used += _size(_filtered(job_id, 0, first)) + 1
    probe = _size(_filtered(job_id, 1, _row("")))
    fill = _row("x" * (PAGE_BYTES + spare - used - 1 - probe))
    assert used + _size(_filtered(job_id, 1, fill)) + 1 == PAGE_BYTES + spare
    path = job_dir(job_id) / "events.jsonl"
    for row in (first, fill, _row("z")):
        append_jsonl(path, row)
    page = _trace(session, job_id, limit=10)
    assert [r["record_cursor"] for r in page["records"]] == ([0, 1] if spare == 0 else [0])
    assert page["records"][-1] == _filtered(job_id, len(page["records"]) - 1,
                                            fill if spare == 0 else first)
    assert (page["next_cursor"], page["has_more"]) == (len(page["records"]), True)


def test_a_record_is_shortened_only_above_the_record_limit(session):
    job = make_job(session, WRITER, status="completed")
    job_id = job["job_id"]
    probe = _size(_filtered(job_id, 0, _row("")))
    exact = _row("x" * (LIMIT_BYTES - probe))
    over = _row("x" * (LIMIT_BYTES - probe + 1))
    path = job_dir(job_id) / "events.jsonl"
    append_jsonl(path, exact)
    append_jsonl(path, over)
    assert _size(_filtered(job_id, 0, exact)) == LIMIT_BYTES
    kept = _trace(session, job_id, limit=1)["records"][0]
    assert kept == _filtered(job_id, 0, exact)
    short = _trace(session, job_id, cursor=1, limit=1)["records"][0]
    assert short["trace_record_truncated"] is True


def test_a_shortened_record_has_exactly_its_summary_fields(session):
    row = {"recorded_at": "2026-01-01T00:00:00+00:00", "direction": "received",
           "message": {"method": "item/completed", "id": 12, "params": {"t": "ü" * 300000}}}
    job_id = _job_with_rows(session, [row])
    text = _compact(_filtered(job_id, 0, row))
    short = _trace(session, job_id)["records"][0]
    assert short == {
        "record_cursor": 0, "agent_run_ref": job_id, "trace_record_truncated": True,
        "total_chars": len(text), "filtered_sha256": hashlib.sha256(text.encode()).hexdigest(),
        "preview": text[:4000],
        "read_full_record_with": "read_agent_trace_record(agent_run_ref, record_cursor)",
        "recorded_at": "2026-01-01T00:00:00+00:00", "direction": "received",
        "method": "item/completed", "id": 12,
    }


def test_a_shortened_record_leaves_out_summary_fields_of_the_wrong_type(session):
    rows = [{"recorded_at": 5, "direction": None, "message": {"method": 3.5, "id": True,
                                                           "params": {"t": "y" * 600000}}},
            {"message": ["not", "an", "object", "z" * 600000]},
            {"message": {"method": "ok", "id": "req-1", "params": {"t": "\udcff" + "w" * 600000}}}]
    job_id = _job_with_rows(session, [])
    path = job_dir(job_id) / "events.jsonl"
    with path.open("ab") as handle:
        for row in rows:
            handle.write(json.dumps(row).encode() + b"\n")
    records = _trace(session, job_id)["records"]
    summary = {"record_cursor", "agent_run_ref", "trace_record_truncated", "total_chars",
               "filtered_sha256", "preview", "read_full_record_with"}
    assert set(records[0]) == summary and set(records[1]) == summary
    assert set(records[2]) == summary | {"method", "id"} and records[2]["id"] == "req-1"
    text = _compact(_filtered(job_id, 2, rows[2]))
    assert records[2]["filtered_sha256"] == hashlib.sha256(
        text.encode("utf-8", "surrogatepass")).hexdigest()
    page = _record(session, job_id, record_cursor=2, max_chars=5)
    assert page["filtered_sha256"] == records[2]["filtered_sha256"]


def test_reasoning_is_filtered_key_by_key(session):
    rows = [
        {"message": {"method": "item/completed", "params": {"item": {
            "encrypted_content": "E1", "id": "i", "type": "message", "zeta": 1}}}},
        {"message": {"method": "x", "params": {"encryptedContent": "E2", "after": [1, {"b": 2}]}}},
        {"message": {"method": "item/reasoning/textDelta",
                     "params": {"delta": "raw", "itemId": "r1"}}},
        {"message": {"method": "item/agentMessage/delta", "params": {"delta": "visible"}}},
        {"message": {"method": "item/completed", "params": {"item": {
            "type": "reasoning", "id": "r2", "summary": ["s"], "content": ["raw"],
            "encrypted_content": "E3"}}}},
        {"message": {"method": "list", "params": [{"type": "message", "content": "kept"}, 2]}},
    ]
    job_id = _job_with_rows(session, rows)
    records = _trace(session, job_id)["records"]
    assert [r.get("private_reasoning_removed", False) for r in records] == [
        True, True, True, False, True, False]
    assert records[0]["message"]["params"]["item"] == {"id": "i", "type": "message", "zeta": 1}
    assert records[1]["message"]["params"] == {"after": [1, {"b": 2}]}
    assert records[2]["message"]["params"] == {"itemId": "r1"}
    assert records[3]["message"]["params"] == {"delta": "visible"}
    assert records[4]["message"]["params"]["item"] == {"type": "reasoning", "id": "r2",
                                                       "summary": ["s"]}
    assert records[5]["message"]["params"] == [{"type": "message", "content": "kept"}, 2]


def test_undecodable_bytes_are_replaced_not_refused(session):
    job_id = _job_with_rows(session, [], tail=b'{"message": {"method": "caf\xe9"}}\n\xff\xfe\n')
    records = _trace(session, job_id)["records"]
    assert records[0]["message"] == {"method": "caf\ufffd"}
    assert records[1]["malformed_event"] == "\ufffd\ufffd"


def test_a_malformed_line_preview_is_bounded(session):
    job_id = _job_with_rows(session, [], tail=b"[" + b"1," * 3000 + b"\n" + b'"just text"\n')
    records = _trace(session, job_id)["records"]
    assert records[0]["malformed_event"] == ("[" + "1," * 3000)[:2000]
    assert records[1] == {"record_cursor": 1, "agent_run_ref": job_id,
                          "malformed_event": '"just text"'}


def test_agent_trace_record_defaults_to_the_first_record_and_20000_chars(session):
    job_id = _job_with_rows(session, [_row("q" * 25000), _row("second")])
    page = _record(session, job_id)
    assert page["record_cursor"] == 0 and len(page["content"]) == 20000
    assert page["next_cursor"] == 20000


def test_trace_readers_check_the_callers_own_job(session):
    from kernel.jobs.results.conftest import REVIEWER

    writer = make_job(session, WRITER, status="running")
    reviewer = make_job(session, REVIEWER, status="running")
    append_jsonl(job_dir(writer["job_id"]) / "events.jsonl", _row("a"))
    sid = session["session_id"]
    page = read_agent_trace_record(writer["job_id"], sid, REVIEWER,
                                   caller_job_id=reviewer["job_id"])
    assert page["record_cursor"] == 0
    with pytest.raises(PermissionError):
        read_agent_trace_record(reviewer["job_id"], sid, WRITER, caller_job_id=writer["job_id"])


def test_a_special_or_symlinked_event_log_is_refused(session, tmp_path):
    import os

    job_id = _job_with_rows(session, [_row("a")])
    path = job_dir(job_id) / "events.jsonl"
    real = tmp_path / "elsewhere.jsonl"
    path.rename(real)
    path.symlink_to(real)
    for read in (lambda: _trace(session, job_id), lambda: _record(session, job_id)):
        with pytest.raises(RuntimeError) as info:
            read()
        assert str(info.value) == f"unsafe trace path: events.jsonl of job {job_id} is a symlink"
    path.unlink()
    os.mkfifo(path)
    with pytest.raises(RuntimeError) as info:
        _trace(session, job_id)
    assert str(info.value) == (f"unsafe trace path: events.jsonl of job {job_id} is not a "
                               "regular file")


def test_a_job_without_an_event_log_has_an_empty_trace(session):
    job = make_job(session, WRITER, status="completed")
    page = _trace(session, job["job_id"])
    assert (page["records"], page["next_cursor"], page["has_more"]) == ([], 0, False)
    with pytest.raises(ValueError, match="names no trace record"):
        _record(session, job["job_id"])


def test_one_blank_line_between_records_is_skipped_alone(session):
    job_id = _job_with_rows(session, [_row("a")], tail=b"\n")
    append_jsonl(job_dir(job_id) / "events.jsonl", _row("c"))
    assert [r["record_cursor"] for r in _trace(session, job_id)["records"]] == [0, 2]


def test_a_trace_page_holds_fifty_records_by_default(session):
    job_id = _job_with_rows(session, [_row(str(i)) for i in range(51)])
    page = _trace(session, job_id)
    assert len(page["records"]) == 50 and page["next_cursor"] == 50 and page["has_more"]

"""read_trace / read_agent_trace_record: filtering, bounds, lossless paging, authority (spec 04)."""

from __future__ import annotations

import hashlib
import json

import pytest
from kernel.jobs.results.conftest import REVIEWER, ROOT, WRITER, make_job

from mmo_kernel.jobs.records import job_dir
from mmo_kernel.jobs.traces import (
    TRACE_BOUND_BYTES,
    encode,
    read_agent_trace_record,
    read_trace,
)
from mmo_kernel.state.audit import append_jsonl

SECRET = "private chain of thought"


def _row(message):
    return {"recorded_at": "2026-01-01T00:00:00+00:00", "direction": "received",
            "message": message}


def _write_events(job_id, rows, raw_lines=()):
    path = job_dir(job_id) / "events.jsonl"
    for row in rows:
        append_jsonl(path, row)
    with path.open("ab") as handle:
        for line in raw_lines:
            handle.write(line + b"\n")


def _reasoning_rows():
    item = {"type": "reasoning", "id": "r1", "summary": ["thinking about tests"],
            "content": [SECRET]}
    return [
        _row({"method": "item/completed", "params": {"item": item, "turnId": "t1"}}),
        _row({"method": "item/reasoning/textDelta",
              "params": {"itemId": "r1", "delta": SECRET, "turnId": "t1"}}),
        _row({"method": "turn/completed", "params": {"turn": {"id": "t1", "items": [
            item, {"type": "agentMessage", "id": "m1", "text": "done"}]}}}),
    ]


def test_private_reasoning_is_removed_and_summaries_kept(session):
    job = make_job(session, WRITER)
    _write_events(job["job_id"], _reasoning_rows())
    page = read_trace(job["job_id"], session["session_id"], ROOT)
    assert page["private_reasoning_included"] is False
    text = json.dumps(page)
    assert SECRET not in text and "thinking about tests" in text and '"done"' in text
    assert [r["record_cursor"] for r in page["records"]] == [0, 1, 2]
    assert all(r["private_reasoning_removed"] for r in page["records"][:2])
    assert page["next_cursor"] == 3 and page["has_more"] is False


def test_cursor_and_limit_page_through_lines(session):
    job = make_job(session, WRITER)
    _write_events(job["job_id"], [_row({"method": "n", "params": {"i": i}}) for i in range(7)])
    first = read_trace(job["job_id"], session["session_id"], ROOT, cursor=0, limit=3)
    second = read_trace(job["job_id"], session["session_id"], ROOT, cursor=first["next_cursor"],
                        limit=10)
    assert [r["message"]["params"]["i"] for r in first["records"] + second["records"]] == \
        list(range(7))
    assert first["next_cursor"] == 3 and second["next_cursor"] == 7
    assert first["has_more"] is True and second["has_more"] is False
    with pytest.raises(ValueError, match="exceeds the trace length"):
        read_trace(job["job_id"], session["session_id"], ROOT, cursor=8)


def test_next_cursor_follows_the_last_record_so_a_live_log_can_be_tailed(session):
    job = make_job(session, WRITER, status="running")
    _write_events(job["job_id"], [_row({"method": "n", "params": {"i": i}}) for i in range(2)])
    page = read_trace(job["job_id"], session["session_id"], ROOT)
    assert page["next_cursor"] == 2, page["next_cursor"]
    assert page["has_more"] is False
    idle = read_trace(job["job_id"], session["session_id"], ROOT, cursor=page["next_cursor"])
    assert idle["records"] == [] and idle["next_cursor"] == 2
    _write_events(job["job_id"], [_row({"method": "n", "params": {"i": 2}})])
    tail = read_trace(job["job_id"], session["session_id"], ROOT, cursor=idle["next_cursor"])
    assert [r["record_cursor"] for r in tail["records"]] == [2] and tail["next_cursor"] == 3


def test_oversized_record_is_shortened_and_the_page_stays_bounded(session):
    job = make_job(session, WRITER)
    big = "é" * (600 * 1024)
    rows = [_row({"method": "item/completed", "params": {"text": big}}),
            _row({"method": "small", "params": {}}),
            _row({"method": "item/completed", "params": {"text": "x" * (300 * 1024)}}),
            _row({"method": "item/completed", "params": {"text": "y" * (300 * 1024)}})]
    _write_events(job["job_id"], rows)
    page = read_trace(job["job_id"], session["session_id"], ROOT, limit=50)
    assert len(encode(page).encode()) < TRACE_BOUND_BYTES
    shortened = page["records"][0]
    assert shortened["trace_record_truncated"] is True and shortened["method"] == "item/completed"
    assert page["records"][1]["message"]["method"] == "small"
    rest = read_trace(job["job_id"], session["session_id"], ROOT, cursor=page["next_cursor"])
    assert len(encode(rest).encode()) < TRACE_BOUND_BYTES
    seen = [r["record_cursor"] for r in page["records"] + rest["records"]]
    assert seen == [0, 1, 2, 3]


def test_a_full_record_pages_losslessly_with_one_digest(session):
    job = make_job(session, WRITER)
    big = "ü€" * (300 * 1024)
    _write_events(job["job_id"], [_row({"method": "item/completed", "params": {"text": big}})])
    short = read_trace(job["job_id"], session["session_id"], ROOT)["records"][0]
    pieces, digests, cursor = [], set(), 0
    while cursor is not None:
        page = read_agent_trace_record(job["job_id"], session["session_id"], ROOT,
                                       record_cursor=0, cursor=cursor, max_chars=100000)
        pieces.append(page["content"])
        digests.add(page["filtered_sha256"])
        cursor = page["next_cursor"]
    full = "".join(pieces)
    assert len(digests) == 1 and digests == {short["filtered_sha256"]}
    assert hashlib.sha256(full.encode()).hexdigest() == short["filtered_sha256"]
    assert json.loads(full)["message"]["params"]["text"] == big
    assert len(full) == page["total_chars"] == short["total_chars"]


def test_malformed_lines_come_back_as_malformed_events(session):
    job = make_job(session, WRITER)
    bad = b"{not json " + b"z" * 5000
    _write_events(job["job_id"], [_row({"method": "ok", "params": {}})], raw_lines=[bad])
    page = read_trace(job["job_id"], session["session_id"], ROOT)
    assert page["records"][1]["malformed_event"] == bad.decode()[:2000]
    one = read_agent_trace_record(job["job_id"], session["session_id"], ROOT, record_cursor=1,
                                  max_chars=10)
    assert json.loads(one["content"]) == {"malformed_event": bad.decode()[:2000]}
    assert one["next_cursor"] is None


def test_a_live_jobs_torn_last_line_waits_for_its_newline(session):
    job = make_job(session, WRITER, status="running")
    _write_events(job["job_id"], [_row({"method": "ok", "params": {}})])
    with (job_dir(job["job_id"]) / "events.jsonl").open("ab") as handle:
        handle.write(b'{"recorded_at":"x","dire')
    page = read_trace(job["job_id"], session["session_id"], ROOT)
    assert len(page["records"]) == 1 and page["next_cursor"] == 1


def test_trace_needs_lineage_or_a_trace_grant(session):
    writer = make_job(session, WRITER, status="running")
    reviewer = make_job(session, REVIEWER, status="running")
    other = make_job(session, REVIEWER, status="running", caller_job_id=None)
    _write_events(writer["job_id"], [_row({"method": "ok", "params": {}})])
    granted = read_trace(writer["job_id"], session["session_id"], REVIEWER,
                         caller_job_id=reviewer["job_id"])
    assert granted["records"]
    with pytest.raises(PermissionError, match="not a descendant"):
        read_trace(reviewer["job_id"], session["session_id"], REVIEWER,
                   caller_job_id=other["job_id"])

"""Result and trace reading never follow a symlinked leaf out of (or around) the job dir (04).

``read_result`` opens the candidate file itself with ``O_NOFOLLOW``: a
``result.md`` that is a symlink — even to the job's own ``metadata.json`` —
is refused (``unsafe result path``), never served. Trace reading does the
same for ``events.jsonl`` (``unsafe trace path``).
"""

from __future__ import annotations

import json
import os

import pytest
from kernel.jobs.results.conftest import ROOT, WRITER, make_job

from mmo_kernel.jobs.records import job_dir, read_job_record, write_job_record
from mmo_kernel.jobs.results import read_result
from mmo_kernel.jobs.traces import read_agent_trace_record, read_trace
from mmo_kernel.jobs.waiting import wait_for_jobs

OUTSIDE = "SECRET-OUTSIDE-THE-JOB-DIR"


@pytest.mark.parametrize("recorded", [None, "result.md", "absolute"])
def test_a_result_md_symlinked_to_the_jobs_own_record_is_refused(session, recorded):
    job = make_job(session)
    directory = job_dir(job["job_id"])
    os.symlink("metadata.json", directory / "result.md")
    fields = {**read_job_record(job["job_id"]), "result_state": "unread", "result_kind": "final"}
    if recorded is not None:
        fields["result_path"] = "result.md" if recorded == "result.md" \
            else str(directory / "result.md")
    write_job_record(fields)
    with pytest.raises(RuntimeError, match="unsafe result path: result.md .* is a symlink"):
        read_result(job["job_id"], session["session_id"])
    assert read_job_record(job["job_id"])["result_state"] == "unread"


@pytest.mark.parametrize(("name", "field", "phrase", "extra"), [
    ("partial-result.md", "partial_result_path", "unsafe partial-result path",
     {"result_kind": "partial"}),
    ("result.json", "structured_result_path", "unsafe structured-result path",
     {"contract_valid": True}),
])
def test_other_symlinked_result_leaves_are_refused(session, name, field, phrase, extra):
    job = make_job(session, result="final text", **extra)
    directory = job_dir(job["job_id"])
    if field == "partial_result_path":
        (directory / "result.md").unlink()
    os.symlink("metadata.json", directory / name)
    write_job_record({**read_job_record(job["job_id"]), field: name})
    with pytest.raises(RuntimeError, match=phrase):
        read_result(job["job_id"], session["session_id"])


@pytest.mark.parametrize("special", ["fifo", "directory"])
def test_a_result_md_that_is_not_a_regular_file_is_refused(session, special):
    job = make_job(session)
    path = job_dir(job["job_id"]) / "result.md"
    os.mkfifo(path) if special == "fifo" else path.mkdir()
    write_job_record({**read_job_record(job["job_id"]), "result_path": "result.md",
                      "result_state": "unread"})
    with pytest.raises(RuntimeError, match="unsafe result path: result.md .* is not a regular"):
        read_result(job["job_id"], session["session_id"])


def test_a_wait_preview_never_serves_a_symlinked_result(session):
    job = make_job(session)
    os.symlink("metadata.json", job_dir(job["job_id"]) / "result.md")
    write_job_record({**read_job_record(job["job_id"]), "result_path": "result.md"})
    waited = wait_for_jobs([job["job_id"]], session["session_id"], 5)
    entry = waited["results"][job["job_id"]]
    assert entry["preview"] == "" and "unsafe result path" in entry["error"]


def _events(job_id, rows):
    path = job_dir(job_id) / "events.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.parametrize("target", ["outside", "other-job"])
def test_a_symlinked_event_log_is_refused_by_both_trace_readers(session, tmp_path, target):
    job = make_job(session, WRITER)
    if target == "outside":
        source = tmp_path / "elsewhere.jsonl"
        source.write_text(json.dumps({"direction": "received",
                                      "message": {"method": OUTSIDE}}) + "\n")
    else:  # another job's log, inside the state dir but not this job's own
        other = make_job(session, WRITER)
        source = _events(other["job_id"], [{"direction": "received",
                                            "message": {"method": OUTSIDE}}])
    os.symlink(source, job_dir(job["job_id"]) / "events.jsonl")
    with pytest.raises(RuntimeError, match="unsafe trace path: events.jsonl .* is a symlink"):
        read_trace(job["job_id"], session["session_id"], ROOT)
    with pytest.raises(RuntimeError, match="unsafe trace path") as refused:
        read_agent_trace_record(job["job_id"], session["session_id"], ROOT, record_cursor=0)
    assert OUTSIDE not in str(refused.value)


@pytest.mark.parametrize("special", ["fifo", "directory"])
def test_an_event_log_that_is_not_a_regular_file_is_refused(session, special):
    job = make_job(session, WRITER)
    path = job_dir(job["job_id"]) / "events.jsonl"
    os.mkfifo(path) if special == "fifo" else path.mkdir()  # a fifo would block a plain open
    with pytest.raises(RuntimeError, match="unsafe trace path: .* is not a regular file"):
        read_trace(job["job_id"], session["session_id"], ROOT)

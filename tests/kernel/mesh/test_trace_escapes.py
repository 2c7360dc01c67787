"""The mesh's trace tools refuse a job whose event log is a symlink out of its directory (04).

The root calls ``agent_trace`` and ``agent_trace_record`` through its real
``mmo mcp`` process; the job is a hand-written record (spec 04 allows it)
whose ``events.jsonl`` was replaced by a link to a file elsewhere.
"""

from __future__ import annotations

import json
import os

from kernel.mesh.realkit import refused

OUTSIDE = "SECRET-OUTSIDE-THE-JOB-DIR"


def test_agent_trace_tools_refuse_a_symlinked_event_log(team, tmp_path):
    from mmo_kernel.jobs.records import job_dir, new_job_id, write_job_record
    from mmo_kernel.sessions.records import utc_now

    job_id = new_job_id("plain")
    write_job_record({"job_id": job_id, "session_id": team.session_id, "agent": "plain",
                      "status": "completed", "created_at": utc_now(), "depth": 1,
                      "caller_agent": "lead"})
    elsewhere = tmp_path / "elsewhere.jsonl"
    elsewhere.write_text(json.dumps({"direction": "received",
                                     "message": {"method": OUTSIDE}}) + "\n")
    os.symlink(elsewhere, job_dir(job_id) / "events.jsonl")
    root = team.root()

    trace = refused(root, "agent_trace", {"job_id": job_id})
    record = refused(root, "agent_trace_record", {"agent_run_ref": job_id, "record_cursor": 0})

    for text in (trace, record):
        assert "unsafe trace path" in text and "is a symlink" in text
        assert OUTSIDE not in text

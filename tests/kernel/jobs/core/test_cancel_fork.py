"""cancel_job (authority, reason, descendants, evidence) and fork_job (revision, lineage)."""

from __future__ import annotations

import pytest

from mmo_kernel.jobs.cancel import cancel_job
from mmo_kernel.jobs.fork import fork_job
from mmo_kernel.jobs.listing import list_jobs
from mmo_kernel.jobs.records import job_dir, read_job_record, update_job
from mmo_kernel.sessions.records import session_file
from mmo_kernel.state.audit import read_jsonl
from mmo_kernel.state.processes import process_matches

ROOT = "escalation_lead"


def test_cancel_kills_the_job_and_its_descendants_and_keeps_evidence(make_session, live_job,
                                                                     sleeper):
    session = make_session()
    sid = session["session_id"]
    app_pid, app_token = sleeper()
    parent = live_job(sid, "flagship_escalation", app_server_pid=app_pid,
                      app_server_pgid=app_pid, app_server_start_token=app_token)
    child = live_job(sid, "routine_engineer", caller_job_id=parent["job_id"],
                     caller_agent="flagship_escalation", depth=2)
    grandchild = live_job(sid, "literal_scout", caller_job_id=child["job_id"], depth=3)
    bystander = live_job(sid, "literal_scout")
    (job_dir(parent["job_id"]) / "events.jsonl").write_text(
        '{"direction":"received","message":{"params":{"item":'
        '{"type":"agentMessage","text":"draft findings"}}}}\n')

    result = cancel_job(parent["job_id"], sid, reason="plan changed")
    assert [j["job_id"] for j in result["jobs"]] == [parent["job_id"], child["job_id"],
                                                     grandchild["job_id"]]
    assert all(j["status"] == "cancelled" and j["cancel_reason"] == "plan changed"
               and "runtime_current" in j for j in result["jobs"])
    for job in (parent, child, grandchild):
        assert not process_matches(job["runner_pid"], job["runner_start_token"])
        record = read_job_record(job["job_id"])
        assert "runner_pid" not in record and record["result_kind"] == "partial"
    assert not process_matches(app_pid, app_token)
    partial = (job_dir(parent["job_id"]) / "partial-result.md").read_text()
    assert "draft findings" in partial and "plan changed" in partial
    assert read_job_record(bystander["job_id"])["status"] == "running"
    cancelled = [e["job_id"] for e in read_jsonl(session_file(sid, "audit.jsonl"))
                 if e["event"] == "agent_cancelled"]
    assert cancelled == [parent["job_id"], child["job_id"], grandchild["job_id"]]

    again = cancel_job(parent["job_id"], sid, reason="twice")
    assert again["jobs"][0]["cancel_reason"] == "plan changed"  # terminal: unchanged


def test_only_the_root_and_ancestors_may_cancel(make_session, live_job):
    session = make_session()
    sid = session["session_id"]
    parent = live_job(sid, "flagship_escalation")
    child = live_job(sid, "routine_engineer", caller_job_id=parent["job_id"])
    sibling = live_job(sid, "flagship_escalation")
    with pytest.raises(PermissionError, match="not a descendant"):
        cancel_job(child["job_id"], sid, caller_agent="flagship_escalation",
                   caller_job_id=sibling["job_id"])
    with pytest.raises(PermissionError, match="not a descendant"):
        cancel_job(parent["job_id"], sid, caller_agent="routine_engineer",
                   caller_job_id=child["job_id"])
    with pytest.raises(PermissionError, match="own caller_job_id"):
        cancel_job(child["job_id"], sid, caller_agent="flagship_escalation")
    with pytest.raises(ValueError, match="at most 500"):
        cancel_job(child["job_id"], sid, reason="x" * 501)
    with pytest.raises(FileNotFoundError):
        cancel_job(child["job_id"], "20990101-000000-other-abcdef")
    assert {r["status"] for r in list_jobs(sid)} == {"running"}
    done = cancel_job(child["job_id"], sid, reason="y" * 500, caller_agent="flagship_escalation",
                      caller_job_id=parent["job_id"])
    assert done["jobs"][0]["status"] == "cancelled"


def test_a_controls_grant_never_grants_cancellation(make_session, live_job):
    session = make_session()
    sid = session["session_id"]
    target = live_job(sid, "routine_engineer")
    granted = live_job(sid, "flagship_escalation")  # controls routine_engineer: inspect, trace
    with pytest.raises(PermissionError, match="not a descendant"):
        cancel_job(target["job_id"], sid, caller_agent="flagship_escalation",
                   caller_job_id=granted["job_id"])


def test_fork_consumes_a_revision_and_records_its_lineage(make_session, live_job):
    session = make_session()
    sid = session["session_id"]
    source = live_job(sid, "flagship_escalation", runner=False, status="completed",
                      app_server_thread_id="thr-source", control_revision=2)
    with pytest.raises(RuntimeError, match="stale control revision"):
        fork_job(source["job_id"], sid, ROOT, None, 1, "review", "take another angle")
    assert read_job_record(source["job_id"])["control_revision"] == 2
    assert len(list_jobs(sid)) == 1

    fork = fork_job(source["job_id"], sid, ROOT, None, 2, "review", "take another angle")
    assert fork["fork_source_job_id"] == source["job_id"]
    assert fork["fork_thread_id"] == fork["fork_from_thread_id"] == "thr-source"
    assert "app_server_thread_id" not in fork and fork["agent"] == "flagship_escalation"
    assert fork["status"] == "running" and fork["runner_start_token"]
    assert (job_dir(fork["job_id"]) / "prompt.txt").read_text() == "take another angle"
    updated = read_job_record(source["job_id"])
    assert updated["control_revision"] == 3 and updated["last_control_action"] == "fork"
    cancel_job(fork["job_id"], sid)


def test_fork_refusals_change_nothing(make_session, live_job):
    session = make_session()
    sid = session["session_id"]
    threadless = live_job(sid, "flagship_escalation", runner=False, status="completed")
    with pytest.raises(RuntimeError, match="no persisted app-server thread"):
        fork_job(threadless["job_id"], sid, ROOT, None, 0, None, "again")
    busy = live_job(sid, "flagship_escalation", app_server_thread_id="thr-busy")
    with pytest.raises(Exception, match="active-agent limit.*flagship_escalation max_active"):
        fork_job(busy["job_id"], sid, ROOT, None, 0, None, "again")
    stranger = live_job(sid, "routine_engineer")
    with pytest.raises(PermissionError, match="not a descendant"):
        fork_job(busy["job_id"], sid, "routine_engineer", stranger["job_id"], 0, None, "again")
    assert read_job_record(busy["job_id"])["control_revision"] == 0
    assert len(list_jobs(sid)) == 3
    update_job(busy["job_id"], status="completed")

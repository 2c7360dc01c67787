"""control_job / inspect_job against a real host process on the job's control socket (spec 04)."""

from __future__ import annotations

import json
import threading

import pytest
from kernel.jobs.results.conftest import REVIEWER, ROOT, WRITER, audit_events, make_job
from support.waiting import blocked_in, wait_until

from mmo_kernel.errors import AdmissionError, ControlDeliveryUnknown
from mmo_kernel.jobs.controls import control_job, inspect_job
from mmo_kernel.jobs.records import job_dir, read_job_record, update_job
from mmo_kernel.state.processes import terminate_process_groups


def _requests(job_id):
    path = job_dir(job_id) / "host-requests.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _running(session, agent=WRITER, **fields):
    return make_job(session, agent, status="running", control_revision=0, **fields)


def test_a_delivered_control_is_applied_and_moves_the_revision(session, fake_host):
    job = _running(session)
    fake_host(job["job_id"])
    out = control_job(job["job_id"], "steer", session["session_id"], ROOT, expected_revision=0,
                      input="focus on the parser")
    assert out["control_revision"] == 1 and out["result"]["applied"] == "steer"
    assert out["job"]["last_control_status"] == "applied"
    assert out["job"]["last_control_action"] == "steer"
    sent = _requests(job["job_id"])[0]
    assert sent["expected_revision"] == 0 and sent["revision"] == 1
    assert sent["input"] == "focus on the parser"


def test_stale_revision_is_refused_before_delivery(session, fake_host):
    job = _running(session)
    fake_host(job["job_id"])
    before = read_job_record(job["job_id"])
    with pytest.raises(RuntimeError, match="stale control revision"):
        control_job(job["job_id"], "interrupt", session["session_id"], ROOT, expected_revision=3)
    assert read_job_record(job["job_id"]) == before and _requests(job["job_id"]) == []


def test_a_control_rejected_by_the_host_still_consumes_its_revision(session, fake_host):
    job = _running(session)
    fake_host(job["job_id"], "reject")
    with pytest.raises(RuntimeError, match="invalid fields"):
        control_job(job["job_id"], "respond", session["session_id"], ROOT, expected_revision=0,
                    request_id=7, response={"decision": 3})
    record = read_job_record(job["job_id"])
    assert record["control_revision"] == 1 and record["last_control_status"] == "failed"
    with pytest.raises(RuntimeError, match="stale control revision"):
        control_job(job["job_id"], "interrupt", session["session_id"], ROOT, expected_revision=0)


def test_a_lost_reply_is_delivery_unknown_with_the_revision_consumed(session, fake_host):
    job = _running(session)
    host = fake_host(job["job_id"], "die")
    with pytest.raises(ControlDeliveryUnknown):
        control_job(job["job_id"], "compact", session["session_id"], ROOT, expected_revision=0)
    host.proc.wait(timeout=10)
    record = read_job_record(job["job_id"])
    assert record["last_control_status"] == "delivery_unknown"
    assert record["control_revision"] == 1


def test_nothing_delivered_changes_nothing(session, fake_host):
    job = _running(session)
    host = fake_host(job["job_id"])
    host.socket.unlink()  # the host lives but nobody listens on its socket path any more
    before = read_job_record(job["job_id"])
    with pytest.raises(RuntimeError, match="not delivered"):
        control_job(job["job_id"], "pause", session["session_id"], ROOT, expected_revision=0)
    assert read_job_record(job["job_id"]) == before


def test_concurrent_controls_are_serialized_through_delivery(session, fake_host):
    job = _running(session)
    host = fake_host(job["job_id"], "hold")
    outcomes = []

    def send(revision):
        try:
            outcomes.append(control_job(job["job_id"], "compact", session["session_id"], ROOT,
                                        expected_revision=revision)["control_revision"])
        except RuntimeError as exc:
            outcomes.append(str(exc))

    threads = [threading.Thread(target=send, args=(r,)) for r in (0, 1)]
    threads[0].start()
    wait_until(lambda: _requests(job["job_id"]), what="the host to handle the first control")
    threads[1].start()
    # the second control waits for the job's control lock while the first is at the host
    wait_until(lambda: blocked_in(threads[1], "job_control_lock", waiting_on=None),
               what="the second control to wait for the control lock")
    assert len(_requests(job["job_id"])) == 1
    host.release()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(str(o) for o in outcomes) == ["1", "2"]
    log = _requests(job["job_id"])
    starts = [e["start"] for e in log if "start" in e]
    ends = [e["end"] for e in log if "end" in e]
    assert len(starts) == 2 and ends[0] <= starts[1]  # the second began after the first was done
    assert read_job_record(job["job_id"])["last_control_status"] == "applied"


def test_set_effort_is_checked_against_the_agents_allowed_efforts(session, fake_host):
    job = _running(session)
    fake_host(job["job_id"])
    with pytest.raises(ValueError, match="must be one of medium, high"):
        control_job(job["job_id"], "set_effort", session["session_id"], ROOT,
                    expected_revision=0, effort="xhigh")
    assert read_job_record(job["job_id"]).get("control_revision") == 0
    out = control_job(job["job_id"], "set_effort", session["session_id"], ROOT,
                      expected_revision=0, effort="medium")
    assert _requests(job["job_id"])[0]["effort"] == "medium" and out["control_revision"] == 1


def test_grants_allow_only_their_actions_and_never_disposition(session, fake_host):
    writer = _running(session)
    reviewer = _running(session, REVIEWER)
    fake_host(writer["job_id"])
    seen = inspect_job(writer["job_id"], session["session_id"], REVIEWER,
                       caller_job_id=reviewer["job_id"])
    assert seen["live"]["thread_id"] == "thread-1"
    assert seen["live"]["pending_requests"][0]["id"] == 7
    with pytest.raises(PermissionError, match="not a descendant"):
        control_job(writer["job_id"], "steer", session["session_id"], REVIEWER,
                    expected_revision=0, caller_job_id=reviewer["job_id"], input="x")
    with pytest.raises(PermissionError, match="not a descendant"):
        inspect_job(reviewer["job_id"], session["session_id"], WRITER,
                    caller_job_id=writer["job_id"])
    assert read_job_record(writer["job_id"]).get("control_revision") == 0


def test_inspect_without_a_host_has_no_live_view(session):
    job = make_job(session, WRITER, status="suspended", app_server_thread_id="thread-9")
    assert inspect_job(job["job_id"], session["session_id"], ROOT)["live"] is None


def test_stop_on_a_suspended_job_terminalizes_it_keeping_partial_evidence(session):
    job = make_job(session, WRITER, status="suspended", partial="half of the work",
                   control_revision=2)
    out = control_job(job["job_id"], "stop", session["session_id"], ROOT, expected_revision=2)
    assert out["job"]["status"] == "stopped" and out["control_revision"] == 3
    assert out["job"]["result_kind"] == "partial"
    assert (job_dir(job["job_id"]) / "partial-result.md").read_text() == "half of the work"


def test_controls_that_need_a_host_are_refused_without_one(session):
    job = make_job(session, WRITER, status="suspended", control_revision=0)
    with pytest.raises(RuntimeError, match="no running host"):
        control_job(job["job_id"], "steer", session["session_id"], ROOT, expected_revision=0,
                    input="hello")
    done = make_job(session, WRITER, status="completed", control_revision=0)
    with pytest.raises(RuntimeError, match="takes no controls"):
        control_job(done["job_id"], "continue", session["session_id"], ROOT, expected_revision=0)


def test_continue_refused_at_readmission_changes_nothing(session, fake_host):
    holder = _running(session, WRITER, mode="workspace-write", write_scope=["src"],
                      write_scope_resolved=[session["cwd"] + "/src"])
    fake_host(holder["job_id"])  # a live writer of the same agent holds max_active = 1
    paused = make_job(session, WRITER, status="suspended", mode="workspace-write",
                      write_scope=["src/app"], write_scope_resolved=[session["cwd"] + "/src/app"],
                      control_revision=4, partial="so far")
    before = read_job_record(paused["job_id"])
    with pytest.raises(AdmissionError, match="write scope conflicts|active-agent limit"):
        control_job(paused["job_id"], "continue", session["session_id"], ROOT,
                    expected_revision=4, input="go on")
    assert read_job_record(paused["job_id"]) == before


def test_continue_relaunches_a_suspended_job_on_its_thread(session):
    job = make_job(session, REVIEWER, status="suspended", control_revision=1,
                   app_server_thread_id="thread-7", started_at="2026-01-01T00:00:00+00:00",
                   mcp_caller_token_hash="a" * 64, partial="so far")
    out = control_job(job["job_id"], "continue", session["session_id"], ROOT,
                      expected_revision=1, input="carry on")
    record = read_job_record(job["job_id"])
    try:
        assert out["result"]["recovery_requested"] is True and out["control_revision"] == 2
        assert record["resume_request"] == {"action": "continue", "revision": 2,
                                            "input": "carry on"}
        assert record["started_at"] == "2026-01-01T00:00:00+00:00"
        assert record["mcp_caller_token_hash"] != "a" * 64
        assert record["last_control_status"] == "applied" and record["runner_pid"] > 0
        resumed = [e for e in audit_events(session) if e["event"] == "agent_resumed"]
        assert resumed[-1]["job_id"] == job["job_id"]
    finally:
        terminate_process_groups([record["runner_pgid"]], 2.0)


def test_finalize_on_a_suspended_job_relaunches_with_a_finalize_request(session):
    job = make_job(session, REVIEWER, status="suspended", control_revision=0, partial="p")
    out = control_job(job["job_id"], "finalize", session["session_id"], ROOT, expected_revision=0)
    record = read_job_record(job["job_id"])
    try:
        assert out["result"]["action"] == "finalize"
        assert record["resume_request"]["action"] == "finalize"
        assert "final result" in record["resume_request"]["instruction"]
    finally:
        terminate_process_groups([record["runner_pgid"]], 2.0)
    update_job(job["job_id"], status="failed")

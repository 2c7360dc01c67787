"""Controls at their edges: each refusal's message, each host-less path's record (spec 04).

``test_controls.py`` proves delivery, revisions and recovery against a real
host; these pin what each path writes and answers exactly (the request a host
receives, the live view, a cold stop's evidence, a host-less ``set_effort``)
and every argument refusal, so a changed field, phrase or comparison in
``jobs.controls`` fails a test (``make mutate``).
"""

from __future__ import annotations

import json

import pytest
from kernel.jobs.results.conftest import REVIEWER, ROOT, WRITER, make_job

from mmo_kernel.jobs.controls import control_job, granted, inspect_job, socket_path
from mmo_kernel.jobs.records import job_dir, read_job_record, update_job
from mmo_kernel.sessions.records import read_session_record

STOP_REASON = "The job was stopped while it had no running host; this is the evidence it left."


def _requests(job_id):
    path = job_dir(job_id) / "host-requests.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _control(session, job, action, revision=0, **kwargs):
    return control_job(job["job_id"], action, session["session_id"], ROOT,
                       expected_revision=revision, **kwargs)


def _refused(error, session, job, action, revision=0, **kwargs):
    before = read_job_record(job["job_id"])
    with pytest.raises(error) as info:
        _control(session, job, action, revision, **kwargs)
    assert read_job_record(job["job_id"]) == before  # a refusal changes nothing
    return str(info.value)


def test_a_delivered_request_carries_exactly_the_given_fields(session, fake_host):
    job = make_job(session, WRITER, status="running", control_revision=4)
    fake_host(job["job_id"])
    out = _control(session, job, "respond", 4, request_id=7, response={"decision": "accept"})
    sent = {k: v for k, v in _requests(job["job_id"])[0].items() if k != "start"}
    assert sent == {"action": "respond", "expected_revision": 4, "revision": 5, "request_id": 7,
                    "response": {"decision": "accept"}}
    assert out["result"] == {"applied": "respond", "revision": 5}
    assert out["control_revision"] == 5 == out["job"]["control_revision"]
    record = read_job_record(job["job_id"])
    assert (record["last_control_action"], record["last_control_status"]) == (
        "respond", "applied")
    assert "last_control_error" not in record


def test_the_live_view_is_what_the_host_reports(session, fake_host):
    job = make_job(session, WRITER, status="running", control_revision=2,
                   app_server_thread_id="thread-recorded")
    fake_host(job["job_id"])
    seen = inspect_job(job["job_id"], session["session_id"], ROOT)
    assert seen["live"] == {
        "thread_id": "thread-1", "active_turn_id": "turn-1",
        "pending_requests": [{"id": 7, "method": "item/tool/requestUserInput",
                              "params": {"questions": []}}],
        "control_revision": 2,
    }
    assert seen["job"]["job_id"] == job["job_id"] and "runtime_current" in seen["job"]


def test_a_starting_host_has_no_live_view_and_takes_no_controls(session, fake_host):
    job = make_job(session, WRITER, status="running", control_revision=0)
    fake_host(job["job_id"])
    update_job(job["job_id"], control_socket_ready=None)  # the host lives, its socket not yet
    assert inspect_job(job["job_id"], session["session_id"], ROOT)["live"] is None
    message = _refused(RuntimeError, session, job, "interrupt")
    assert message == (f"job {job['job_id']}'s host is still starting (control socket not "
                       "ready); nothing changed, retry shortly")
    assert _requests(job["job_id"]) == []


def test_the_control_socket_defaults_to_the_jobs_own_path(session):
    from mmo_kernel.hosts.control_socket import app_server_socket_path

    job = make_job(session, WRITER)
    assert socket_path(job) == str(app_server_socket_path(f"control:job:{job['job_id']}"))
    assert socket_path({**job, "control_socket_path": "/run/x.sock"}) == "/run/x.sock"


def test_a_cold_stop_writes_the_stop_evidence_and_retires_the_host_fields(session):
    job = make_job(session, WRITER, status="suspended", control_revision=3, runner_pid=999999,
                   runner_start_token="gone", active_turn_id="turn-9")
    out = _control(session, job, "stop", 3)
    assert out["result"] == {"action": "stop", "stopped": True}
    record = read_job_record(job["job_id"])
    assert (record["status"], record["control_revision"], record["last_control_action"],
            record["last_control_status"], record["result_kind"]) == (
        "stopped", 4, "stop", "applied", "partial")
    assert not {"runner_pid", "runner_start_token", "active_turn_id"} & set(record)
    partial = job_dir(job["job_id"]) / "partial-result.md"
    assert record["partial_result_path"] == str(partial)
    assert partial.read_text() == f"(no agent message was recorded)\n\n---\n{STOP_REASON}\n"


def test_a_cold_stop_keeps_a_final_result_final(session):
    job = make_job(session, WRITER, status="paused", control_revision=0, result="all done")
    _control(session, job, "stop")
    record = read_job_record(job["job_id"])
    assert (record["status"], record["result_kind"]) == ("stopped", "final")
    assert "partial_result_path" not in record
    assert not (job_dir(job["job_id"]) / "partial-result.md").exists()


def test_set_effort_without_a_host_applies_to_the_next_turn(session):
    job = make_job(session, WRITER, status="suspended", control_revision=1)
    out = _control(session, job, "set_effort", 1, effort="high")
    assert out["result"] == {"effort": "high", "applies_to": "next turn"}
    record = read_job_record(job["job_id"])
    assert (record["status"], record["reasoning_effort"], record["control_revision"],
            record["last_control_action"], record["last_control_status"]) == (
        "suspended", "high", 2, "set_effort", "applied")


def test_host_less_refusals_name_the_job_and_its_status(session):
    paused = make_job(session, WRITER, status="paused", control_revision=0)
    assert _refused(RuntimeError, session, paused, "finalize") == (
        f"finalize without a running host applies to a suspended job; job {paused['job_id']} "
        "is paused (use continue)")
    lost = make_job(session, WRITER, status="running", control_revision=0)  # no host recorded
    assert _refused(RuntimeError, session, lost, "continue") == (
        f"job {lost['job_id']} is running and has no running host; continue is not possible now")
    assert _refused(RuntimeError, session, lost, "interrupt") == (
        f"job {lost['job_id']} has no running host (status running); interrupt needs one; "
        "nothing changed (continue relaunches it)")
    done = make_job(session, WRITER, status="completed", control_revision=0)
    assert _refused(RuntimeError, session, done, "stop") == (
        f"job {done['job_id']} is completed; a finished job takes no controls")


def test_revision_refusals(session):
    job = make_job(session, WRITER, status="suspended", control_revision=2)
    for bad in ("2", True, 2.0, None):
        assert _refused(ValueError, session, job, "stop", bad) == (
            f"expected_revision must be an integer, got {bad!r}")
    assert _refused(RuntimeError, session, job, "stop", 1) == (
        f"stale control revision: expected_revision 1 but job {job['job_id']} is at revision 2; "
        "inspect it again")
    fresh = make_job(session, WRITER, status="suspended")  # no control yet: revision 0
    assert _refused(RuntimeError, session, fresh, "stop", 1).endswith(
        "is at revision 0; inspect it again")


def test_argument_refusals(session):
    from mmo_kernel.jobs.controls import CONTROL_ACTIONS

    job = make_job(session, WRITER, status="suspended", control_revision=0)
    assert _refused(ValueError, session, job, "explode") == (
        f"control action must be one of {', '.join(CONTROL_ACTIONS)}, got 'explode'")
    assert _refused(ValueError, session, job, "continue", input=5) == "input must be a string"
    for blank in (None, "", "  \n"):
        assert _refused(ValueError, session, job, "steer", input=blank) == (
            "steer needs a non-empty input")
    assert _refused(ValueError, session, job, "set_effort", effort=None) == (
        f"effort must be one of medium, high for agent {WRITER!r}, got None")
    for request_id in (None, True, 1.5, ["7"]):
        assert _refused(ValueError, session, job, "respond", request_id=request_id,
                        response={"decision": "accept"}) == (
            "respond needs the request_id of a pending request (string or int)")
    for response in (None, ["accept"], "accept"):
        assert _refused(RuntimeError, session, job, "respond", request_id="r1",
                        response=response) == (
            'invalid fields: respond needs a response object, e.g. {"decision": "accept"} or '
            '{"answers": {...}}')


def test_respond_accepts_string_and_integer_request_ids(session, fake_host):
    job = make_job(session, WRITER, status="running", control_revision=0)
    fake_host(job["job_id"])
    _control(session, job, "respond", 0, request_id="r-1", response={"answers": {}})
    _control(session, job, "respond", 1, request_id=0, response={"decision": "decline"})
    sent = [r for r in _requests(job["job_id"]) if "start" in r]
    assert [r["request_id"] for r in sent] == ["r-1", 0]


def test_only_a_named_agent_can_hold_a_grant(session):
    record = read_session_record(session["session_id"])
    assert granted(record, REVIEWER, WRITER, "inspect")
    assert not granted(record, REVIEWER, WRITER, "stop")
    assert not granted(record, None, WRITER, "inspect")
    assert not granted(record, "no_such_agent", WRITER, "inspect")


# -- a host whose answers the test chooses ----------------------------------------

HOST = '''
import json, sys, threading
from pathlib import Path
from mmo_kernel.hosts.control_socket import ControlServer

socket_path, behaviour = sys.argv[1], json.loads(sys.argv[2])

def handle(request):
    if request["action"] == "inspect":
        if behaviour.get("hang"):
            threading.Event().wait()  # never answers
        return behaviour["inspect"]
    error = behaviour.get("raise")
    if error:
        raise {"ValueError": ValueError, "PermissionError": PermissionError,
               "FileNotFoundError": FileNotFoundError, "KeyError": KeyError}[error]("host says no")
    return {"done": request["action"]}  # applied, without touching the record

server = ControlServer(socket_path, handle).start()
Path(socket_path + ".ready").write_text("ready")
threading.Event().wait()
'''


@pytest.fixture
def chosen_host(tmp_path):
    """``start(job, behaviour)``: a real host process serving the job's control socket."""
    import os
    import subprocess
    import sys

    from support.waiting import wait_until

    from mmo_kernel.hosts.control_socket import app_server_socket_path
    from mmo_kernel.state.processes import process_start_token

    script = tmp_path / "chosen_host.py"
    script.write_text(HOST)
    procs = []

    def start(job, behaviour):
        path = app_server_socket_path(f"control:job:{job['job_id']}")
        ready = path.with_name(path.name + ".ready")
        ready.unlink(missing_ok=True)
        proc = subprocess.Popen([sys.executable, str(script), str(path), json.dumps(behaviour)],
                                env=dict(os.environ), stdin=subprocess.DEVNULL,
                                start_new_session=True)
        procs.append((proc, ready))
        wait_until(lambda: ready.exists() or proc.poll() is not None, what="the host to listen")
        assert proc.poll() is None
        update_job(job["job_id"], runner_pid=proc.pid, runner_pgid=proc.pid,
                   runner_start_token=process_start_token(proc.pid),
                   control_socket_path=str(path), control_socket_ready=True)
        return proc

    yield start
    for proc, ready in procs:
        proc.kill()
        proc.wait(timeout=30)
        ready.unlink(missing_ok=True)


@pytest.mark.parametrize(("kind", "error"), [
    ("ValueError", ValueError), ("PermissionError", PermissionError),
    ("FileNotFoundError", FileNotFoundError), ("KeyError", RuntimeError)])
def test_a_host_refusal_is_raised_as_its_own_kind_and_consumes_the_revision(
        session, chosen_host, kind, error):
    job = make_job(session, WRITER, status="running", control_revision=0)
    chosen_host(job, {"inspect": {}, "raise": kind})
    with pytest.raises(error) as info:
        _control(session, job, "interrupt")
    assert type(info.value) is error
    expected = "'host says no'" if kind == "KeyError" else "host says no"
    assert str(info.value) == expected
    record = read_job_record(job["job_id"])
    assert (record["control_revision"], record["last_control_status"],
            record["last_control_error"], record["last_control_action"]) == (
        1, "failed", expected, "interrupt")


def test_an_applied_control_is_acknowledged_for_its_pending_revision(session, chosen_host):
    job = make_job(session, WRITER, status="running", control_revision=6,
                   last_control_error="an old error")
    chosen_host(job, {"inspect": {}})
    out = _control(session, job, "compact", 6)
    assert out["result"] == {"done": "compact"}
    record = read_job_record(job["job_id"])
    assert (record["control_revision"], record["last_control_status"],
            record["last_control_action"]) == (7, "applied", "compact")
    assert "last_control_error" not in record


@pytest.mark.parametrize("reported", [{}, ["not", "an", "object"], None])
def test_a_live_view_falls_back_to_the_record(session, chosen_host, reported):
    job = make_job(session, WRITER, status="running", control_revision=3,
                   app_server_thread_id="thread-from-record")
    chosen_host(job, {"inspect": reported})
    assert inspect_job(job["job_id"], session["session_id"], ROOT)["live"] == {
        "thread_id": "thread-from-record", "active_turn_id": None, "pending_requests": [],
        "control_revision": 3}


# -- relaunch without a host --------------------------------------------------------


def _relaunched(session, job, action, revision, **kwargs):
    from mmo_kernel.state.processes import terminate_process_groups

    out = _control(session, job, action, revision, **kwargs)
    record = read_job_record(job["job_id"])
    terminate_process_groups([record["runner_pgid"]], 2.0)
    return out, record


def test_continue_and_finalize_relaunch_with_exact_requests(session):
    from kernel.jobs.results.conftest import audit_events

    from mmo_kernel.jobs.controls import FINALIZE_INSTRUCTION

    paused = make_job(session, REVIEWER, status="paused", control_revision=2, partial="p",
                      recovery_error="an earlier failure")
    out, record = _relaunched(session, paused, "continue", 2, effort="high")
    assert out["result"] == {"action": "continue", "recovery_requested": True}
    assert record["resume_request"] == {"action": "continue", "revision": 3, "effort": "high"}
    assert (record["status"], record["control_revision"], record["last_control_action"],
            record["last_control_status"], record["host"]) == (
        "running", 3, "continue", "applied", "app_server")
    assert "recovery_error" not in record and record["runner_pgid"] == record["runner_pid"]
    [event] = [e for e in audit_events(session) if e["event"] == "agent_resumed"]
    assert (event["job_id"], event["agent"], event["action"], event["control_revision"],
            event["run_id"]) == (paused["job_id"], REVIEWER, "continue", 3,
                                 session["current_run_id"])
    suspended = make_job(session, REVIEWER, status="suspended", control_revision=0, partial="p")
    out, record = _relaunched(session, suspended, "finalize", 0, input="wrap up")
    assert out["result"] == {"action": "finalize", "recovery_requested": True}
    assert record["resume_request"] == {"action": "finalize", "revision": 1, "input": "wrap up",
                                        "instruction": FINALIZE_INSTRUCTION}
    assert FINALIZE_INSTRUCTION == (
        "Finalize now: stop exploring and return your final result for the task (in the "
        "required output format, if one was given).")


def test_a_job_of_a_terminal_session_is_not_relaunched(session):
    from mmo_kernel.sessions.records import write_session_record

    job = make_job(session, REVIEWER, status="suspended", control_revision=0, partial="p")
    write_session_record({**read_session_record(session["session_id"]), "status": "stopped"})
    assert _refused(RuntimeError, session, job, "continue") == (
        f"terminal immutable session {session['session_id']} (stopped) cannot continue job "
        f"{job['job_id']}")


def test_set_effort_is_checked_against_the_resolved_efforts_of_the_agent(session):
    job = make_job(session, "repo_scout", status="suspended", control_revision=0)
    assert _refused(ValueError, session, job, "set_effort", effort="medium") == (
        "effort must be one of high, max for agent 'repo_scout', got 'medium'")
    assert _control(session, job, "set_effort", effort="high")["result"] == {
        "effort": "high", "applies_to": "next turn"}


def test_the_live_view_is_the_hosts_own_report(session, chosen_host):
    job = make_job(session, WRITER, status="running", control_revision=3,
                   app_server_thread_id="thread-from-record")
    chosen_host(job, {"inspect": {"thread_id": "t-live", "active_turn_id": "turn-2",
                                  "pending_requests": [{"id": 1}], "control_revision": 9}})
    assert inspect_job(job["job_id"], session["session_id"], ROOT)["live"] == {
        "thread_id": "t-live", "active_turn_id": "turn-2", "pending_requests": [{"id": 1}],
        "control_revision": 9}


def test_a_host_that_never_answers_an_inspect_gives_no_live_view(session, chosen_host):
    job = make_job(session, WRITER, status="running", control_revision=0)
    chosen_host(job, {"inspect": {}, "hang": True})
    seen = inspect_job(job["job_id"], session["session_id"], ROOT)  # after INSPECT_TIMEOUT
    assert seen["live"] is None and seen["job"]["job_id"] == job["job_id"]

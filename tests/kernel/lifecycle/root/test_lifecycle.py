"""Lifecycle controls on a live root: detach, pause/continue, compact, stop, cancel."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from mmo_kernel.lifecycle.controls import (
    cancel_session,
    compact_session,
    continue_session,
    detach_session,
    load_session,
    pause_session,
    stop_session,
)
from mmo_kernel.lifecycle.root_exec import run_root_exec
from mmo_kernel.sessions.records import read_session_record, session_dir, session_file
from mmo_kernel.state.files import lifecycle_lock
from mmo_kernel.state.processes import process_matches

from .conftest import (
    OFFLINE,
    TURN_PROFILE,
    Background,
    sent_methods,
    session_id_of_latest,
    wait_until,
)


def start_slow(workspace, seconds=20, gate=None):
    """A root whose turns take ``seconds`` — or, with ``gate``, hold until that file exists
    (a test that continues the thread opens it: later turns inherit the first one's delay)."""
    slow = f"FAKE_HOLD_UNTIL={gate}" if gate is not None else f"FAKE_SLEEP={seconds}"
    bg = Background(run_root_exec, TURN_PROFILE, workspace, f"slow work {slow}",
                    60, bindings=OFFLINE)
    sid = session_id_of_latest()
    record = wait_until(lambda: (r := load_session(sid)).get("active_root_turn_id") and r,
                        what="an active root turn")
    return bg, sid, record


def hosts_gone(record) -> bool:
    return not any(process_matches(record.get(p), record.get(t)) for p, t in (
        ("root_pid", "root_start_token"),
        ("root_app_server_pid", "root_app_server_start_token")))


def audit_events(sid):
    return [json.loads(line) for line in session_file(sid, "audit.jsonl").read_text().splitlines()]


def test_cancel_kills_both_groups_and_run_root_exec_returns_cancelled(workspace):
    bg, sid, record = start_slow(workspace)
    out = cancel_session(sid)
    assert out["session"]["status"] == "cancelled"
    assert hosts_gone(record)
    assert bg.join()["status"] == "cancelled"
    assert "session_cancelled" in [e["event"] for e in audit_events(sid)]
    with pytest.raises(RuntimeError, match="terminal immutable session"):
        cancel_session(sid)


def test_cancelling_is_visible_while_the_lifecycle_lock_is_held_elsewhere(workspace):
    bg, sid, record = start_slow(workspace)
    held = threading.Event()
    release = threading.Event()

    def hold():
        with lifecycle_lock(session_dir(sid)):
            held.set()
            release.wait(120)  # held until the test releases it

    holder = threading.Thread(target=hold)
    holder.start()
    assert held.wait(30)
    canceller = threading.Thread(target=cancel_session, args=(sid,))
    canceller.start()
    wait_until(lambda: read_session_record(sid)["status"] == "cancelling", what="cancelling")
    assert canceller.is_alive()
    release.set()
    canceller.join(60)
    holder.join(30)
    assert read_session_record(sid)["status"] == "cancelled"
    bg.join()


def test_stop_steers_the_active_turn_and_never_starts_a_second_turn(workspace):
    bg, sid, record = start_slow(workspace)
    out = stop_session(sid, grace_seconds=10)
    assert out["session"]["status"] == "stopped"
    assert out["root_finalize_delivered"] is True and out["root_forced"] is False
    assert bg.join()["status"] == "stopped"
    methods = sent_methods(session_file(sid, "root-events.jsonl"))
    assert "turn/steer" in methods and methods.count("turn/start") == 1
    stopped = [e for e in audit_events(sid) if e["event"] == "session_stopped"]
    assert stopped and stopped[0]["root_finalize_delivered"] is True
    assert "root_pid" not in read_session_record(sid)


def test_cold_pause_then_continue_finishes_on_the_same_thread(workspace, tmp_path):
    gate = tmp_path / "gate"
    bg, sid, record = start_slow(workspace, gate=gate)
    out = pause_session(sid)
    paused = out["session"]
    assert paused["status"] == "paused" and out["affected_jobs"] == []
    assert "root_pid" not in paused and "root_app_server_pid" not in paused
    assert hosts_gone(record)
    assert Path(paused["partial_result_path"]).is_file()
    gate.write_text("go")
    resumed = continue_session(sid, "Please finish now.")
    assert resumed["resumed_jobs"] == [] and resumed["resume_errors"] == {}
    result = bg.join()
    assert result["status"] == "completed"
    assert result["session"]["root_thread_id"] == record["root_thread_id"]
    assert result["session"]["started_at"] == record["started_at"]


def test_compaction_of_a_paused_session_returns_it_to_cold_pause(workspace):
    bg, sid, record = start_slow(workspace)
    pause_session(sid)
    out = compact_session(sid)
    session = out["session"]
    assert session["status"] == "paused" and session.get("root_compacted_at")
    assert "thread/compact/start" in sent_methods(session_file(sid, "root-events.jsonl"))
    assert hosts_gone(load_session(sid))
    cancel_session(sid)
    bg.join()


def test_pause_needs_a_durable_root_thread_and_detach_is_idempotent(workspace):
    from mmo_kernel.sessions.create import create_session

    bg, sid, record = start_slow(workspace, seconds=3)
    fresh = create_session(TURN_PROFILE, cwd=workspace, bindings=OFFLINE)
    with pytest.raises(RuntimeError, match="cannot pause session from status"):
        pause_session(fresh["session_id"])
    with pytest.raises(RuntimeError, match="before the persistent root thread"):
        detach_session(fresh["session_id"])
    first = detach_session(sid)["session"]
    assert first["status"] == "detached"
    assert detach_session(sid)["session"]["status"] == "detached"
    wait_until(lambda: load_session(sid)["status"] == "completed", what="the detached root")
    bg.join()
    wait_until(lambda: hosts_gone(load_session(sid)), what="the host to exit")


def test_sigkill_of_the_app_server_mid_turn_is_recovered_on_the_same_thread(workspace):
    import os
    import signal

    bg, sid, record = start_slow(workspace, seconds=2)
    os.killpg(record["root_app_server_pgid"], signal.SIGKILL)
    out = bg.join()
    assert out["status"] == "completed"
    assert out["session"]["root_thread_id"] == record["root_thread_id"]
    assert out["session"]["root_recovery_attempts"] == 1
    methods = sent_methods(out["events_path"])
    assert methods.count("thread/start") == 1 and "thread/resume" in methods


def test_resume_restores_edited_guidance_and_refuses_a_drifted_model_catalog(workspace):
    bg, sid, record = start_slow(workspace, seconds=30)
    pause_session(sid)
    home = read_session_record(sid)["homes"]["escalation_lead"]
    agents_md = Path(home["agents_md"])
    original = agents_md.read_bytes()
    agents_md.write_text("edited by someone")
    catalog = Path(home["model_catalog_json"])
    catalog.chmod(0o600)
    catalog.write_text(catalog.read_text().replace("scripted", "scriptex", 1))
    with pytest.raises(RuntimeError, match="model catalog failed integrity"):
        continue_session(sid)
    suspended = read_session_record(sid)
    assert suspended["status"] == "suspended"
    assert "home validation failed" in suspended["resume_error"]
    assert agents_md.read_bytes() == original
    cancel_session(sid)
    bg.join()


def test_resume_refuses_a_drifted_model_catalog_of_a_worker_on_a_custom_route(workspace):
    # the root runs offline; routine_engineer keeps its custom-provider route
    bg = Background(run_root_exec, TURN_PROFILE, workspace, "slow work FAKE_SLEEP=30", 60,
                    bindings={"escalation_lead": "local_scripted"})
    sid = session_id_of_latest()
    wait_until(lambda: load_session(sid).get("active_root_turn_id"), what="an active root turn")
    pause_session(sid)
    home = read_session_record(sid)["homes"]["routine_engineer"]
    assert home.get("model_catalog_json"), "the custom-route worker records no model catalog"
    catalog = Path(home["model_catalog_json"])
    catalog.chmod(0o600)
    catalog.write_text(catalog.read_text().replace("glm", "glx", 1))
    with pytest.raises(RuntimeError, match="model catalog failed integrity.*routine_engineer"):
        continue_session(sid)
    suspended = read_session_record(sid)
    assert suspended["status"] == "suspended"
    assert "home validation failed" in suspended["resume_error"]
    cancel_session(sid)
    bg.join()


BOOTSTRAPPING_HOST = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                         start_new_session=True)  # like a listening app-server: own session
open(sys.argv[1], "w").write(str(child.pid))
time.sleep(60)  # killed before it records the child
"""


def test_cancel_kills_an_app_server_its_host_had_not_recorded_yet(workspace, tmp_path):
    """A listening app-server outlives its host, so cancel must not depend on the record."""
    import sys

    import psutil

    from mmo_kernel.sessions.create import create_session
    from mmo_kernel.sessions.state import update_session
    from mmo_kernel.state.processes import spawn_detached

    sid = create_session(TURN_PROFILE, cwd=workspace, bindings=OFFLINE)["session_id"]
    pid_file = tmp_path / "child.pid"
    pid, token = spawn_detached([sys.executable, "-c", BOOTSTRAPPING_HOST, str(pid_file)],
                                cwd=tmp_path, env={"PATH": "/usr/bin:/bin"})
    update_session(sid, status="running", root_pid=pid, root_pgid=pid, root_start_token=token)
    child = psutil.Process(int(wait_until(lambda: pid_file.is_file() and pid_file.read_text(),
                                          what="the unrecorded child")))
    assert cancel_session(sid)["session"]["status"] == "cancelled"
    assert not process_matches(pid, token)
    wait_until(lambda: not child.is_running() or child.status() == psutil.STATUS_ZOMBIE,
               what="the unrecorded child to be killed")


def test_a_refused_lifecycle_lock_changes_nothing(workspace, tmp_path):
    """A symlinked ``lifecycle.lock`` is refused by every control before any write."""
    from mmo_kernel.errors import StateError

    bg, sid, record = start_slow(workspace, seconds=30)
    lock = session_dir(sid) / "lifecycle.lock"
    lock.unlink(missing_ok=True)
    target = tmp_path / "planted.lock"
    lock.symlink_to(target)
    for control in (cancel_session, stop_session, pause_session, detach_session,
                    continue_session, compact_session):
        with pytest.raises(StateError, match="lifecycle lock cannot traverse"):
            control(sid)
        assert read_session_record(sid)["status"] == "running", control.__name__
    assert not hosts_gone(record) and not target.exists()
    assert "session_cancelled" not in [e["event"] for e in audit_events(sid)]
    lock.unlink()
    assert cancel_session(sid)["session"]["status"] == "cancelled"
    bg.join()


def test_cancelling_is_undone_when_the_lock_it_waited_for_is_refused(workspace, tmp_path):
    """Shown while another holder has the lock; put back when the lock turns out refused."""
    from mmo_kernel.errors import StateError

    bg, sid, record = start_slow(workspace, seconds=30)
    lock = session_dir(sid) / "lifecycle.lock"
    held, release = threading.Event(), threading.Event()
    outcome: dict = {}

    def hold():
        with lifecycle_lock(session_dir(sid)):
            held.set()
            release.wait(10)
            lock.unlink()
            lock.symlink_to(tmp_path / "planted.lock")

    def cancel():
        try:
            outcome["result"] = cancel_session(sid)
        except StateError as exc:
            outcome["error"] = str(exc)

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(5)
    canceller = threading.Thread(target=cancel)
    canceller.start()
    wait_until(lambda: read_session_record(sid)["status"] == "cancelling", what="cancelling")
    release.set()
    holder.join(10)
    canceller.join(20)
    assert "lifecycle lock cannot traverse" in outcome.get("error", ""), outcome
    assert read_session_record(sid)["status"] == "running"
    assert not hosts_gone(record)
    lock.unlink()
    assert cancel_session(sid)["session"]["status"] == "cancelled"
    bg.join()


JOB_LAB = Path(__file__).resolve().parents[3] / "fixtures" / "profiles" / "job-lab"


def test_stop_keeps_the_last_agent_message_as_a_partial_result(workspace):
    bg, sid, record = start_slow(workspace)
    out = stop_session(sid, grace_seconds=10)
    session = out["session"]
    assert session["status"] == "stopped" and out["root_forced"] is False
    assert session["result_kind"] == "partial", session.get("result_path")
    partial = session_file(sid, "root-partial-result.md")
    assert session["result_path"] == session["partial_result_path"] == str(partial)
    assert not session_file(sid, "root-result.md").exists()
    text = partial.read_text()
    assert "FAKE_CODEX_OK" in text and "stopped" in text.splitlines()[-1]
    assert bg.join()["status"] == "stopped"


def test_stop_gives_steered_workers_the_grace_period_to_finish(workspace):
    """A goal worker's strict final turn (FAKE_SLEEP=3 again) outlasts the stopped root."""
    from mmo_kernel.jobs.records import read_job_record
    from mmo_kernel.jobs.spawn import spawn_job
    from mmo_kernel.lifecycle.root_exec import start_root
    from mmo_kernel.sessions.create import create_session

    session = create_session(JOB_LAB, cwd=workspace)
    sid = session["session_id"]
    start_root(session, "Lead slowly FAKE_SLEEP=30", (), None, 60)
    job_id = spawn_job(sid, "lead", None, "strict_goal",
                       task="Investigate FAKE_SLEEP=3")["job_id"]
    wait_until(lambda: read_job_record(job_id).get("active_turn_id")
               and read_session_record(sid).get("active_root_turn_id"),
               timeout=30, what="root and worker both to start a turn")
    out = stop_session(sid, grace_seconds=30)
    assert out["session"]["status"] == "stopped"
    job = read_job_record(job_id)
    assert job["status"] == "completed", (job["status"], job.get("cancel_reason"))
    assert Path(job["result_path"]).is_file()
    wait_until(lambda: hosts_gone(record := read_session_record(sid)) or record,
               what="the root host to exit")


def _root_control(record, action, **fields):
    from mmo_kernel.hosts.control_socket import send_control_request

    path = record["root_control_socket"]
    revision = send_control_request(path, {"action": "inspect"})["result"]["control_revision"]
    return send_control_request(path, {"action": action, "expected_revision": revision,
                                       **fields})["result"]


def test_root_control_continue_answers_with_a_turn_that_ended_at_once(workspace):
    """Interrupt pauses a turn-mode root; ``continue`` starts the next turn on the thread and
    answers with its id even when that turn is over before the answer (spec 03)."""
    bg = Background(run_root_exec, TURN_PROFILE, workspace, "ask first FAKE_REQUEST_USER_INPUT",
                    60, bindings=OFFLINE)
    sid = session_id_of_latest()
    waiting = wait_until(lambda: (r := load_session(sid)).get("pending_requests") and r,
                         what="the root to wait for operator input")
    assert bg.join()["status"] == "detached"
    assert _root_control(waiting, "interrupt") == {}
    wait_until(lambda: load_session(sid)["status"] == "paused", what="the interrupted root")

    started = _root_control(waiting, "continue", input="Answer without asking.")

    done = wait_until(lambda: (r := load_session(sid))["status"] == "completed" and r,
                      what="the continued root to complete")
    history = json.loads(session_file(sid, "root-terminal-history.json").read_text())
    assert [t["status"] for t in history["turns"]] == ["interrupted", "completed"]
    assert started == {"turn_id": history["turns"][-1]["id"]}
    assert done["root_thread_id"] == waiting["root_thread_id"]
    assert sent_methods(session_file(sid, "root-events.jsonl")).count("turn/start") == 2
    wait_until(lambda: hosts_gone(waiting), what="the finished root host to exit")

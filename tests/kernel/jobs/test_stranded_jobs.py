"""A job host killed mid-task never strands its job (issue 13.1).

Real job hosts on the stand-in, killed with SIGKILL to their process group. Waiting
(``wait_for_jobs`` and the mesh's ``agents_wait``) notices the loss and returns with the
job ``suspended``; the root may ``continue`` it on the same thread; nothing relaunches it
by itself; and a session that ends with such a job stops it in place, names it, removes
its worktree and branch and keeps its partial result and patch.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
from pathlib import Path

import pytest
from support.events import mcp_items
from support.waiting import Background, wait_until

from mmo_kernel.jobs.records import job_dir, job_file, read_job_record
from mmo_kernel.sessions.records import read_session_record, session_file

JOB_LAB = Path(__file__).resolve().parents[2] / "fixtures" / "profiles" / "job-lab"
OFFLINE = {"*": "local_scripted"}
WRITER_TASK = "Write FAKE_WRITE src/gen.py::x = 1 and then ask FAKE_REQUEST_USER_INPUT"


@pytest.fixture(autouse=True)
def _env(mmo_env, mmo_standin, mmo_process_guard):
    yield mmo_env
    from mmo_kernel.gateway.process import stop_gateway

    stop_gateway()


@pytest.fixture
def session(mmo_git_workspace):
    from mmo_kernel.sessions.create import create_session

    return create_session(JOB_LAB, cwd=mmo_git_workspace, bindings=OFFLINE)


def _kill_runner(job_id: str, field: str) -> dict:
    """SIGKILL the job's runner group once ``field`` is on its record; that record."""
    record = wait_until(lambda: (r := read_job_record(job_id)).get(field) and r,
                        timeout=60, what=f"the job host to publish {field}")
    os.killpg(record["runner_pgid"], signal.SIGKILL)
    return record


class Polling(threading.Event):
    """The wait's cancel event, which also tells the test once the wait polls (so the
    kill lands after the wait took its baseline). Never set: nothing is cancelled."""

    def __init__(self) -> None:
        super().__init__()
        self.started = threading.Event()

    def is_set(self) -> bool:  # asked at every poll, after the baseline was taken
        self.started.set()
        return super().is_set()


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout


def test_wait_returns_with_the_killed_job_suspended_and_continue_resumes_its_thread(session,
                                                                                   tmp_path):
    from mmo_kernel.jobs.controls import control_job
    from mmo_kernel.jobs.spawn import spawn_job
    from mmo_kernel.jobs.waiting import wait_for_jobs

    sid = session["session_id"]
    gate = tmp_path / "gate"  # every turn of the thread holds until it exists
    job_id = spawn_job(sid, "lead", None, "plain",
                       task=f"Slow work FAKE_HOLD_UNTIL={gate}")["job_id"]
    wait_until(lambda: read_job_record(job_id).get("active_turn_id"), timeout=60,
               what="the job to start its turn")
    polling = Polling()
    waiting = Background(wait_for_jobs, [job_id], sid, 120, cancelled=polling)
    assert polling.started.wait(30), "the wait never began polling"
    running = _kill_runner(job_id, "active_turn_id")  # the job is running at the baseline
    waited = waiting.join(130)

    assert waited["timed_out_waiting"] is False, waited
    assert waited["changed_job_ids"] == [job_id] and waited["unfinished"] == [job_id]
    assert waited["awaiting_control"] == [job_id] and "agent_continue" in waited[
        "awaiting_control_note"]
    entry = waited["results"][job_id]
    assert entry["status"] == "suspended" and entry["result_kind"] == "partial"
    assert "persisted app-server thread" in entry["preview"]
    assert running["app_server_thread_id"] in entry["preview"]

    # nothing relaunches it by itself: a second wait returns at once, still suspended
    again = wait_for_jobs([job_id], sid, 120)
    assert again["timed_out_waiting"] is False and again["awaiting_control"] == [job_id]
    assert again["changed_job_ids"] == [] and read_job_record(job_id)["status"] == "suspended"

    suspended = read_job_record(job_id)
    gate.write_text("go")
    control = control_job(job_id, "continue", sid, "lead",
                          expected_revision=suspended.get("control_revision", 0),
                          input="Carry on, quickly this time.")
    assert control["result"]["recovery_requested"] is True
    done = wait_for_jobs([job_id], sid, 90)
    assert done["unfinished"] == [] and done["results"][job_id]["status"] == "completed"
    final = read_job_record(job_id)
    assert final["app_server_thread_id"] == running["app_server_thread_id"]
    wait_until(lambda: not _alive(read_job_record(job_id)), timeout=20,
               what="the continued host to exit")


def _alive(record: dict) -> bool:
    from mmo_kernel.state.processes import process_matches

    return process_matches(record.get("runner_pid"), record.get("runner_start_token"))


def test_the_roots_agents_wait_learns_of_the_loss_and_the_ending_session_stops_the_job(
        mmo_git_workspace):
    """The whole path of the issue: a root delegates to a writer through ``mmo_mesh``, the
    writer's host is killed, the root's ``agents_wait`` returns with it ``suspended``, the
    root completes and its session stops the job in place (named, worktree and branch
    gone, partial and patch kept); ``continue`` is refused as for any finished job and
    ``mmo clean`` can remove it."""
    from mmo_kernel.api import clean_state, run_root_exec
    from mmo_kernel.jobs.controls import control_job
    from mmo_kernel.jobs.listing import iter_job_records
    from mmo_kernel.sessions.records import iter_session_records
    from mmo_kernel.sessions.retention import plan_clean
    from mmo_kernel.state.audit import read_jsonl

    spawn = {"agent": "writer", "task": WRITER_TASK, "mode": "workspace-write",
             "write_scopes": ["src"]}
    prompt = "\n".join([
        "Delegate the file to a writer and wait for it.",
        # the worker's markers are JSON-escaped so they do not act on the root's own turn
        "FAKE_MCP_CALL mmo_mesh.agent_spawn " + json.dumps(spawn).replace("FAKE_", "FAKE\\u005f"),
        'FAKE_MCP_CALL mmo_mesh.agents_wait {"job_ids": ["{{1.job_id}}"], '
        '"timeout_seconds": 120}',
    ])
    run = Background(run_root_exec, JOB_LAB, mmo_git_workspace, prompt, 240, bindings=OFFLINE)
    sid = wait_until(lambda: (iter_session_records() or [None])[0], timeout=60,
                     what="the session")["session_id"]
    job_id = wait_until(lambda: [r["job_id"] for r in iter_job_records(sid)], timeout=60,
                        what="the writer job")[0]
    before = _kill_runner(job_id, "pending_requests")  # wrote its file, now asks the operator
    handle = before["workspace"]
    assert Path(handle["worktree"], "src", "gen.py").is_file()
    out = run.join(250)

    assert out["status"] == "completed", out["session"].get("error")
    items = mcp_items(out["events_path"])
    assert [(i["tool"], i["status"]) for i in items] == [("agent_spawn", "completed"),
                                                        ("agents_wait", "completed")]
    waited = items[1]["result"]["structuredContent"]
    assert waited["timed_out_waiting"] is False and waited["awaiting_control"] == [job_id]
    assert waited["results"][job_id]["status"] == "suspended"
    assert "persisted app-server thread" in waited["results"][job_id]["preview"]

    session = read_session_record(sid)
    assert session["status"] == "completed" and session["stopped_jobs"] == [job_id]
    job = read_job_record(job_id)
    assert job["status"] == "stopped" and job["result_kind"] == "partial"
    assert job["app_server_thread_id"] == before["app_server_thread_id"]
    assert "ended (completed)" in job["stop_reason"]
    partial = Path(job["partial_result_path"]).read_text()
    assert "persisted app-server thread" in partial and "stopped in place" in partial
    # the patch stays as a file; the worktree and its branch are gone
    assert job["patch"]["changed_paths"] == ["src/gen.py"]
    assert "x = 1" in job_file(job_id, "patch.diff").read_text()
    assert job["workspace_removed"] is True and not Path(handle["worktree"]).exists()
    assert _git(mmo_git_workspace, "branch", "--list", handle["branch"]).strip() == ""
    assert not (mmo_git_workspace / "src" / "gen.py").exists()
    finished = [e for e in read_jsonl(session_file(sid, "audit.jsonl"))
                if e["event"] == "agent_finished" and e.get("job_id") == job_id]
    assert [e["status"] for e in finished] == ["stopped"]

    with pytest.raises(RuntimeError, match="a finished job takes no controls"):
        control_job(job_id, "continue", sid, "lead",
                    expected_revision=job.get("control_revision", 0))
    assert [j["job_id"] for j in plan_clean(0, 1)["jobs"]] == [job_id]
    assert clean_state(0, 1)["jobs"] == 1 and not job_dir(job_id).exists()


def test_a_stopped_session_stops_its_suspended_job_in_place_instead_of_relaunching_it(
        session):
    from mmo_kernel.jobs.spawn import spawn_job
    from mmo_kernel.lifecycle.controls import stop_session
    from mmo_kernel.state.audit import read_jsonl

    sid = session["session_id"]
    job_id = spawn_job(sid, "lead", None, "plain", task="Slow work FAKE_SLEEP=30")["job_id"]
    _kill_runner(job_id, "active_turn_id")
    wait_until(lambda: _settled(job_id), timeout=30, what="the lost job to be suspended")

    stopped = stop_session(sid, grace_seconds=5)["session"]
    assert stopped["status"] == "stopped" and stopped["stopped_jobs"] == [job_id]
    job = read_job_record(job_id)
    assert job["status"] == "stopped" and "ended (stopped)" in job["stop_reason"]
    assert "persisted app-server thread" in Path(job["partial_result_path"]).read_text()
    rows = [json.loads(line) for line in Path(job["events_path"]).read_text().splitlines()]
    starts = [r for r in rows
              if r["direction"] == "sent" and r["message"].get("method") == "turn/start"]
    assert len(starts) == 1  # never relaunched to finalize: no host was started again
    events = [e["event"] for e in read_jsonl(session_file(sid, "audit.jsonl"))
              if e.get("job_id") == job_id]
    assert "agent_resumed" not in events and "agent_cancelled" not in events


def _settled(job_id: str) -> bool:
    from mmo_kernel.jobs.listing import load_job

    return load_job(job_id)["status"] == "suspended"


def test_finishing_a_session_stops_jobs_without_a_host_and_leaves_live_ones(session):
    """``finish_session`` (the API hosts and tests use) ends stranded jobs too: a
    suspended and a paused job without hosts are stopped; a running one is not."""
    from mmo_kernel.api import finish_session
    from mmo_kernel.jobs.records import new_job_id, utc_now, write_job_record
    from mmo_kernel.state.processes import spawn_detached, terminate_process_groups

    sid = session["session_id"]

    def job(status: str, **fields) -> str:
        record = write_job_record({"job_id": new_job_id("plain"), "session_id": sid,
                                   "agent": "plain", "status": status, "created_at": utc_now(),
                                   **fields})
        return record["job_id"]

    suspended = job("suspended", app_server_thread_id="thr-1")
    job_file(suspended, "partial-result.md").write_text("half way there\n")
    paused = job("paused")
    pid, token = spawn_detached(["sleep", "60"], cwd="/", env=dict(os.environ))
    try:
        live = job("running", runner_pid=pid, runner_pgid=pid, runner_start_token=token)
        ended = finish_session(sid, 1, error="the root gave up")
        assert ended["status"] == "failed" and sorted(ended["stopped_jobs"]) == sorted(
            [suspended, paused])
        assert read_job_record(live)["status"] == "running"
    finally:
        terminate_process_groups([pid], 1.0)
    for job_id in (suspended, paused):
        record = read_job_record(job_id)
        assert record["status"] == "stopped" and record["result_kind"] == "partial"
        assert "ended (failed)" in record["stop_reason"]
    text = job_file(suspended, "partial-result.md").read_text()
    assert text.startswith("half way there\n") and "stopped in place" in text


def test_a_wait_on_jobs_that_only_their_caller_can_move_returns_at_once(session):
    from mmo_kernel.jobs.records import new_job_id, utc_now, write_job_record
    from mmo_kernel.jobs.waiting import wait_for_jobs

    sid = session["session_id"]
    ids = [write_job_record({"job_id": new_job_id("plain"), "session_id": sid,
                             "agent": "plain", "status": status,
                             "created_at": utc_now()})["job_id"]
           for status in ("suspended", "paused", "completed")]
    result = Background(wait_for_jobs, ids, sid, 300).join(60)
    assert result["timed_out_waiting"] is False
    assert result["awaiting_control"] == ids[:2] and result["unfinished"] == ids[:2]
    assert set(result["results"]) == set(ids)

"""The read model over a real offline session: the tree, what runs now, tokens, and no writes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
from pathlib import Path

import psutil
import pytest
from support.waiting import wait_until

JOB_LAB = Path(__file__).resolve().parents[2] / "fixtures" / "profiles" / "job-lab"
OFFLINE = {"*": "local_scripted"}
MMO = str(Path(os.sys.executable).with_name("mmo"))


@pytest.fixture
def offline(mmo_env, mmo_standin, mmo_process_guard):
    yield mmo_env
    from mmo_kernel.gateway.process import stop_gateway

    stop_gateway()


def _prompt(gate: Path) -> str:
    """The root spawns a worker that holds until ``gate`` exists (the marker is JSON-escaped
    so that only the worker's task, not the root's own turn, holds)."""
    return "\n".join([
        "Delegate the greeting to a worker, then accept its answer.",
        'FAKE_MCP_CALL mmo_mesh.agent_spawn {"agent": "plain", "task": "Say hello '
        f'FAKE_HOLD\\u005fUNTIL={gate}"}}',
        'FAKE_MCP_CALL mmo_mesh.agents_wait {"job_ids": ["{{1.job_id}}"], "timeout_seconds": 90}',
        'FAKE_MCP_CALL mmo_mesh.agent_result {"job_id": "{{1.job_id}}"}',
    ])


def _files(root: Path) -> dict[str, tuple[int, int]]:
    """Every path under ``root`` with its size and mtime: what a write would change."""
    out = {}
    for base, dirs, names in os.walk(root):
        for name in dirs + names:
            info = os.lstat(os.path.join(base, name))
            out[os.path.join(base, name)] = (info.st_size, info.st_mtime_ns)
    return out


def _top_json() -> dict:
    done = subprocess.run([MMO, "top", "--once", "--json"], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_running_team_is_shown_live_and_its_end_without_a_reload(offline, mmo_git_workspace,
                                                                    tmp_path):
    from mmo_kernel.api import list_jobs, load_session, run_root_exec
    from mmo_kernel.views.collector import Collector

    gate = tmp_path / "gate"
    outcome: dict = {}
    runner = threading.Thread(target=lambda: outcome.update(run_root_exec(
        JOB_LAB, mmo_git_workspace, _prompt(gate), 150, bindings=OFFLINE)))
    runner.start()
    collector = Collector()
    try:
        def worker_running():
            snap = collector.refresh()
            agents = [a for s in snap.sessions for a in s.agents]
            return len(agents) == 2 and agents[1].status == "running" and agents[1].doing
        wait_until(worker_running, timeout=90, what="the worker to run")
        snap = collector.refresh()
        [view] = snap.sessions
        root, worker = view.agents
        assert (snap.sessions_live, view.status) == (1, "running")
        assert (root.key, root.agent, root.depth, root.status) == ("root", "lead", 0, "running")
        assert root.doing.label == "mmo_mesh.agents_wait"  # the root's open tool call
        assert (worker.agent, worker.parent, worker.depth) == ("plain", "root", 1)
        assert worker.doing.label == "thinking · turn 1" and worker.route == "local_scripted"
        assert [e["event"] for e in view.audit][:2] == ["run_started", "agent_started"]
        assert snap.agents == {"running": 2}

        cli = _top_json()  # a second viewer, another process: the same picture
        assert [a["agent"] for a in cli["sessions"][0]["agents"]] == ["lead", "plain"]
    finally:
        gate.write_text("go")
        runner.join(180)
    assert outcome["status"] == "completed", outcome.get("session", {}).get("error")

    sid = outcome["session"]["session_id"]
    snap = collector.refresh(show_finished=1)
    assert (snap.sessions_live, snap.finished) == (0, {"completed": 1})
    [view] = snap.sessions
    root, worker = view.agents
    [job] = list_jobs(sid)
    assert worker.status == job["status"] == "completed" and worker.doing is None
    assert (worker.input_tokens, worker.output_tokens) == (
        job["usage"]["input_tokens"], job["usage"]["output_tokens"])
    session = load_session(sid)
    assert (root.input_tokens, root.output_tokens) == (
        session["root_usage"]["input_tokens"], session["root_usage"]["output_tokens"])
    assert worker.last_message and "FAKE_CODEX_OK" in worker.last_message
    assert any(span["kind"] == "tool" and span["label"] == "mmo_mesh.agent_spawn"
               for span in root.timeline)


def _kill_group(pgid) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, TypeError):
        pass


def test_dead_hosts_show_suspended_and_nothing_under_sessions_or_jobs_changes(
        offline, mmo_git_workspace, tmp_path):
    """Everything of a run is killed (-9), so nothing but the viewer reads the state dir."""
    from mmo_kernel.jobs.records import jobs_root, read_job_record
    from mmo_kernel.sessions.records import read_session_record, sessions_root
    from mmo_kernel.views.collector import Collector

    gate = tmp_path / "gate"
    run = subprocess.Popen([MMO, "run", str(JOB_LAB), _prompt(gate), "--offline", "--cwd",
                            str(mmo_git_workspace)], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                           start_new_session=True)
    collector = Collector()
    try:
        wait_until(lambda: any(len(s.agents) == 2 and s.agents[1].status == "running"
                               for s in collector.refresh().sessions),
                   timeout=90, what="the worker to run")
        view = collector.refresh().sessions[0]
        session, job = read_session_record(view.session_id), read_job_record(view.agents[1].job_id)
        root_side = [psutil.Process(run.pid)]
        for pid in (session.get("root_pid"), session.get("root_app_server_pid")):
            root_side.append(psutil.Process(pid))
            root_side += psutil.Process(pid).children(recursive=True)  # its `mmo mcp` too
        for process in root_side:  # first everything that could reconcile the job
            process.kill()
        psutil.wait_procs(root_side, timeout=30)
        for pgid in (job.get("runner_pgid"), job.get("app_server_pgid")):
            _kill_group(pgid)
        wait_until(lambda: collector.refresh().sessions[0].agents[1].status == "suspended",
                   timeout=60, what="the viewer to see the dead hosts")

        before = {**_files(sessions_root()), **_files(jobs_root())}
        for _ in range(3):
            [view] = Collector().refresh().sessions
        after = {**_files(sessions_root()), **_files(jobs_root())}
        assert after == before
        assert (view.status, view.stored_status) == ("suspended", "running")
        shown = view.agents[1]
        assert (shown.status, shown.stored_status) == ("suspended", "running")
        assert read_job_record(shown.job_id)["status"] == "running"  # nothing was recorded
    finally:
        gate.write_text("go")
        _kill_group(os.getpgid(run.pid)) if run.poll() is None else None


def test_a_session_directory_without_its_record_yet_is_no_session_and_a_bad_one_is_unreadable(
        mmo_env):
    from mmo_kernel.sessions.records import sessions_root
    from mmo_kernel.views.collector import Collector

    being_created = sessions_root() / "20261202-101500-team-abc123"
    being_created.mkdir(parents=True)
    collector = Collector()
    snap = collector.refresh()
    assert (snap.sessions_total, snap.finished) == (0, {})

    (being_created / "session.json").write_text("{not json")
    snap = collector.refresh()
    assert (snap.sessions_total, snap.finished) == (1, {"unreadable": 1})

"""An integrator killed -9 between applying a patch and recording ``integrated`` strands nothing.

The integrating process (here a real ``python`` running ``integrate_patch``,
as ``mmo mcp`` does for ``agent_patch_integrate``) is held after its apply by
the state's runtime lock, which the test owns, and killed there. The next
load of the job rolls the workspace back to its exact pre-apply bytes from
the journal; the job stays ``accepted`` and integrates again.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from kernel.jobs.results.conftest import ROOT, audit_events
from kernel.jobs.results.test_workspace import _accepted, _finish, _writer
from support.waiting import wait_until

from mmo_kernel.jobs import workspace as ws
from mmo_kernel.jobs.integration_recovery import JOURNAL_FILE, recover_locked
from mmo_kernel.jobs.listing import load_job
from mmo_kernel.jobs.records import job_file
from mmo_kernel.state.files import runtime_lock

INTEGRATE = ("import sys; from mmo_kernel.jobs.workspace import integrate_patch; "
             "integrate_patch(sys.argv[1], 'ship it', sys.argv[2], sys.argv[3])")


def _prepared(session):
    job, root, _ = _writer(session, scope=(".",))
    (root / "README.md").write_text("writer version\n")
    (root / "src").mkdir()
    (root / "src/new.py").write_text("NEW = 1\n")
    ws.capture_job_patch(job["job_id"])
    _finish(job["job_id"])
    _accepted(session, job["job_id"])
    return job["job_id"]


def _kill_after_apply(session, job_id: str) -> None:
    cwd = Path(session["cwd"])
    with runtime_lock():  # recording `integrated` needs this lock: the integrator waits on it
        proc = subprocess.Popen([sys.executable, "-c", INTEGRATE, job_id, session["session_id"],
                                 ROOT], env=dict(os.environ), start_new_session=True)
        try:
            wait_until(lambda: (cwd / "src/new.py").exists()
                       and (cwd / "README.md").read_text() == "writer version\n",
                       timeout=60, what="the integrator to apply the patch")
            assert job_file(job_id, JOURNAL_FILE).exists()
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_a_killed_integration_is_rolled_back_on_the_next_load(session):
    cwd = Path(session["cwd"])
    before = (cwd / "README.md").read_bytes()
    job_id = _prepared(session)
    _kill_after_apply(session, job_id)

    record = load_job(job_id)
    assert record["result_state"] == "accepted"
    assert (cwd / "README.md").read_bytes() == before
    assert not (cwd / "src").exists()
    assert not job_file(job_id, JOURNAL_FILE).exists()
    [event] = [e for e in audit_events(session)
               if e["event"] == "agent_patch_integration_recovered"]
    assert (event["job_id"], event["outcome"]) == (job_id, "rolled_back")

    public = ws.integrate_patch(job_id, "again", session["session_id"], ROOT)
    assert public["result_state"] == "integrated"
    assert (cwd / "src/new.py").read_text() == "NEW = 1\n"


def test_a_journal_left_after_integrated_was_recorded_keeps_the_integration(session):
    cwd = Path(session["cwd"])
    job_id = _prepared(session)
    journal = job_file(job_id, JOURNAL_FILE)
    ws.integrate_patch(job_id, "ship it", session["session_id"], ROOT)
    # a process killed after recording `integrated` but before removing its journal
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    journal.write_text(json.dumps({
        "job_id": job_id, "pid": int(dead.stdout), "start_token": "gone",
        "started_at": "2026-01-01T00:00:00+00:00",
        "snapshot": {"workspace": str(cwd), "changed_paths": []}}))
    assert load_job(job_id)["result_state"] == "integrated"
    assert (cwd / "src/new.py").read_text() == "NEW = 1\n" and not journal.exists()


def test_the_journal_of_a_live_integrator_is_left_alone(session):
    job_id = _prepared(session)
    cwd = Path(session["cwd"])
    with runtime_lock():
        proc = subprocess.Popen([sys.executable, "-c", INTEGRATE, job_id, session["session_id"],
                                 ROOT], env=dict(os.environ), start_new_session=True)
        wait_until(lambda: (cwd / "src/new.py").exists(), timeout=60,
                   what="the integrator to apply the patch")
        # (the integrator holds the job's control lock, so ask without taking it)
        assert recover_locked(job_id) is None  # its owner is alive: not ours to undo
        assert (cwd / "src/new.py").exists()
    assert proc.wait(timeout=60) == 0
    assert load_job(job_id)["result_state"] == "integrated"

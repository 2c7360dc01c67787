"""``mmo clean`` never keeps a job whose session is gone (its worktree and branch go too)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from kernel.jobs.results.test_workspace import _git, _writer

from mmo_kernel.jobs.records import job_dir, update_job
from mmo_kernel.jobs.workspace import job_workspace_cleanup
from mmo_kernel.sessions.records import session_dir
from mmo_kernel.sessions.retention import clean_state, plan_clean


def test_a_suspended_writer_whose_session_was_deleted_is_cleaned_with_its_worktree(session):
    job, root, handle = _writer(session)
    update_job(job["job_id"], status="suspended")
    repo = session["cwd"]
    shutil.rmtree(session_dir(session["session_id"]))

    [planned] = plan_clean(30, 30)["jobs"]
    assert (planned["job_id"], planned["reason"]) == (
        job["job_id"], "its session is gone and nothing runs it")
    assert clean_state(30, 30, job_cleanup=job_workspace_cleanup) == {"jobs": 1, "sessions": 0}
    assert not job_dir(job["job_id"]).exists()
    assert not Path(handle.worktree).exists()
    assert handle.branch not in _git(repo, "branch", "--list")


def test_a_job_whose_host_still_runs_is_kept_even_without_its_session(session):
    job, _, handle = _writer(session)
    host = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                            start_new_session=True)
    try:
        from mmo_kernel.state.processes import process_start_token

        update_job(job["job_id"], status="running", runner_pid=host.pid,
                   runner_start_token=process_start_token(host.pid))
        shutil.rmtree(session_dir(session["session_id"]))
        assert plan_clean(30, 30)["jobs"] == []
        assert clean_state(30, 30, job_cleanup=job_workspace_cleanup) == {"jobs": 0,
                                                                          "sessions": 0}
        assert job_dir(job["job_id"]).exists() and Path(handle.worktree).exists()
    finally:
        os.killpg(host.pid, 9)
        host.wait()

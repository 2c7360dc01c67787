"""The live view of ``mmo run`` shows the session's worker jobs as they start and finish."""

from __future__ import annotations

import subprocess

from .conftest import MMO, TURN_PROFILE, wait_until


def test_a_worker_spawned_during_the_run_appears_with_agent_route_and_status(live):
    from mmo_kernel.jobs.listing import load_job
    from mmo_kernel.jobs.spawn import spawn_job
    from mmo_kernel.sessions.records import iter_session_records

    proc = subprocess.Popen([MMO, "run", TURN_PROFILE, "plan FAKE_SLEEP=6", "--offline",
                             "--wall", "60", "--cwd", str(live)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    try:
        record = wait_until(lambda: (iter_session_records() or [None])[0], what="the session")
        sid = record["session_id"]
        wait_until(lambda: iter_session_records()[0].get("root_thread_id"), what="a root thread")
        job = spawn_job(sid, "escalation_lead", None, "flagship_escalation",
                        task_kind="second opinion", task="Review the plan FAKE_SLEEP=1")
        out, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    done = wait_until(lambda: load_job(job["job_id"])["status"] != "running" and
                      load_job(job["job_id"]), what="the job to end")
    lines = [line for line in err.splitlines() if f"job {job['job_id']} " in line]
    prefix = f"job {job['job_id']} flagship_escalation [local_scripted]: "
    assert lines and all(line.split("] ", 1)[1].startswith(prefix) for line in lines), err
    assert any("second opinion" in line for line in lines)
    assert lines[-1].split("] ", 1)[1].startswith(prefix + done["status"]), err
    assert "FAKE_CODEX_OK" in out

"""clean_state removes only old terminal records."""

from __future__ import annotations

import json
from pathlib import Path

from mmo_kernel.sessions.records import session_dir, session_file
from mmo_kernel.sessions.retention import clean_state
from mmo_kernel.state.files import atomic_write_json

from .test_records import make_session, rewrite

OLD = "2020-01-01T00:00:00+00:00"


def make_job(state, job_id, session_id, status, finished_at=OLD):
    directory = state / "jobs" / job_id
    directory.mkdir(parents=True)
    atomic_write_json(directory / "metadata.json", {
        "schema_version": 1, "job_id": job_id, "session_id": session_id, "agent": "w",
        "status": status, "created_at": OLD, "finished_at": finished_at})
    return directory


def test_old_terminal_sessions_and_jobs_go_live_ones_stay(mmo_env):
    old_done = make_session(status="completed")["session_id"]
    rewrite(old_done, finished_at=OLD, last_active_at=OLD)
    old_running = make_session(status="running")["session_id"]
    rewrite(old_running, created_at=OLD, last_active_at=OLD)
    recent_done = make_session(status="completed")["session_id"]
    rewrite(recent_done, finished_at=OLD)  # last_active_at missing => not both old

    gone = make_job(mmo_env.state_dir, "j-gone", old_done, "completed")
    live = make_job(mmo_env.state_dir, "j-live", old_running, "completed")
    running = make_job(mmo_env.state_dir, "j-run", old_running, "running")  # could continue

    cleaned = []
    result = clean_state(job_days=7, session_days=7, job_cleanup=cleaned.append)
    assert result == {"jobs": 1, "sessions": 1}
    assert not gone.exists() and live.exists() and running.exists()
    assert [r["job_id"] for r in cleaned] == ["j-gone"]
    assert not session_dir(old_done).exists()
    assert session_file(old_running, "session.json").exists()
    kept = json.loads(session_file(recent_done, "session.json").read_text())
    assert kept["status"] == "completed"


def test_a_crashed_compiles_staging_dir_goes_a_fresh_one_and_snapshots_stay(mmo_env):
    import os
    import time

    from mmo_kernel.profiles.snapshots import compile_profile

    snapshot = compile_profile("codex-harness-team")
    snapshots = mmo_env.state_dir / "snapshots"
    crashed = snapshots / ".compile-crashed"
    (crashed / "agents").mkdir(parents=True)
    (crashed / "agents" / "AGENTS.md").write_text("half written")
    os.chmod(crashed, 0o555)  # sealed, as the compile leaves it
    hour_ago = time.time() - 2 * 3600
    os.utime(crashed, (hour_ago, hour_ago))
    fresh = snapshots / ".compile-in-progress"
    fresh.mkdir()

    assert clean_state(job_days=7, session_days=7) == {"jobs": 0, "sessions": 0}
    assert not crashed.exists()
    assert fresh.exists()
    assert Path(snapshot["directory"]).is_dir()

"""``mmo start`` / ``mmo resume`` on the stand-in, whose TUI entry records its call and exits 0."""

from __future__ import annotations

from .conftest import TURN_PROFILE, mmo, mmo_json, one_line_error


def test_start_detaches_and_resume_finds_it_by_last_and_by_thread(live):
    started = mmo("start", TURN_PROFILE, "--offline", "--cwd", str(live))
    assert started.returncode == 0, started.stderr
    (session,) = mmo_json("sessions")["sessions"]
    sid, thread = session["session_id"], session["root_thread_id"]
    try:
        assert session["session_kind"] == "interactive" and session["status"] == "detached"
        one_line_error(mmo("resume"), "pass a session id or root thread id, or last=True")
        assert mmo("resume", "--last", cwd=live).returncode == 0
        # no turn ran yet, so each TUI start gave the root the thread it started
        thread = mmo_json("session", "show", sid)["session"]["root_thread_id"]
        assert mmo("resume", thread).returncode == 0  # found by its root thread id
        after = mmo_json("session", "show", sid)["session"]
        assert after["status"] == "detached" and after["root_thread_id"]
    finally:
        assert mmo("cancel", sid).returncode == 0

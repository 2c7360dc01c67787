"""The live view over real offline sessions (the Codex stand-in, scripted model): a run
shown running and then completed in the same app, and a detached session paused and
cancelled from the keys, as `mmo pause` / `mmo cancel` would."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from kernel.tui.conftest import audit, keep, run, screen, shown, until
from support.waiting import wait_until

from mmo_kernel.api import load_session, login_name
from mmo_kernel.tui.dialogs import AskScreen

MMO = str(Path(sys.executable).with_name("mmo"))
TURN_PROFILE = "access-efficient-escalation-lab"  # root escalation_lead, turn mode
ROOT = "escalation_lead"


def _row(viewer, agent: str) -> str | None:
    return next((line for line in screen(viewer) if line[2:].startswith(agent)), None)


def test_a_run_is_shown_running_then_completed_without_restarting_the_view(live, tmp_path):
    proc = subprocess.Popen([MMO, "run", TURN_PROFILE, "go FAKE_SLEEP=3", "--offline",
                             "--wall", "60", "--cwd", str(live)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)

    async def body(pilot):
        try:
            def thinking():
                row = _row(pilot.app, ROOT) or ""
                return " running " in row and "thinking · turn 1" in row and row
            await until(pilot, thinking, "the root running its turn", timeout=60)
            keep(pilot.app, "live-running", tmp_path)
            refreshes = pilot.app.refreshes
            # the session ends: it leaves the live table and is counted as finished
            await until(pilot, lambda: shown(pilot.app, "▸ 1 finished sessions (1 completed)"),
                        "the session to finish", timeout=60)
            assert pilot.app.refreshes > refreshes and _row(pilot.app, ROOT) is None
            await pilot.press("f")  # and shown again, completed, with its tokens
            done = await until(pilot, lambda: _row(pilot.app, ROOT), "the finished session")
            assert " completed " in done and "FAKE_CODEX_OK" in done
            keep(pilot.app, "live-completed", tmp_path)
        finally:
            proc.wait(timeout=60)

    run(body, (80, 24))
    assert proc.returncode == 0


def test_a_detached_session_is_paused_continued_and_cancelled_from_the_keys(live):
    out = subprocess.run([MMO, "run", TURN_PROFILE, "slow FAKE_SLEEP=30", "--offline",
                          "--wall", "2", "--cwd", str(live)], capture_output=True, text=True,
                         stdin=subprocess.DEVNULL, timeout=90)
    assert out.returncode == 124, out.stderr
    sid = out.stderr.splitlines()[0].split()[1]
    wait_until(lambda: load_session(sid).get("root_thread_id"), what="the root thread")

    async def body(pilot):
        await until(pilot, lambda: " detached " in (_row(pilot.app, ROOT) or ""), "detached")
        await pilot.press("p")  # the root's row acts on the session; pause asks nothing
        await until(pilot, lambda: " paused " in (_row(pilot.app, ROOT) or ""), "paused",
                    timeout=60)
        assert any(f"session {sid}: paused" in n for n in pilot.app.notices)
        # stop and cancel are destructive and take an optional reason: declined (esc, even
        # with a reason typed), nothing happens
        for key in ("x", "S"):
            await pilot.press(key)
            await until(pilot, lambda: isinstance(pilot.app.screen, AskScreen), "the question")
            await pilot.press(*"no", "escape")
            await until(pilot, lambda: not isinstance(pilot.app.screen, AskScreen), "closed")
        assert sum("not confirmed, nothing changed" in n for n in pilot.app.notices) == 2
        assert load_session(sid)["status"] == "paused"
        await pilot.press("c")  # continue asks what to do next (optional), as --input
        await until(pilot, lambda: isinstance(pilot.app.screen, AskScreen), "the question")
        await pilot.press(*"finish now FAKE_SLEEP=30", "enter")
        await until(pilot, lambda: any(f"session {sid}: running" in n
                                       for n in pilot.app.notices), "the continue", timeout=60)
        await pilot.press("x")
        await until(pilot, lambda: isinstance(pilot.app.screen, AskScreen), "the question")
        await pilot.press(*"wrong branch", "enter")
        await until(pilot, lambda: any(f"session {sid}: cancelled" in n
                                       for n in pilot.app.notices), "the cancel", timeout=60)

    run(body, (80, 24))
    assert load_session(sid)["status"] == "cancelled"
    [cancelled] = [e for e in audit(sid) if e["event"] == "session_cancelled"]
    assert (cancelled["actor"], cancelled["actor_name"], cancelled["reason"]) == (
        "ui", login_name(), "wrong branch")
    assert not [e for e in audit(sid) if e["event"] == "session_stopped"]
    [resumed] = [e for e in audit(sid) if e["event"] == "run_resumed"]
    assert resumed["actor"] == "ui"

"""``mmo run`` on the stand-in, then the session commands on what it left behind."""

from __future__ import annotations

import json
import os
import pty
import subprocess
from pathlib import Path

from mmo_kernel.lifecycle.controls import load_session

from .conftest import MMO, TURN_PROFILE, mmo, mmo_json, one_line_error, wait_until


def test_offline_run_streams_changes_prints_the_result_and_is_listed(live):
    out = mmo("run", TURN_PROFILE, "Summarize the repo", "--offline", "--wall", "60",
              "--cwd", str(live))
    assert out.returncode == 0, out.stderr
    assert "FAKE_CODEX_OK" in out.stdout and "\033[" not in out.stdout + out.stderr
    progress = [line for line in out.stderr.splitlines() if line.startswith("[")]
    assert len(progress) == len(set(line.split("] ", 1)[1] for line in progress))  # changes only
    assert any("root escalation_lead [local_scripted]: running" in p for p in progress)
    assert "completed" in progress[-1] and " in / " in progress[-1]
    sid = out.stderr.splitlines()[0].split()[1]
    assert f"session {sid} completed after" in out.stderr

    assert sid[:15] not in mmo("sessions").stdout  # active ones only by default (short ids)
    listed = mmo("sessions", "--all").stdout.splitlines()
    assert listed[0].split()[:3] == ["SESSION", "PROFILE", "STATUS"]
    assert sid.startswith(listed[1].split()[0]) and "completed" in listed[1] and "ago" in listed[1]

    shown = mmo("session", "show", sid).stdout
    assert "status" in shown and "completed" in shown and str(live) in shown
    assert "root-result.md" in shown and "root-events.jsonl" in shown and "jobs (0)" in shown
    data = mmo_json("session", "show", sid)
    assert data["session"]["status"] == "completed" and data["jobs"] == []
    assert Path(data["session"]["result_path"]).read_text() in out.stdout

    one_line_error(mmo("stop", sid), "terminal immutable session")
    removed = mmo("clean", "--job-days", "0", "--session-days", "0", "--yes")
    assert "1 session(s)" in removed.stdout
    assert mmo("sessions", "--all").stdout == "(none)\n"


def test_wall_detaches_with_124_then_stop_finishes_the_session(live):
    out = mmo("run", TURN_PROFILE, "work slowly FAKE_SLEEP=30", "--offline", "--wall", "2",
              "--cwd", str(live))
    assert out.returncode == 124, out.stderr
    assert "the wall limit expired" in out.stderr and "root-partial-result.md" in out.stderr
    sid = out.stderr.splitlines()[0].split()[1]
    assert mmo_json("session", "show", sid)["session"]["status"] == "detached"
    assert sid.startswith(mmo("sessions").stdout.splitlines()[1].split()[0])
    stopped = mmo("stop", sid, "--grace", "0")
    assert stopped.returncode == 0 and f"session {sid}: stopped" in stopped.stdout
    assert mmo_json("session", "show", sid)["session"]["status"] == "stopped"


def test_failed_run_exits_1_and_json_prints_the_outcome(live):
    out = mmo("run", TURN_PROFILE, "FAKE_PROVIDER_BAD_REQUEST", "--offline", "--json",
              "--cwd", str(live))
    assert out.returncode == 1
    outcome = json.loads(out.stdout)
    assert outcome["status"] == "failed" and outcome["exit_code"] == 1
    assert outcome["session"]["failure"]["kind"] == "turn_failed"
    assert out.stderr == ""  # --json: no live view


def test_on_a_terminal_the_view_is_redrawn_in_place(live):
    master, slave = pty.openpty()
    try:
        proc = subprocess.run([MMO, "run", TURN_PROFILE, "go FAKE_SLEEP=1", "--offline",
                               "--cwd", str(live)], stdout=subprocess.PIPE, stderr=slave,
                              stdin=subprocess.DEVNULL, text=True, timeout=90)
        os.close(slave)
        slave = -1
        chunks = []
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
    finally:
        if slave >= 0:
            os.close(slave)
        os.close(master)
    screen = b"".join(chunks).decode()
    assert proc.returncode == 0 and "FAKE_CODEX_OK" in proc.stdout
    assert "\033[J" in screen and "\033[2F" in screen  # the table is redrawn in place
    assert "AGENT" in screen and "ELAPSED" in screen and "TOKENS" in screen
    assert "completed" in screen


def test_pause_compact_continue_and_cancel_a_detached_session(live):
    out = mmo("run", TURN_PROFILE, "slow FAKE_SLEEP=30", "--offline", "--wall", "2",
              "--cwd", str(live))
    assert out.returncode == 124, out.stderr
    sid = out.stderr.splitlines()[0].split()[1]
    wait_until(lambda: load_session(sid).get("root_thread_id"), what="the root thread")
    paused = mmo("pause", sid)
    assert paused.returncode == 0 and f"session {sid}: paused" in paused.stdout, paused.stderr
    assert mmo_json("session", "show", sid)["session"]["partial_result_path"]
    compacted = mmo_json("compact", sid)
    assert compacted["session"]["status"] == "paused", compacted
    assert compacted["session"]["root_compacted_at"] and "message" not in compacted
    resumed = mmo_json("continue", sid, "--input", "finish now FAKE_SLEEP=30")
    assert resumed["session"]["status"] == "running"
    cancelled = mmo("cancel", sid)
    assert cancelled.returncode == 0 and f"session {sid}: cancelled" in cancelled.stdout
    one_line_error(mmo("continue", sid), "terminal immutable session")

"""``mmo watch``, ``mmo logs [-f]``, ``mmo session result``: a session outliving ``mmo run``."""

from __future__ import annotations

import json
import subprocess
import threading

from .conftest import MMO, TURN_PROFILE, mmo, one_line_error, wait_until


def _detached_run(live, gate) -> str:
    """A run whose root turn holds until ``gate`` exists, left behind by ``--wall``."""
    out = mmo("run", TURN_PROFILE, f"Summarize the repo FAKE_HOLD_UNTIL={gate}", "--offline",
              "--wall", "3", "--cwd", str(live))
    assert out.returncode == 124, out.stderr
    return out.stderr.splitlines()[0].split()[1]


def _background(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([MMO, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, stdin=subprocess.DEVNULL)


def test_watch_and_logs_follow_a_detached_session_to_its_end(live, tmp_path):
    gate = tmp_path / "gate"
    sid = _detached_run(live, gate)
    partial = mmo("session", "result", sid)
    assert partial.returncode == 0 and "external harness wall expired" in partial.stdout
    assert f"(a partial result: session {sid} is detached)" in partial.stderr
    watch = _background("watch", sid[:15])
    follow = _background("logs", sid[:15], "-f")
    watched = _lines_of(watch.stderr)
    followed_lines = _lines_of(follow.stdout)
    wait_until(lambda: any("detached" in line for line in watched), timeout=60,
               what="watch to show the detached root")
    wait_until(lambda: any("-> turn/start" in line for line in followed_lines), timeout=60,
               what="logs -f to print the turn so far")
    gate.write_text("go")
    assert watch.wait(timeout=120) == 0, watched
    assert follow.wait(timeout=120) == 0
    watched_err, followed = "\n".join(watched), "\n".join(followed_lines)
    assert f"session {sid} completed" in watched_err
    assert any("root escalation_lead [local_scripted]: completed" in line
               for line in watched_err.splitlines())
    lines = followed.splitlines()
    assert any("-> turn/start: " in line and "Summarize the repo" in line for line in lines)
    assert any(" says: " in line and "FAKE_CODEX_OK" in line for line in lines)
    assert lines[-1].split("  ", 1)[1].startswith(("turn ", "-> thread/read"))
    answer = mmo("session", "result", sid)
    assert answer.returncode == 0 and "FAKE_CODEX_OK" in answer.stdout and answer.stderr == ""
    data = json.loads(mmo("session", "result", sid, "--json").stdout)
    assert (data["status"], data["result_kind"]) == ("completed", "final")
    assert data["result"].rstrip("\n") == answer.stdout.rstrip("\n")


def test_logs_without_follow_prints_what_is_there_and_json_keeps_the_records(live, tmp_path):
    gate = tmp_path / "gate"
    gate.write_text("open")
    out = mmo("run", TURN_PROFILE, f"Summarize FAKE_HOLD_UNTIL={gate}", "--offline",
              "--cwd", str(live))
    assert out.returncode == 0, out.stderr
    sid = out.stderr.splitlines()[0].split()[1]
    text = mmo("logs", sid).stdout.splitlines()
    records = [json.loads(line) for line in mmo("logs", sid, "--json").stdout.splitlines()]
    assert records and all({"recorded_at", "direction", "message"} <= set(r) for r in records)
    assert len(text) < len(records)  # deltas and replies are left out of the text view
    assert any("turn" in line and "completed" in line for line in text)


def test_watch_of_a_finished_session_reports_its_end_and_bad_ids_are_one_line_errors(live):
    out = mmo("run", TURN_PROFILE, "Summarize the repo", "--offline", "--cwd", str(live))
    sid = out.stderr.splitlines()[0].split()[1]
    done = mmo("watch", sid)
    assert done.returncode == 0 and f"session {sid} completed" in done.stderr
    one_line_error(mmo("logs", "no-such-session"), "no-such-session")
    one_line_error(mmo("logs", sid, "--job", "nope"), "nope")


def _lines_of(stream) -> list[str]:
    """Lines of a child's pipe as they arrive (a reader thread fills the list)."""
    lines: list[str] = []

    def read() -> None:
        for line in stream:
            lines.append(line.rstrip("\n"))

    threading.Thread(target=read, daemon=True).start()
    return lines

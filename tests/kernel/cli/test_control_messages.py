"""What the lifecycle commands tell a user: compaction done, stop progress, how to resume."""

from __future__ import annotations

from mmo_kernel.lifecycle.controls import load_session
from mmo_kernel.sessions.records import session_file
from mmo_kernel.state.audit import read_jsonl

from .conftest import TURN_PROFILE, mmo, wait_until


def _detached(live, prompt: str = "slow FAKE_SLEEP=30") -> str:
    out = mmo("run", TURN_PROFILE, prompt, "--offline", "--wall", "2", "--cwd", str(live))
    assert out.returncode == 124, out.stderr
    sid = out.stderr.splitlines()[0].split()[1]
    wait_until(lambda: load_session(sid).get("root_thread_id"), what="the root thread")
    return sid


def _audited(sid: str, event: str) -> list[dict]:
    return [e for e in read_jsonl(session_file(sid, "audit.jsonl")) if e["event"] == event]


def test_compact_returns_saying_it_compacted_and_the_session_stays_paused(live):
    sid = _detached(live)
    assert mmo("pause", sid).returncode == 0
    compacted = mmo("compact", sid)
    assert compacted.returncode == 0, compacted.stderr
    assert compacted.stdout.splitlines() == [
        f"session {sid}: paused",
        f"compacted the root thread; the session stays paused (`mmo continue {sid}` resumes "
        "it)"]
    assert load_session(sid)["root_compacted_at"]
    too_long = mmo("cancel", sid, "--reason", "x" * 2_001)  # refused before anything changes
    assert too_long.returncode == 1 and len(too_long.stderr.splitlines()) == 1
    assert "reason must be at most 2000 characters" in too_long.stderr
    assert load_session(sid)["status"] == "paused" and not _audited(sid, "session_cancelled")
    assert mmo("cancel", sid, "--reason", "superseded by a new plan").returncode == 0
    [cancelled] = _audited(sid, "session_cancelled")
    assert (cancelled["actor"], cancelled["reason"]) == ("cli", "superseded by a new plan")


def test_stop_says_what_it_waits_for_while_it_blocks(capsys):
    from mmo_kernel.cli.sessions_cmd import _progress

    seen: list[str] = []
    with _progress("stopping session s1: the root finalizes", first=0.01, every=0.01):
        wait_until(lambda: seen.append(capsys.readouterr().err) or "still waiting" in "".join(seen),
                   what="the progress lines")
    lines = "".join(seen).splitlines()
    assert lines[0] == "stopping session s1: the root finalizes ..."
    assert lines[1].startswith("  still waiting (")


def test_stop_of_a_running_root_ends_stopped_and_a_quick_refusal_stays_one_line(live):
    sid = _detached(live)
    stopped = mmo("stop", sid, "--grace", "2", "--reason", "enough for today")
    assert stopped.returncode == 0, stopped.stderr
    assert f"session {sid}: stopped" in stopped.stdout
    [entry] = _audited(sid, "session_stopped")
    assert entry["reason"] == "enough for today"
    assert all(line.startswith(("stopping session", "  still waiting"))
               for line in stopped.stderr.splitlines())


def test_a_suspended_run_names_the_command_that_resumes_it(live):
    out = mmo("run", TURN_PROFILE, "FAKE_PROVIDER_USAGE_LIMIT", "--offline", "--cwd", str(live))
    assert out.returncode != 0
    sid = out.stderr.splitlines()[0].split()[1]
    assert load_session(sid)["status"] == "suspended"
    [error] = [line for line in out.stderr.splitlines() if line.startswith("error: ")]
    assert error.endswith(f"; the work is kept: resume it with `mmo continue {sid}`")
    assert "wait_for_jobs" not in out.stderr and "read_result" not in out.stderr
    assert mmo("cancel", sid).returncode == 0


def test_a_refusal_on_a_finished_session_says_what_it_means(live):
    out = mmo("run", TURN_PROFILE, "Summarize the repo", "--offline", "--cwd", str(live))
    sid = out.stderr.splitlines()[0].split()[1]
    refused = mmo("stop", sid)
    assert refused.returncode == 1 and len(refused.stderr.splitlines()) == 1
    assert "terminal immutable session" in refused.stderr  # the spec's phrase, for scripts
    assert refused.stderr.rstrip().endswith(
        "(a finished session cannot be changed; start a new one with `mmo run`)")

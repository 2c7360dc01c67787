"""A session control that is refused changes nothing (issue 13, item 5).

``mmo continue`` (and detach, pause, stop, compact) check every record they need
before they touch anything: a refusal is one line naming the file, the record
bytes stay identical, no host is started and no audit event is written. Real
hosts on the stand-in; the faults are real damaged files.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
from support.waiting import Background, wait_until

from mmo_kernel.lifecycle.controls import load_session
from mmo_kernel.lifecycle.root_exec import run_root_exec
from mmo_kernel.sessions.records import iter_session_records, read_session_record, session_file
from mmo_kernel.state.processes import process_matches

MMO = str(Path(sys.executable).with_name("mmo"))
TURN_PROFILE = "access-efficient-escalation-lab"
OFFLINE = {"*": "local_scripted"}


@pytest.fixture(autouse=True)
def _env(mmo_env, mmo_standin, mmo_process_guard):
    yield mmo_env
    from mmo_kernel.gateway.process import stop_gateway

    stop_gateway()


@pytest.fixture
def workspace(mmo_git_workspace) -> Path:
    return mmo_git_workspace


def mmo(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([MMO, *args], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=120)


def run_file(sid: str) -> Path:
    record = read_session_record(sid)
    return session_file(sid, "runs", record["current_run_id"], "run.json")


def truncate(path: Path) -> bytes:
    """Cut the file in half (what a crash or a full disk can leave); returns the original."""
    original = path.read_bytes()
    path.write_bytes(original[: len(original) // 2])
    return original


def evidence(sid: str) -> dict[str, bytes]:
    """What a refused control must leave exactly as it was: the records, the audit log and
    every message MMO sent the app-server (the running turn's own notifications go on)."""
    names = ("session.json", "audit.jsonl")
    found = {name: session_file(sid, name).read_bytes() for name in names
             if session_file(sid, name).exists()}
    events = session_file(sid, "root-events.jsonl")
    if events.exists():
        found["sent to the app-server"] = b"\n".join(
            line for line in events.read_bytes().splitlines()
            if json.loads(line).get("direction") == "sent")
    return found


def root_hosts(sid: str) -> list[int]:
    """Every live root host process of the session, recorded or not."""
    found = []
    for proc in psutil.process_iter(["pid", "cmdline", "status"]):
        cmdline = proc.info["cmdline"] or []
        if (proc.info["status"] != psutil.STATUS_ZOMBIE and sid in cmdline
                and "mmo_app_server.root_host" in cmdline):
            found.append(proc.info["pid"])
    return found


def audit_events(sid: str) -> list[str]:
    return [json.loads(line)["event"]
            for line in session_file(sid, "audit.jsonl").read_text().splitlines()]


def assert_refused(out: subprocess.CompletedProcess[str], phrase: str) -> None:
    assert out.returncode == 1, (out.stdout, out.stderr)
    lines = out.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("mmo: error: "), out.stderr
    assert phrase in lines[0], lines[0]


def suspended_session(workspace) -> str:
    """A root suspended by a retryable provider failure: its host is retired."""
    out = run_root_exec(TURN_PROFILE, workspace, "FAKE_PROVIDER_USAGE_LIMIT_ONCE", 60,
                        bindings=OFFLINE)
    assert out["status"] == "suspended", out["session"].get("error")
    sid = out["session"]["session_id"]
    wait_until(lambda: not root_hosts(sid), what="the suspended root's host to exit")
    return sid


def _truncated_run(sid: str):
    path = run_file(sid)
    original = truncate(path)
    return str(path), lambda: path.write_bytes(original)


def _orphaned_run(sid: str):
    runs = run_file(sid).parent.parent
    orphan = runs / "20260101-000000-run-orphan-abcdef"
    shutil.copytree(run_file(sid).parent, orphan)
    return "exactly its one active run", lambda: shutil.rmtree(orphan)


def _missing_capability(sid: str):
    path = session_file(sid, "capabilities.json")
    original = path.read_bytes()
    path.unlink()
    return "capability is unavailable", lambda: (path.write_bytes(original), path.chmod(0o600))


@pytest.mark.parametrize("damage", [_truncated_run, _orphaned_run, _missing_capability],
                         ids=["truncated-run", "orphaned-run", "missing-capability"])
def test_a_refused_continue_changes_nothing_and_the_repaired_session_continues(workspace,
                                                                               damage):
    sid = suspended_session(workspace)
    phrase, repair = damage(sid)
    before = evidence(sid)

    assert_refused(mmo("continue", sid), phrase)
    assert evidence(sid) == before  # same record bytes, no audit event, no message sent
    assert root_hosts(sid) == []  # no host was started
    assert load_session(sid)["status"] == "suspended"

    repair()
    out = mmo("continue", sid)
    assert out.returncode == 0, out.stderr
    done = wait_until(lambda: (r := load_session(sid))["status"] == "completed" and r,
                      timeout=90, what="the continued root to complete")
    assert audit_events(sid).count("run_resumed") == 1
    assert done["root_thread_id"] == read_session_record(sid)["root_thread_id"]
    wait_until(lambda: not root_hosts(sid), what="the finished host to exit")


def running_root(workspace) -> tuple[Background, str, dict]:
    run = Background(run_root_exec, TURN_PROFILE, workspace, "long work FAKE_SLEEP=120", 180,
                     bindings=OFFLINE)
    sid = wait_until(lambda: (iter_session_records() or [None])[0],
                     what="the session")["session_id"]
    record = wait_until(lambda: (r := read_session_record(sid)).get("active_root_turn_id")
                        and r.get("root_control_socket_ready") and r,
                        what="the root's turn")
    return run, sid, record


@pytest.mark.parametrize("control", [["detach"], ["pause"], ["stop", "--grace", "5"]])
def test_a_control_refused_for_a_truncated_run_leaves_the_running_root_untouched(workspace,
                                                                                 control):
    run, sid, record = running_root(workspace)
    path, repair = _truncated_run(sid)
    before = evidence(sid)

    assert_refused(mmo(control[0], sid, *control[1:]), path)
    assert evidence(sid) == before  # no status, no cold-pause marker, no finalize steer
    assert root_hosts(sid) == [record["root_pid"]]
    assert process_matches(record["root_app_server_pid"], record["root_app_server_start_token"])

    repair()
    out = mmo("stop", sid, "--grace", "10")
    assert out.returncode == 0, out.stderr
    assert run.join()["status"] == "stopped"
    wait_until(lambda: not root_hosts(sid), what="the stopped host to exit")


def test_a_compaction_refused_for_a_truncated_run_starts_no_host(workspace):
    run, sid, _ = running_root(workspace)
    assert mmo("pause", sid).returncode == 0
    wait_until(lambda: not root_hosts(sid), what="the paused root's host to exit")
    path, repair = _truncated_run(sid)
    before = evidence(sid)

    assert_refused(mmo("compact", sid), path)
    assert evidence(sid) == before
    assert root_hosts(sid) == []

    repair()
    assert mmo("stop", sid, "--grace", "5").returncode == 0
    assert run.join()["status"] == "stopped"

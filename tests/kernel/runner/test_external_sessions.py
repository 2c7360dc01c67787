"""Project sessions are MMO sessions with ``session_kind = "external"`` (spec 12).

No Codex binary is reachable in these tests (``MMO_CODEX_BIN`` names a missing file and
``PATH`` has no codex): creating, resuming and reading an external session never needs
one, nor the gateway, nor agent homes. The runner process is the session's host.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.runner_core import LocalRunner, register_project, write_runner_config

from mmo_kernel.api import load_session
from mmo_kernel.runner.sessions import attach_sessions, suspend_sessions
from mmo_kernel.sessions.records import session_file
from mmo_kernel.state.audit import read_jsonl


@pytest.fixture(autouse=True)
def _no_codex(mmo_env, mmo_process_guard, monkeypatch, tmp_path):
    monkeypatch.setenv("MMO_CODEX_BIN", str(tmp_path / "no-codex-here"))
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}:/usr/bin:/bin")
    yield mmo_env


@pytest.fixture
def runner(tmp_path) -> LocalRunner:
    config = write_runner_config(tmp_path / "runner", allowed_roots=[tmp_path / "projects"])
    register_project(config, "code", tmp_path / "projects" / "code")
    register_project(config, "data", tmp_path / "projects" / "data")
    return LocalRunner(config)


def test_work_on_project_creates_a_new_external_session_without_codex(runner, tmp_path,
                                                                      mmo_env):
    (tmp_path / "projects" / "code" / "AGENTS.md").write_text("Run `make test` first.\n")
    first = runner.ok("work_on_project", {"project": "code", "instruction": "fix calc"})
    assert first == {"session_id": first["session_id"],
                     "instructions": "Run `make test` first.\n", "instructions_truncated": False}
    record = load_session(first["session_id"])
    assert record["session_kind"] == "external" and record["status"] == "running"
    assert record["cwd"] == str((tmp_path / "projects" / "code").resolve())
    assert record["profile_id"] == "job-lab" and record["root_agent"] == "lead"
    assert record["external_lead"] == "alice" and record["external_client_id"] == "laptop"
    assert record["root_client_pid"] == os.getpid()  # the runner is its host
    assert record.get("homes", {}) == {} and "codex_binary" not in record
    assert "gateway_url" not in record
    assert not (mmo_env.state_dir / "gateway" / "gateway.json").exists()
    started = [e for e in read_jsonl(session_file(record["session_id"], "audit.jsonl"))
               if e["event"] == "run_started"]
    assert [(e["session_kind"], e["external_lead"]) for e in started] == [("external", "alice")]

    # without session_id it ALWAYS starts a new one; data has no AGENTS.md
    second = runner.ok("work_on_project", {"project": "code", "instruction": "again"})
    assert second["session_id"] != first["session_id"] and "instructions" not in {
        **runner.ok("work_on_project", {"project": "data", "instruction": "x"})}


def test_resume_keeps_exactly_the_named_session(runner):
    sid = runner.ok("work_on_project", {"project": "code", "instruction": "a"})["session_id"]
    runner.ok("work_on_project", {"project": "code", "instruction": "b"})  # a newer one
    again = runner.ok("work_on_project", {"project": "code", "session_id": sid,
                                          "instruction": "continue"})
    assert again["session_id"] == sid
    for arguments, user in (({"project": "data", "session_id": sid}, "alice"),  # other project
                            ({"project": "code", "session_id": sid}, "bob"),  # other user
                            ({"project": "code", "session_id": "20990101-000000-x-abcdef"},
                             "alice"),
                            ({"project": "code", "session_id": "../../etc"}, "alice")):
        envelope = runner.fails("work_on_project", {**arguments, "instruction": "x"},
                                "session_not_found", user=user)
        assert envelope["error"] == "no such session"


def test_instructions_are_cut_at_4_kib(runner, tmp_path):
    text = "é" * 3000  # 6000 bytes of UTF-8
    (tmp_path / "projects" / "code" / "AGENTS.md").write_text(text)
    out = runner.ok("work_on_project", {"project": "code", "instruction": "x"})
    assert out["instructions_truncated"] is True
    assert out["instructions"] == "é" * 2048 and len(out["instructions"].encode()) == 4096
    (tmp_path / "projects" / "code" / "AGENTS.md").unlink()
    (tmp_path / "projects" / "code" / "AGENTS.md").symlink_to("/etc/hostname")
    out = runner.ok("work_on_project", {"project": "code", "instruction": "x"})
    assert "instructions" not in out  # a symlink is never followed


def test_the_session_is_suspended_while_no_runner_serves_it_and_running_again_after(
        runner, tmp_path):
    """A runner process that created a session and died leaves it ``suspended``; a runner
    for the same client_id marks it ``running`` on connect, ``suspended`` on a lost link."""
    script = ("import json, sys\n"
              "from support.runner_core import LocalRunner\n"
              "r = LocalRunner(__import__('pathlib').Path(sys.argv[1]))\n"
              "print(json.dumps(r.ok('work_on_project', {'project': 'code', "
              "'instruction': 'x'})))\n")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.run([sys.executable, "-c", script, str(runner.config_path)],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    sid = json.loads(proc.stdout)["session_id"]

    gone = load_session(sid)  # its runner (host) is dead: reconciliation suspends it
    assert gone["status"] == "suspended" and "mmo runner" in gone["error"]
    status = runner.ok("session_status", {"session_id": sid, "include_workspace": False})
    assert status == {"status": "suspended"}

    assert attach_sessions(runner.config) == 1
    back = load_session(sid)
    assert back["status"] == "running" and back["root_client_pid"] == os.getpid()
    assert "error" not in back and "failure" not in back

    assert suspend_sessions(runner.config, "the mmo runner is not connected") == 1
    assert load_session(sid)["status"] == "suspended"
    runner.ok("work_on_project", {"project": "code", "session_id": sid, "instruction": "y"})
    assert load_session(sid)["status"] == "running"


def test_session_status_reports_the_git_workspace(runner, tmp_path, mmo_git_workspace):
    config = write_runner_config(tmp_path / "runner2", client_id="other",
                                 allowed_roots=[mmo_git_workspace])
    register_project(config, "repo", mmo_git_workspace)
    git_runner = LocalRunner(config)
    (mmo_git_workspace / "new.txt").write_text("x")
    (mmo_git_workspace / "README.md").write_text("changed\n")
    sid = git_runner.ok("work_on_project", {"project": "repo", "instruction": "x"})["session_id"]
    status = git_runner.ok("session_status", {"session_id": sid})
    assert status == {"status": "running", "workspace": {
        "branch": "main", "dirty_paths": ["README.md", "new.txt"], "dirty_count": 2,
        "dirty_truncated": False}}
    # a session of another runner's client is unknown here
    runner.fails("session_status", {"session_id": sid}, "session_not_found")

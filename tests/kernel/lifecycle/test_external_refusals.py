"""An external project session (spec 12) has no root host of MMO's to control.

Its lead is an MCP host working through ``mmo serve``; ``mmo continue``, ``pause`` and
``detach`` refuse it in one line and change nothing; ``mmo stop`` ends it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support.runner_core import LocalRunner, register_project, write_runner_config

from mmo_kernel.api import load_session
from mmo_kernel.sessions.records import session_file


@pytest.fixture
def session_id(mmo_env, tmp_path, monkeypatch) -> str:
    monkeypatch.setenv("MMO_CODEX_BIN", str(tmp_path / "no-codex-here"))
    config = write_runner_config(tmp_path / "runner", allowed_roots=[tmp_path / "projects"])
    register_project(config, "code", tmp_path / "projects" / "code")
    return LocalRunner(config).ok("work_on_project", {"project": "code",
                                                      "instruction": "fix it"})["session_id"]


MMO = str(Path(sys.executable).parent / "mmo")


def _mmo(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([MMO, *args], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=120, check=False)


@pytest.mark.parametrize(("command", "verb"), [("continue", "continued"), ("pause", "paused"),
                                               ("detach", "detached")])
def test_controls_of_a_root_host_refuse_an_external_session(session_id, command, verb):
    before = load_session(session_id)
    audit = Path(session_file(session_id, "audit.jsonl")).read_bytes()
    done = _mmo(command, session_id)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert "external project session" in lines[0] and f"cannot be {verb}" in lines[0]
    after = load_session(session_id)
    assert (after["status"], after.get("updated_at")) == (before["status"],
                                                          before.get("updated_at"))
    assert Path(session_file(session_id, "audit.jsonl")).read_bytes() == audit


def test_stop_ends_an_external_session(session_id):
    done = _mmo("stop", session_id, "--grace", "1")
    assert done.returncode == 0, done.stderr
    assert load_session(session_id)["status"] == "stopped"

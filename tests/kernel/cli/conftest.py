"""CLI tests run the real ``mmo`` executable with private state, config and CODEX_HOME."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.waiting import wait_until  # noqa: F401 - re-exported to the tests

MMO = str(Path(sys.executable).with_name("mmo"))
TURN_PROFILE = "access-efficient-escalation-lab"   # root escalation_lead, turn mode


@pytest.fixture(autouse=True)
def _private(mmo_env, mmo_process_guard):
    yield mmo_env


@pytest.fixture
def live(mmo_standin, mmo_git_workspace):
    """A workspace for commands that start hosts; the gateway is stopped afterwards."""
    yield mmo_git_workspace
    from mmo_kernel.gateway.process import stop_gateway

    stop_gateway()


def mmo(*args: str, cwd: Path | None = None, timeout: float = 90,
        stderr=subprocess.PIPE) -> subprocess.CompletedProcess[str]:
    return subprocess.run([MMO, *args], stdout=subprocess.PIPE, stderr=stderr, text=True,
                          stdin=subprocess.DEVNULL, cwd=cwd, timeout=timeout)


def mmo_json(*args: str, cwd: Path | None = None):
    out = mmo(*args, "--json", cwd=cwd)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def one_line_error(out: subprocess.CompletedProcess[str], phrase: str) -> None:
    assert out.returncode == 1, (out.stdout, out.stderr)
    lines = out.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("mmo: error: "), out.stderr
    assert phrase in lines[0]
    assert "Traceback" not in out.stderr

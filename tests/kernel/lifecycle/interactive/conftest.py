"""Interactive sessions on the stand-in: private state, no process left behind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.waiting import wait_until  # noqa: F401 - re-exported to the tests

OFFLINE = {"*": "local_scripted"}
TURN_PROFILE = "access-efficient-escalation-lab"   # root escalation_lead: turn mode
GOAL_PROFILE = "adaptive-engineering"              # root orchestrator: goal mode


@pytest.fixture(autouse=True)
def _interactive_env(mmo_env, mmo_standin, mmo_process_guard):
    yield mmo_env
    from mmo_kernel.gateway.process import stop_gateway

    stop_gateway()


@pytest.fixture
def workspace(mmo_git_workspace) -> Path:
    return mmo_git_workspace


def invocations(record: dict) -> list[dict]:
    """What the stand-in's TUI stub recorded in the root's CODEX_HOME."""
    home = Path(record["homes"][record["root_agent"]]["home"])
    path = home / "fake-interactive-invocations.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def audit_events(session_id: str) -> list[dict]:
    from mmo_kernel.sessions.records import session_file

    path = session_file(session_id, "audit.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()]

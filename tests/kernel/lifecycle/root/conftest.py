"""Root runs use the stand-in, private state, and must leave no process behind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.waiting import Background, wait_until  # noqa: F401 - re-exported to the tests

OFFLINE = {"*": "local_scripted"}
TURN_PROFILE = "access-efficient-escalation-lab"   # root escalation_lead: turn mode
GOAL_PROFILE = "adaptive-engineering"              # root orchestrator: goal mode


@pytest.fixture(autouse=True)
def _root_env(mmo_env, mmo_standin, mmo_process_guard):
    yield mmo_env
    from mmo_kernel.gateway.process import stop_gateway

    stop_gateway()


@pytest.fixture
def workspace(mmo_git_workspace) -> Path:
    return mmo_git_workspace


def sent_methods(events_path: str | Path) -> list[str]:
    rows = [json.loads(line) for line in Path(events_path).read_text().splitlines()]
    return [r["message"].get("method") for r in rows if r["direction"] == "sent"]


def session_id_of_latest() -> str:
    from mmo_kernel.sessions.records import iter_session_records

    return wait_until(lambda: (iter_session_records() or [None])[0], what="a session")["session_id"]

"""Root runs use the stand-in, private state, and must leave no process behind."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

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


def wait_until(predicate, timeout: float = 20.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


class Background:
    """Run ``run_root_exec`` in a thread; the test acts on the session meanwhile."""

    def __init__(self, target, *args, **kwargs):
        self.result = None
        self.error = None

        def run():
            try:
                self.result = target(*args, **kwargs)
            except BaseException as exc:  # re-raised by join()
                self.error = exc

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def join(self, timeout: float = 60.0):
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "run_root_exec did not return"
        if self.error is not None:
            raise self.error
        return self.result


def session_id_of_latest() -> str:
    from mmo_kernel.session_records import iter_session_records

    return wait_until(lambda: (iter_session_records() or [None])[0], what="a session")["session_id"]

"""The shared gateway does not outlive its use (issue 13, item 11).

Real gateway processes: one whose state dir is deleted exits by itself; one with
no request and no live session for ``gateway_idle_exit_seconds`` exits and the next
start takes its port again; a live session (a real root host on the stand-in) keeps
it, and it exits once that session has ended.
"""

from __future__ import annotations

import json
import shutil

import pytest
from support.waiting import wait_until

from mmo_kernel.gateway.process import (
    ensure_gateway,
    gateway_status,
    record_path,
    revive_gateway,
    stop_gateway,
)
from mmo_kernel.state.processes import process_matches, reap_spawned

OFFLINE = {"*": "local_scripted"}
TURN_PROFILE = "access-efficient-escalation-lab"
EXIT_WAIT = 60.0
"""Generous: the gateway checks every 2 s at most; a loaded machine may be slow."""


def exited(record: dict) -> bool:
    reap_spawned()  # the test process started it: collect the zombie
    return not process_matches(record["pid"], record["start_token"])


def idle_after(mmo_env, seconds: int) -> None:
    (mmo_env.config_dir / "settings.toml").write_text(
        f"schema_version = 1\ngateway_idle_exit_seconds = {seconds}\n")


@pytest.fixture(autouse=True)
def _stop_gateway(mmo_env, mmo_process_guard):
    yield
    stop_gateway()


def test_a_gateway_whose_state_dir_is_deleted_exits_by_itself(mmo_env):
    gateway = ensure_gateway()  # default settings: it would idle for 600 s
    assert not exited(gateway)
    shutil.rmtree(mmo_env.state_dir)
    wait_until(lambda: exited(gateway), timeout=EXIT_WAIT, what="the orphaned gateway to exit")
    assert not mmo_env.state_dir.exists()  # and it did not re-create what was deleted


def test_an_idle_gateway_exits_and_the_next_start_takes_its_port(mmo_env):
    idle_after(mmo_env, 1)
    first = ensure_gateway()
    wait_until(lambda: exited(first), timeout=EXIT_WAIT, what="the idle gateway to exit")
    record = json.loads(record_path().read_text())
    assert record["exited"] == "idle" and record["pid"] == first["pid"]
    assert gateway_status()["running"] is False
    again = ensure_gateway()  # what the next session does
    assert again["reused"] is False and again["pid"] != first["pid"]
    assert again["port"] == first["port"]  # agents configured with its url keep working


def test_a_continue_revives_an_idle_gateway_but_nothing_starts_one_from_scratch(mmo_env):
    assert revive_gateway() is None and not record_path().exists()  # never started here
    idle_after(mmo_env, 1)
    first = ensure_gateway()
    wait_until(lambda: exited(first), timeout=EXIT_WAIT, what="the idle gateway to exit")
    revived = revive_gateway()
    assert revived is not None and revived["port"] == first["port"]
    assert gateway_status()["healthy"] is True


def test_a_live_session_keeps_the_gateway_until_it_ends(mmo_env, mmo_standin,
                                                        mmo_git_workspace, tmp_path,
                                                        monkeypatch):
    """Other state dirs without sessions are the clock: when two of their gateways, one
    after the other, have exited idle (same setting), ours has been idle for two idle
    periods, checking every half period."""
    from mmo_kernel.lifecycle.controls import cancel_session, load_session
    from mmo_kernel.lifecycle.root_exec import start_root
    from mmo_kernel.sessions.create import create_session

    idle_after(mmo_env, 1)
    session = create_session(TURN_PROFILE, cwd=mmo_git_workspace, bindings=OFFLINE)
    sid = session["session_id"]
    start_root(session, "slow work FAKE_SLEEP=120", (), None, 300)
    wait_until(lambda: load_session(sid).get("active_root_turn_id"), timeout=EXIT_WAIT,
               what="the root host to run a turn")
    ours = gateway_status()
    assert ours["running"]

    for tick in range(2):
        with monkeypatch.context() as other_dir:
            other_dir.setenv("MMO_STATE_DIR", str(tmp_path / f"other-state-{tick}"))
            clock = ensure_gateway()
            wait_until(lambda c=clock: exited(c), timeout=EXIT_WAIT, what="an idle clock gateway")
    assert not exited(ours), "the gateway of a live session exited"
    assert json.loads(record_path().read_text()).get("exited") is None

    cancel_session(sid)
    wait_until(lambda: exited(ours), timeout=EXIT_WAIT,
               what="the gateway to exit once its last session ended")

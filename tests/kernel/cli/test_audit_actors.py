"""Who acted, end to end on an offline session: a person at ``mmo``, the root through the
mesh, and each worker's own host are told apart in ``audit.jsonl``."""

from __future__ import annotations

import os
import subprocess

import pytest
from kernel.cli.conftest import MMO, TURN_PROFILE
from kernel.mesh.realkit import JOB_LAB, OFFLINE, Team, audit_events, ok

TYPIST = "ada-at-the-terminal"
"""The login of the person typing: the CLI names whoever runs it."""


@pytest.fixture
def team(live):
    from mmo_kernel.api import create_session

    made = Team(create_session(JOB_LAB, cwd=live, bindings=OFFLINE))
    try:
        yield made
    finally:
        made.close()


def typed(*args: str) -> subprocess.CompletedProcess[str]:
    """``mmo ARGS`` as a person at a terminal would run it, under the login ``TYPIST``."""
    env = {**os.environ, "LOGNAME": TYPIST, "USER": TYPIST}
    done = subprocess.run([MMO, *args], capture_output=True, text=True, env=env,
                          stdin=subprocess.DEVNULL, timeout=120)
    assert done.returncode == 0, done.stderr
    return done


def _by_job(session_id: str, event: str) -> dict[str, tuple[str, str]]:
    return {e["job_id"]: (e.get("actor"), e.get("actor_name"))
            for e in audit_events(session_id) if e["event"] == event}


def test_a_typed_accept_a_mesh_accept_and_the_hosts_are_told_apart(team):
    root = team.root()
    spawned = ok(root, "agents_spawn", {"agents": [
        {"agent": "plain", "task": "first"}, {"agent": "plain", "task": "second"}]})
    by_mesh, by_hand = (job["job_id"] for job in spawned["accepted"])
    assert ok(root, "agents_wait", {"job_ids": [by_mesh, by_hand], "timeout_seconds": 40})[
        "unfinished"] == []

    ok(root, "agent_result", {"job_id": by_mesh})
    ok(root, "agent_result_accept", {"job_id": by_mesh, "reason": "the root agrees"})
    typed("job", "result", by_hand)
    assert "result_state accepted" in typed(
        "job", "accept", by_hand, "--reason", "checked it myself").stdout

    mesh, person = ("mesh", "lead"), ("cli", TYPIST)
    assert _by_job(team.session_id, "agent_started") == {by_mesh: mesh, by_hand: mesh}
    assert _by_job(team.session_id, "agent_result_read") == {by_mesh: mesh, by_hand: person}
    assert _by_job(team.session_id, "agent_result_accepted") == {
        by_mesh: mesh, by_hand: person}
    # each job's end is recorded by its own host, acting as the job's agent
    assert _by_job(team.session_id, "agent_finished") == {
        by_mesh: ("agent", "plain"), by_hand: ("agent", "plain")}
    # the person's accept still acts with the root's authority, as before
    accepted = [e for e in audit_events(team.session_id)
                if e["event"] == "agent_result_accepted" and e["job_id"] == by_hand]
    assert [e["caller_agent"] for e in accepted] == ["lead"]


def test_a_typed_run_is_the_persons_and_the_roots_end_is_its_hosts(live):
    out = typed("run", TURN_PROFILE, "Summarize the repo", "--offline", "--wall", "60",
                "--cwd", str(live))
    session_id = out.stderr.splitlines()[0].split()[1]
    who = [(e["event"], e.get("agent"), e.get("actor"), e.get("actor_name"))
           for e in audit_events(session_id) if e["event"] in ("run_started", "agent_finished")]
    assert who == [("run_started", None, "cli", TYPIST),
                   ("agent_finished", "escalation_lead", "agent", "escalation_lead")]

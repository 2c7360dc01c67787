"""smoke_profile end to end on the stand-in (offline bindings): the orchestration for real."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mmo_kernel.jobs.listing import iter_job_records
from mmo_kernel.lifecycle.controls import load_session
from mmo_kernel.lifecycle.smoke import smoke_profile
from mmo_kernel.sessions.records import iter_session_records

OFFLINE = {"*": "local_scripted"}
TURN_PROFILE = "access-efficient-escalation-lab"


@pytest.fixture(autouse=True)
def _standin(mmo_standin: Path, mmo_git_workspace: Path) -> Any:
    yield
    from mmo_kernel.gateway.process import stop_gateway

    stop_gateway()


def test_a_root_that_never_says_its_marker_fails_the_smoke(mmo_git_workspace: Path) -> None:
    report = smoke_profile(TURN_PROFILE, mmo_git_workspace, bindings=OFFLINE, root_only=True)
    assert report["passed"] is False
    (root,) = report["results"]
    assert root["agent"] == "escalation_lead" and root["backend"] == "native"
    assert root["marker_present"] is False and root["cleanup"] is None
    assert root["required_tools"] == [] and root["successful_tools"] == []
    assert root["error"].startswith("marker MMO_SMOKE_OK_escalation_lead_")
    (session,) = iter_session_records()
    assert session["status"] == "completed"


def test_a_root_detached_by_the_wall_is_stopped_gracefully(
        mmo_git_workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_CODEX_APP_SERVER_INITIALIZE_DELAY", "5")
    report = smoke_profile(TURN_PROFILE, mmo_git_workspace, bindings=OFFLINE, root_only=True,
                           wall_seconds=1)
    (root,) = report["results"]
    assert report["passed"] is False
    assert root["cleanup"] == {"mode": "graceful_stop", "result": "stopped"}
    assert "smoke wall expired" in root["error"]
    (session,) = iter_session_records()
    assert load_session(session["session_id"])["status"] == "stopped"


def test_root_only_and_workers_only_exclude_each_other(mmo_git_workspace: Path) -> None:
    with pytest.raises(ValueError, match="exclude each other"):
        smoke_profile(TURN_PROFILE, mmo_git_workspace, root_only=True, workers_only=True)
    assert iter_session_records() == []


def test_workers_run_as_jobs_one_at_a_time_and_each_is_judged(mmo_git_workspace: Path) -> None:
    report = smoke_profile(TURN_PROFILE, mmo_git_workspace, bindings=OFFLINE, workers_only=True,
                           wall_seconds=60)
    rows = {r["agent"]: r for r in report["results"]}
    assert report["passed"] is False
    assert set(rows) == {"literal_scout", "routine_engineer", "flagship_escalation"}
    assert {r["backend"] for r in rows.values()} == {"mcp"}
    # a low-trust agent takes literal tasks only: its smoke task is a literal_task
    scout = next(j for j in iter_job_records() if j["agent"] == "literal_scout")
    assert scout["literal_task"]["operation"] == "summarize_supplied"
    assert rows["literal_scout"]["marker_present"] is False
    # the stand-in never says the marker, so a worker that ran still fails on evidence
    ran = rows["flagship_escalation"]
    assert ran["marker_present"] is False and "marker MMO_SMOKE_OK_" in ran["error"]
    (session,) = iter_session_records()
    assert session["status"] in ("completed", "failed")

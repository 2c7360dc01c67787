"""Snapshots are built without validation: what they hold must still be what the models say."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

MMO = str(Path(sys.executable).with_name("mmo"))


@pytest.fixture
def finished_session(mmo_env, mmo_standin, mmo_git_workspace, mmo_process_guard):
    done = subprocess.run([MMO, "run", "access-efficient-escalation-lab", "Summarize the repo",
                           "--offline", "--cwd", str(mmo_git_workspace)],
                          capture_output=True, text=True, timeout=90, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    yield done.stderr.splitlines()[0].split()[1]
    from mmo_kernel.gateway.process import stop_gateway

    stop_gateway()


def test_a_snapshot_validates_against_its_own_models_and_a_second_refresh_is_the_same_team(
        finished_session):
    from mmo_kernel.views.collector import Collector
    from mmo_kernel.views.model import TeamSnapshot

    collector = Collector()
    first = collector.refresh(show_finished=1)
    [view] = first.sessions
    assert view.session_id == finished_session and view.agents[0].timeline
    dumped = first.model_dump(mode="json")
    assert TeamSnapshot.model_validate(dumped).model_dump(mode="json") == dumped

    second = collector.refresh(show_finished=1)
    keep = {"generated_at", "refresh_ms", "bytes_read"}
    assert {k: v for k, v in second.model_dump(mode="json").items() if k not in keep} == \
        {k: v for k, v in dumped.items() if k not in keep}
    assert second.sessions[0].agents[0].timeline == view.agents[0].timeline

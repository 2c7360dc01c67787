"""A job continued after its host died gets a host with the job's own mesh identity.

The mutation run (docs/mutation-survivors.md, ``jobs.controls._relaunch`` 53/56/59-62)
showed no test looked at the relaunched host's identity: with ``MMO_CALLER_JOB_ID`` or
``MMO_CALLER_TOKEN`` missing or misnamed, every ``mmo_mesh`` call of the continued turn
would be refused. Here the continued turn calls the mesh and the call must succeed.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
from support.events import mcp_items
from support.waiting import wait_until

from mmo_kernel.jobs.records import read_job_record

JOB_LAB = Path(__file__).resolve().parents[2] / "fixtures" / "profiles" / "job-lab"
OFFLINE = {"*": "local_scripted"}


@pytest.fixture(autouse=True)
def _env(mmo_env, mmo_standin, mmo_process_guard):
    yield mmo_env
    from mmo_kernel.gateway.process import stop_gateway

    stop_gateway()


def test_the_continued_turn_of_a_relaunched_job_calls_the_mesh_as_that_job(mmo_git_workspace,
                                                                          tmp_path):
    from mmo_kernel.jobs.controls import control_job
    from mmo_kernel.jobs.spawn import spawn_job
    from mmo_kernel.jobs.waiting import wait_for_jobs
    from mmo_kernel.sessions.create import create_session

    sid = create_session(JOB_LAB, cwd=mmo_git_workspace, bindings=OFFLINE)["session_id"]
    gate = tmp_path / "gate"  # every turn of the thread holds until it exists
    job_id = spawn_job(sid, "lead", None, "plain",
                       task=f"Slow work FAKE_HOLD_UNTIL={gate}")["job_id"]
    record = wait_until(lambda: (r := read_job_record(job_id)).get("active_turn_id") and r,
                        timeout=60, what="the job to start its turn")
    os.killpg(record["runner_pgid"], signal.SIGKILL)
    assert wait_for_jobs([job_id], sid, 120)["awaiting_control"] == [job_id]

    suspended = read_job_record(job_id)
    gate.write_text("go")
    control_job(job_id, "continue", sid, "lead",
                expected_revision=suspended.get("control_revision", 0),
                input='Check in. FAKE_MCP_CALL mmo_mesh.agent_status {"job_ids": ["'
                      + job_id + '"]}')
    done = wait_for_jobs([job_id], sid, 90)
    assert done["results"][job_id]["status"] == "completed", done

    [call] = mcp_items(read_job_record(job_id)["events_path"])
    assert (call["server"], call["tool"], call["status"]) == ("mmo_mesh", "agent_status",
                                                            "completed"), call
    status = json.loads(call["result"]["content"][0]["text"])
    assert [j["job_id"] for j in status["jobs"]] == [job_id]  # the mesh knew the caller

"""The whole delegation path: a root run whose (stand-in) agent calls ``mmo_mesh`` itself.

The root's app-server starts the real ``mmo mcp`` server from its home's
``config.toml`` with the root capability from its environment, spawns a
worker (a real job host on the stand-in), waits, reads and accepts the
result; the session records all of it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.events import mcp_items

JOB_LAB = Path(__file__).resolve().parents[2] / "fixtures" / "profiles" / "job-lab"
OFFLINE = {"*": "local_scripted"}
PROMPT = "\n".join([
    "Delegate the greeting to a worker, then accept its answer.",
    'FAKE_MCP_CALL mmo_mesh.agent_spawn {"agent": "plain", "task": "Say hello"}',
    'FAKE_MCP_CALL mmo_mesh.agents_wait {"job_ids": ["{{1.job_id}}"], "timeout_seconds": 60}',
    'FAKE_MCP_CALL mmo_mesh.agent_result {"job_id": "{{1.job_id}}"}',
    'FAKE_MCP_CALL mmo_mesh.agent_result_accept '
    '{"job_id": "{{1.job_id}}", "reason": "the worker answered"}',
])


@pytest.fixture
def offline_stand_in(mmo_env, mmo_standin):
    yield mmo_env
    from mmo_kernel.gateway.process import stop_gateway

    stop_gateway()


def test_the_root_spawns_waits_reads_and_accepts_through_mmo_mesh(
        offline_stand_in, mmo_git_workspace):
    from mmo_kernel.api import list_jobs, run_root_exec
    from mmo_kernel.jobs.records import TERMINAL_JOB_STATUSES
    from mmo_kernel.sessions.records import session_file
    from mmo_kernel.state.audit import read_jsonl

    out = run_root_exec(JOB_LAB, mmo_git_workspace, PROMPT, 120, bindings=OFFLINE)
    assert out["status"] == "completed", out.get("session", {}).get("error")
    sid = out["session"]["session_id"]

    [job] = list_jobs(sid)
    assert job["agent"] == "plain" and job["caller_agent"] == "lead"
    assert job.get("caller_job_id") is None and job["status"] == "completed"
    assert job["result_state"] == "accepted" and job["disposition_reason"] == "the worker answered"

    items = mcp_items(out["events_path"])
    assert [(i["server"], i["tool"], i["status"]) for i in items] == [
        ("mmo_mesh", "agent_spawn", "completed"), ("mmo_mesh", "agents_wait", "completed"),
        ("mmo_mesh", "agent_result", "completed"),
        ("mmo_mesh", "agent_result_accept", "completed")]
    spawned, waited, read, accepted = (i["result"]["structuredContent"] for i in items)
    assert spawned["job_id"] == job["job_id"]
    assert items[1]["arguments"]["job_ids"] == [job["job_id"]]
    assert waited["unfinished"] == [] and waited["results"][job["job_id"]]["status"] == "completed"
    assert read["content"] == "FAKE_CODEX_OK" and read["result_state"] == "read"
    assert accepted["result_state"] == "accepted"

    events = read_jsonl(session_file(sid, "audit.jsonl"))
    for name in ("agent_started", "agent_result_read", "agent_result_accepted"):
        assert [e["job_id"] for e in events if e["event"] == name] == [job["job_id"]], name
    order = [e["event"] for e in events if e.get("job_id") == job["job_id"]]
    assert order.index("agent_started") < order.index("agent_result_read") < order.index(
        "agent_result_accepted")

    final = out["result"]
    assert final.startswith("FAKE_CODEX_OK")
    assert "(mcp mmo_mesh.agent_result_accept: completed" in final
    assert session_file(sid, "root-result.md").read_text() == final
    assert all(j["status"] in TERMINAL_JOB_STATUSES for j in list_jobs(sid))

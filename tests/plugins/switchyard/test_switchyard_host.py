"""A worker on the switchyard bridge calls a real third-party MCP server as a dynamic tool."""

from __future__ import annotations

import json
import sys
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def test_bridged_worker_reaches_the_mcp_server_through_dynamic_tools(
        mmo_env, mmo_standin, mmo_git_workspace):
    from mmo_kernel.gateway.process import stop_gateway
    from mmo_kernel.jobs.records import read_job_record
    from mmo_kernel.jobs.spawn import spawn_job
    from mmo_kernel.jobs.waiting import wait_for_jobs
    from mmo_kernel.sessions.create import create_session

    servers = mmo_env.config_dir / "tool-mcp.d"
    servers.mkdir()
    (servers / "fixture.toml").write_text(
        "schema_version = 1\n[tool_mcp_servers.fixture]\ntransport = \"stdio\"\n"
        f"command = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(str(FIXTURES / 'tool_mcp_server.py'))}]\n"
        "enabled_tools = [\"echo\", \"add\"]\n")
    try:
        session = create_session(FIXTURES / "profiles" / "bridge-lab", cwd=mmo_git_workspace)
        job = spawn_job(session["session_id"], "lead", None, "bridged",
                        task="Echo please FAKE_DYNAMIC_TOOL_CALL "
                             'mmo_mcp__fixture__echo {"text":"hi"}')
        waited = wait_for_jobs([job["job_id"]], session["session_id"], 40)
        assert not waited["timed_out_waiting"]
        record = read_job_record(job["job_id"])
        assert record["status"] == "completed"
        _wait_host_exit(record)
        rows = [json.loads(line)["message"] for line in
                Path(record["events_path"]).read_text().splitlines()]
        starts = [m for m in rows if m.get("method") == "thread/start"]
        offered = [t["name"] for t in starts[0]["params"]["dynamicTools"]]
        assert offered == ["mmo_mcp__fixture__echo"]
        calls = [m["params"]["item"] for m in rows if m.get("method") == "item/completed"
                 and m["params"]["item"]["type"] == "dynamicToolCall"]
        assert calls and calls[0]["status"] == "completed"
        assert "hi" in json.dumps(calls[0]["contentItems"])
    finally:
        stop_gateway()


def _wait_host_exit(record, timeout=15):
    import time

    from mmo_kernel.state.processes import process_matches

    deadline = time.monotonic() + timeout
    while process_matches(record.get("runner_pid"), record.get("runner_start_token")):
        assert time.monotonic() < deadline, "the job host did not exit"
        time.sleep(0.05)

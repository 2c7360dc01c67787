"""The official MCP Python SDK, a client nobody here wrote, drives ``mmo_mesh`` as a root agent."""

from __future__ import annotations

import asyncio
import json
import os

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError
from mmo_codex_standin.mcp_calls import server_entry

from mmo_kernel.api import root_mcp_token

ROOT_TOOLS = {"agent_spawn", "agents_spawn", "agent_status", "agents_wait", "agent_result"}


def _root_server(team) -> StdioServerParameters:
    """The server exactly as the root's Codex config declares it, with the root's identity."""
    entry = server_entry(team.home(team.session["root_agent"]), "mmo_mesh")
    env = {**os.environ, **(entry.get("env") or {}),
           "MMO_CALLER_TOKEN": root_mcp_token(team.session_id),
           "MMO_RUN_ID": team.session["current_run_id"]}
    return StdioServerParameters(command=entry["command"], args=list(entry.get("args") or []),
                                 env=env)


async def _talk(server: StdioServerParameters) -> dict:
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await session.send_ping()
        seen: dict = {"tools": {tool.name for tool in (await session.list_tools()).tools}}
        try:
            await session.call_tool("agent_spawn", {"agent": "plain", "surprise": 1})
        except MCPError as exc:  # invalid arguments: JSON-RPC -32602, reason in the message
            seen["refused"] = (exc.error.code, exc.error.message)
        spawned = await session.call_tool("agent_spawn", {"agent": "plain", "task": "say hello"})
        job_id = json.loads(spawned.content[0].text)["job_id"]
        waited = await session.call_tool("agents_wait", {"job_ids": [job_id],
                                                         "timeout_seconds": 60})
        seen["waited"] = json.loads(waited.content[0].text)
        seen["job_id"] = job_id
        return seen


def test_the_official_sdk_spawns_and_waits_for_a_worker_as_the_root(team):
    seen = asyncio.run(asyncio.wait_for(_talk(_root_server(team)), 120))
    assert ROOT_TOOLS <= seen["tools"]
    code, message = seen["refused"]
    assert code == -32602 and "surprise" in message
    waited = seen["waited"]
    assert waited["unfinished"] == [] and waited["timed_out_waiting"] is False
    assert waited["results"][seen["job_id"]]["status"] == "completed"

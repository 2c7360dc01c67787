"""Real sessions, real jobs on the stand-in, and the real ``mmo mcp`` process as each caller.

A caller's mesh server is started exactly as Codex starts it: from the
``[mcp_servers.mmo_mesh]`` entry of that agent's home ``config.toml``
(command, args, fixed ``env``, ``env_vars`` forwarded from the agent's
environment). A worker's caller token exists only in its job host's
environment (and the app-server's it starts), so it is read from there.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mmo_codex_standin.mcp_calls import server_entry, tool_server
from support.environ import agent_environ

from mmo_kernel.tools.mcp_client import McpClient, connect

JOB_LAB = Path(__file__).resolve().parents[2] / "fixtures" / "profiles" / "job-lab"
MESH_DEPTH = Path(__file__).resolve().parent / "profiles" / "mesh-depth"
NATIVE_PROFILE = "adaptive-engineering"
"""A built-in team whose root (orchestrator) has a Codex-native agent (repo_scout)."""
OFFLINE = {"*": "local_scripted"}
SUPERVISOR_KEYS = ("result_path", "events_path", "stderr_path", "socket_path",
                   "control_socket_path", "partial_result_path", "structured_result_path",
                   "full_result_path", "mcp_caller_token_hash", "root_mcp_token_hash")


def supervisor_keys(value: Any) -> list[str]:
    """Every key of ``value`` (at any depth) that names a supervisor path or capability."""
    found: list[str] = []
    if isinstance(value, dict):
        for key, inner in value.items():
            if key in SUPERVISOR_KEYS or key in ("command", "home", "workspace"):
                found.append(key)
            found.extend(supervisor_keys(inner))
    elif isinstance(value, list):
        for inner in value:
            found.extend(supervisor_keys(inner))
    return found


@dataclass
class Team:
    """One real job-lab session; ``close`` ends every mesh client the test opened."""

    session: dict[str, Any]
    clients: list[McpClient] = field(default_factory=list)

    @property
    def session_id(self) -> str:
        return self.session["session_id"]

    def home(self, agent: str) -> Path:
        return Path(self.session["homes"][agent]["home"])

    def _connect(self, agent: str, identity: dict[str, str]) -> McpClient:
        import os

        server, source = tool_server("mmo_mesh", server_entry(self.home(agent), "mmo_mesh"),
                                     {**os.environ, **identity})
        client = connect(server, source)
        self.clients.append(client)
        return client

    def root(self) -> McpClient:
        from mmo_kernel.api import root_mcp_token

        return self._connect(self.session["root_agent"], {
            "MMO_CALLER_TOKEN": root_mcp_token(self.session_id),
            "MMO_RUN_ID": self.session["current_run_id"]})

    def native(self, parent: str, native: str) -> McpClient:
        """The mesh as a root's Codex-native agent: the entry of its own config file, with
        what Codex forwards from the parent's environment (the parent's token and run)."""
        import os
        import tomllib

        from mmo_kernel.api import root_mcp_token

        assert parent == self.session["root_agent"], "only a root's natives are supported here"
        config = Path(self.session["homes"][parent]["native_agent_files"][native])
        entry = tomllib.loads(config.read_text(encoding="utf-8"))["mcp_servers"]["mmo_mesh"]
        identity = {"MMO_CALLER_TOKEN": root_mcp_token(self.session_id),
                    "MMO_RUN_ID": self.session["current_run_id"]}
        server, source = tool_server("mmo_mesh", entry, {**os.environ, **identity})
        client = connect(server, source)
        self.clients.append(client)
        return client

    def worker(self, job: dict[str, Any]) -> McpClient:
        """The mesh as the job's own agent, with the token its host was launched with."""
        env = agent_environ(job["job_id"])
        return self._connect(job["agent"], {name: env[name] for name in (
            "MMO_CALLER_TOKEN", "MMO_RUN_ID", "MMO_CALLER_JOB_ID")})

    def close(self) -> None:
        """Close the mesh clients, cancel unfinished jobs and wait for every job host to exit."""
        from mmo_kernel.api import TERMINAL_JOB_STATUSES, cancel_job, list_jobs, process_matches

        for client in self.clients:
            client.close()
        for job in list_jobs(self.session_id):
            if job["status"] not in TERMINAL_JOB_STATUSES:
                cancel_job(job["job_id"], self.session_id, reason="test teardown")
        for job in list_jobs(self.session_id):
            pid, token = job.get("runner_pid"), job.get("runner_start_token")
            wait_until(lambda p=pid, t=token: not process_matches(p, t),
                       what=f"job host of {job['job_id']} to exit")


def ok(client: McpClient, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Call a tool that must succeed; returns its structuredContent (checked against the text)."""
    import json

    result = client.call_tool(tool, arguments)
    assert result.isError is False, (tool, result.content)
    assert len(result.content) == 1 and result.content[0]["type"] == "text"
    assert json.loads(result.content[0]["text"]) == result.structuredContent
    assert supervisor_keys(result.structuredContent) == [], (tool, result.structuredContent)
    return result.structuredContent or {}


def refused(client: McpClient, tool: str, arguments: dict[str, Any]) -> str:
    """Call a tool that must fail as a tool (``isError``); returns its text."""
    result = client.call_tool(tool, arguments)
    assert result.isError is True, (tool, result.structuredContent)
    return result.content[0]["text"]


def wait_until(predicate, timeout: float = 20.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def wait_live(client: McpClient, job_id: str) -> dict[str, Any]:
    """agent_inspect until the job's host answers with an active turn."""
    def live():
        view = ok(client, "agent_inspect", {"job_id": job_id})
        return view if view["live"] and view["live"]["active_turn_id"] else None

    return wait_until(live, what=f"job {job_id} to have a live active turn")


def audit_events(session_id: str) -> list[dict[str, Any]]:
    from mmo_kernel.sessions.records import session_file
    from mmo_kernel.state.audit import read_jsonl

    return read_jsonl(session_file(session_id, "audit.jsonl"))

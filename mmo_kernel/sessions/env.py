"""``session_environment(session, agent)``: an agent's process environment from its session."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mmo_kernel.sessions.agent_env import agent_environment
from mmo_kernel.sessions.records import session_dir, session_run_id


def _known_secrets(record: Mapping[str, Any]) -> set[str]:
    """Credential names any agent of the session may use (dropped where not needed)."""
    names: set[str] = set()
    for home in (record.get("homes") or {}).values():
        for key in ("route_envs", "direct_header_envs", "tool_mcp_envs", "tool_mcp_http_envs"):
            names.update(home.get(key) or [])
    return names


def needed_credentials(record: Mapping[str, Any], agent: str) -> list[str]:
    home = (record.get("homes") or {})[agent]
    names: list[str] = []
    for key in ("route_envs", "direct_header_envs", "tool_mcp_envs", "tool_mcp_http_envs"):
        names.extend(home.get(key) or [])
    return sorted(set(names))


def session_environment(session: Mapping[str, Any], agent: str, *,
                        identity: Mapping[str, str] | None = None,
                        environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The caller's environment minus unneeded secrets, plus the agent's credentials,
    its ``CODEX_HOME`` and the MMO identity variables."""
    from mmo_kernel.tools.servers import check_http_header_value

    homes = session.get("homes") or {}
    if agent not in homes:
        raise ValueError(f"agent {agent!r} has no home in session {session['session_id']}")
    ids = {"MMO_ROOT_SESSION_ID": session["session_id"], "MMO_CALLER_AGENT": agent}
    run_id = session_run_id(session)
    if run_id:
        ids["MMO_RUN_ID"] = run_id
    ids.update(identity or {})
    env = agent_environment(codex_home=homes[agent]["home"], identity=ids,
                            needed_credentials=needed_credentials(session, agent),
                            known_secrets=_known_secrets(session), environ=environ)
    for name in homes[agent].get("tool_mcp_http_envs") or []:
        if name in env:
            check_http_header_value(name, env[name])
    return env


def root_environment(session: Mapping[str, Any]) -> dict[str, str]:
    """The root agent's environment, carrying the root MCP capability token."""
    from mmo_kernel.mesh.capabilities import read_capabilities

    caps = read_capabilities(session_dir(session["session_id"]))
    return session_environment(session, session["root_agent"],
                               identity={"MMO_CALLER_TOKEN": caps.root_mcp_token})

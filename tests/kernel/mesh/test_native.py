"""A Codex-native agent on the mesh: its own id, its parent's authority, audited (spec 07)."""

from __future__ import annotations

import tomllib
from pathlib import Path

from kernel.mesh.realkit import audit_events, ok


def _mesh_entry(config_file: str) -> dict:
    return tomllib.loads(Path(config_file).read_text())["mcp_servers"]["mmo_mesh"]


def test_a_native_agent_presents_its_own_id_with_its_parents_capability(native_team):
    from mmo_kernel.mesh.capabilities import read_capabilities
    from mmo_kernel.sessions.records import session_dir

    home = native_team.session["homes"]["orchestrator"]
    native = _mesh_entry(home["native_agent_files"]["repo_scout"])
    parent = _mesh_entry(home["config_toml"])
    minted = read_capabilities(session_dir(native_team.session_id)).native_agent_tokens
    assert native["env"]["MMO_CALLER_AGENT"] == "repo_scout", native["env"]["MMO_CALLER_AGENT"]
    assert native["env"]["MMO_CALLER_NATIVE"] == "1"
    assert native["env"]["MMO_NATIVE_CALLER_TOKEN"] == minted["orchestrator"]["repo_scout"]
    assert native["env_vars"] == parent["env_vars"] == ["MMO_CALLER_TOKEN", "MMO_RUN_ID"]
    assert native["enabled_tools"] == parent["enabled_tools"]

    scout = native_team.native("orchestrator", "repo_scout")
    assert [t.name for t in scout.list_tools()] == parent["enabled_tools"]
    job = ok(scout, "agent_spawn", {"agent": "adversarial_reviewer", "task": "say hello"})
    assert job["caller_agent"] == "orchestrator"  # the parent's authority
    started = [e for e in audit_events(native_team.session_id)
               if e["event"] == "agent_started" and e["job_id"] == job["job_id"]]
    assert len(started) == 1 and started[0]["caller_agent"] == "orchestrator"
    assert started[0].get("native_agent") == "repo_scout", started[0]
    assert (started[0]["actor"], started[0]["actor_name"]) == ("mesh", "repo_scout")

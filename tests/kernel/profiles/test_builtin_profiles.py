"""The seven built-in profiles: valid, compilable online and offline, roles as spec 02 says."""

from __future__ import annotations

import pytest

from mmo_kernel.config.catalog_load import load_catalog
from mmo_kernel.profiles.checks import skill_problems
from mmo_kernel.profiles.loading import (
    builtin_profile_ids,
    builtin_profiles_dir,
    load_profile,
    validate_profile,
)
from mmo_kernel.profiles.snapshots import (
    PROFILE_SKILL_RELATIVE_PATH,
    compile_profile,
    snapshot_contract,
    snapshot_profile,
)

BUILTIN_IDS = [
    "access-efficient-escalation-lab",
    "adaptive-engineering",
    "codex-harness-team",
    "competing-implementations-lab",
    "incident-hypothesis-triage",
    "route-resilience-lab",
    "visual-engineering",
]
MESH_TOOLS = (
    "agent_spawn",
    "agents_wait",
    "agent_result",
    "agent_result_accept",
    "agent_result_reject",
    "expected_revision",
)


def test_exactly_the_seven_builtin_profiles_ship():
    assert builtin_profile_ids() == BUILTIN_IDS


@pytest.mark.parametrize("profile_id", BUILTIN_IDS)
def test_builtin_profile_compiles_online_and_offline(profile_id):
    assert validate_profile(profile_id) == []
    online = compile_profile(profile_id)
    assert online["manifest"]["profile_id"] == profile_id
    offline = compile_profile(profile_id, bindings={"*": "local_scripted"})
    assert set(offline["manifest"]["route_ids"].values()) == {"local_scripted__scripted"}
    assert offline["manifest"]["snapshot_hash"] != online["manifest"]["snapshot_hash"]
    for agent in snapshot_profile(offline).agents.values():
        assert agent.reasoning is None and agent.allowed_reasoning_efforts == []


@pytest.mark.parametrize("profile_id", BUILTIN_IDS)
def test_builtin_guidance_skill_and_contracts_are_real(profile_id):
    folder = builtin_profiles_dir() / profile_id
    loaded = load_profile(profile_id)
    assert skill_problems(folder / "skill.md") == []
    skill = (folder / "skill.md").read_text()
    assert all(tool in skill for tool in MESH_TOOLS), profile_id
    for agent_id, agent in loaded.profile.agents.items():
        text = (folder / "agents" / f"{agent_id}.md").read_text()
        assert len(text) > 500 and "## What to return" in text and "## When to stop" in text
        if agent.output_contract:
            assert agent.output_contract in text
    referenced = {a.output_contract for a in loaded.profile.agents.values() if a.output_contract}
    shipped = {f"contracts/{p.name}" for p in (folder / "contracts").glob("*.json")}
    assert referenced == shipped


def _agents(profile_id):
    return load_profile(profile_id).profile


def test_codex_harness_team_roles():
    profile = _agents("codex-harness-team")
    integrator = profile.agents["integrator"]
    assert profile.root_agent == "integrator"
    assert integrator.execution_mode == "goal"
    assert integrator.goal_token_budget and integrator.max_goal_token_budget
    assert load_catalog().route_of(integrator.model).driver == "codex_builtin"
    assert integrator.native_agents == ["repo_scout"]


def test_adaptive_engineering_roles():
    profile = _agents("adaptive-engineering")
    assert profile.root_agent == "orchestrator"
    spec = profile.agents["implementation_specialist"]
    assert spec.execution_mode == "goal" and spec.contract_enforcement == "strict"
    assert spec.output_contract == "contracts/engineering.json"
    assert "adversarial_reviewer" in profile.agents["orchestrator"].can_spawn
    assert profile.agents["orchestrator"].native_agents == ["repo_scout"]
    workers = [a for aid, a in profile.agents.items() if aid != "orchestrator"]
    assert all(a.model.startswith("opencode_") for a in workers)
    folder = builtin_profiles_dir() / "adaptive-engineering" / "contracts"
    assert (folder / "evidence.json").is_file() and (folder / "engineering.json").is_file()


def test_incident_hypothesis_triage_roles():
    profile = _agents("incident-hypothesis-triage")
    lead = profile.agents["incident_lead"]
    assert profile.root_agent == "incident_lead" and lead.execution_mode == "goal"
    assert lead.goal_token_budget and lead.max_goal_token_budget
    assert profile.coordination.max_active_agents == 2
    runner = profile.agents["evidence_runner"]
    assert runner.execution_mode == "turn" and runner.approval_policy == "never"
    assert "max" in runner.allowed_reasoning_efforts
    assert (
        runner.contract_enforcement == "strict"
        and runner.output_contract == "contracts/evidence.json"
    )
    assert runner.native_agents  # a worker with its own native agent
    challenger = profile.agents["causal_challenger"]
    assert challenger.execution_mode == "goal" and challenger.contract_enforcement == "strict"
    assert challenger.output_contract


def test_access_efficient_escalation_lab_roles():
    profile = _agents("access-efficient-escalation-lab")
    catalog = load_catalog()
    scout = profile.agents["literal_scout"]
    assert scout.trust == "low" and scout.permissions == "read-only"
    assert not catalog.model(scout.model).has_reasoning
    engineer = profile.agents["routine_engineer"]
    assert engineer.permissions == "workspace-write" and engineer.write_scope_required
    assert engineer.max_active == 1 and profile.coordination.max_active_writers == 1
    assert profile.agents["flagship_escalation"].permissions == "read-only"


def test_visual_engineering_accepts_images():
    profile = _agents("visual-engineering")
    catalog = load_catalog()
    for agent_id in (profile.root_agent, "visual_verifier"):
        agent = profile.agents[agent_id]
        assert agent.accepts_images and "image" in catalog.model(agent.model).modalities


def test_route_resilience_lab_probes_different_routes():
    profile = _agents("route-resilience-lab")
    catalog = load_catalog()
    routes = {
        aid: catalog.model(profile.agents[aid].model).route
        for aid in ("go_route", "openrouter_route")
    }
    assert routes == {
        "go_route": "opencode_go_openai_chat",
        "openrouter_route": "openrouter_openai_chat",
    }


def test_competing_implementations_lab_candidates_are_writers_on_different_routes():
    profile = _agents("competing-implementations-lab")
    catalog = load_catalog()
    candidates = {aid: a for aid, a in profile.agents.items() if aid.endswith("_candidate")}
    assert "deepseek_candidate" in candidates and len(candidates) >= 2
    assert all(
        a.permissions == "workspace-write" and a.write_scope_required for a in candidates.values()
    )
    assert len({catalog.model(a.model).route for a in candidates.values()}) == len(candidates)


def test_builtin_strict_contracts_project_natively():
    snap = compile_profile("adaptive-engineering")
    assert snap["manifest"]["contract_transports"] == {
        "orchestrator": None,
        "implementation_specialist": "native_schema_projection",
        "adversarial_reviewer": "native_schema_projection",
        "repo_scout": None,
    }
    assert snapshot_contract(snap, "implementation_specialist")["title"] == "Engineering result"
    assert (
        (snap["directory"] / PROFILE_SKILL_RELATIVE_PATH)
        .read_text()
        .startswith("---\nname: mmo-orchestration\n")
    )

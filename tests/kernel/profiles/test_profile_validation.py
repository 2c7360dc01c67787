"""Strict validation of profile.toml and its files (spec 02, "Profiles")."""

from __future__ import annotations

import json

import pytest

from mmo_kernel.profiles.loading import load_profile, validate_profile


def problems_for(make_profile, toml=None, **kwargs) -> tuple[str, list[str]]:
    folder = make_profile(toml, **kwargs) if toml is not None else make_profile(**kwargs)
    return str(folder / "profile.toml"), validate_profile(folder)


def one_problem(make_profile, toml=None, **kwargs) -> str:
    file, problems = problems_for(make_profile, toml, **kwargs)
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"{file}: ") or problems[0].startswith(
        str(file).rsplit("/", 1)[0]
    )
    return problems[0]


def test_a_valid_profile_has_no_problems_and_loads(make_profile):
    folder = make_profile()
    assert validate_profile(folder) == []
    loaded = load_profile(folder)
    assert loaded.profile.root_agent == "lead" and loaded.folder == folder.resolve()
    assert loaded.origin == "path"
    assert load_profile(str(folder / "profile.toml")).profile.id == "tiny"


def test_bad_toml_names_the_file_and_line(base_toml, make_profile):
    file, problems = problems_for(
        make_profile, base_toml.replace('root_agent = "lead"', "root_agent = ")
    )
    assert len(problems) == 1
    assert problems[0].startswith(f"{file}: (document): invalid TOML") and "line 4" in problems[0]


def test_unknown_key_names_file_and_key(base_toml, make_profile):
    toml = base_toml.replace('reasoning = "high"', 'reasoning = "high"\nreasonning = "low"')
    file = make_profile(toml) / "profile.toml"
    assert validate_profile(file.parent) == [f"{file}: agents.lead.reasonning: unknown key"]


def test_unknown_top_level_and_coordination_keys(base_toml, make_profile):
    toml = base_toml.replace("max_depth = 1", "max_depth = 1\nmax_agents = 3").replace(
        'id = "tiny"', 'id = "tiny"\nteam = 1'
    )
    file, problems = problems_for(make_profile, toml)
    assert sorted(problems) == [
        f"{file}: coordination.max_agents: unknown key",
        f"{file}: team: unknown key",
    ]


def test_load_profile_raises_value_error_listing_problems(base_toml, make_profile):
    folder = make_profile(base_toml.replace('root_agent = "lead"', 'root_agent = "boss"'))
    with pytest.raises(ValueError, match="root_agent: unknown agent 'boss'"):
        load_profile(folder)


@pytest.mark.parametrize("value", ["true", "2", '"1"'])
def test_schema_version_is_strict(base_toml, make_profile, value):
    message = one_problem(
        make_profile, base_toml.replace("schema_version = 1", f"schema_version = {value}")
    )
    assert "schema_version: unsupported profile schema version" in message


def test_types_are_exact(base_toml, make_profile):
    message = one_problem(
        make_profile, base_toml.replace("goal_token_budget = 1000", "goal_token_budget = true")
    )
    assert "agents.lead.goal_token_budget:" in message


def test_goal_mode_requires_a_budget(base_toml, make_profile):
    message = one_problem(make_profile, base_toml.replace("goal_token_budget = 1000\n", ""))
    assert "agents.lead: goal_token_budget is required in goal mode" in message


def test_goal_ceiling_must_not_be_below_the_budget(base_toml, make_profile):
    toml = base_toml.replace(
        "goal_token_budget = 1000", "goal_token_budget = 1000\nmax_goal_token_budget = 999"
    )
    assert "max_goal_token_budget (999) must be >= goal_token_budget (1000)" in one_problem(
        make_profile, toml
    )


def test_turn_mode_takes_no_goal_budget(base_toml, make_profile):
    toml = base_toml.replace(
        'output_contract = "contracts/result.json"',
        'output_contract = "contracts/result.json"\ngoal_token_budget = 5',
    )
    assert "only apply to execution_mode" in one_problem(make_profile, toml)


def test_reasoning_must_be_allowed(base_toml, make_profile):
    message = one_problem(
        make_profile, base_toml.replace('reasoning = "high"', 'reasoning = "low"')
    )
    assert "agents.lead.reasoning: 'low' must be one of allowed_reasoning_efforts" in message


def test_reasoning_must_be_a_level_of_the_model(base_toml, make_profile):
    toml = base_toml.replace('["medium", "high"]', '["medium", "high", "max"]')
    assert "agents.lead.allowed_reasoning_efforts: ['max'] not supported by model" in one_problem(
        make_profile, toml
    )


def test_a_reasoning_none_model_takes_no_reasoning(base_toml, make_profile):
    toml = base_toml.replace(
        'model = "opencode_go_openai_chat__glm_5_1"',
        'model = "openrouter_openai_chat__qwen3_coder"\nreasoning = "high"',
    )
    message = one_problem(make_profile, toml)
    assert (
        "agents.worker.reasoning: model openrouter_openai_chat__qwen3_coder has reasoning none"
        in message
    )


def test_unknown_model(base_toml, make_profile):
    message = one_problem(
        make_profile, base_toml.replace("opencode_go_openai_chat__glm_5_1", "nope__model")
    )
    assert "agents.worker.model: unknown model 'nope__model'" in message


def test_references_must_name_existing_agents(base_toml, make_profile):
    toml = base_toml.replace(
        'can_spawn = ["worker"]', 'can_spawn = ["worker", "ghost"]\nnative_agents = ["spook"]'
    )
    file, problems = problems_for(make_profile, toml)
    assert f"{file}: agents.lead.can_spawn: unknown agent 'ghost'; agents: lead, worker" in problems
    assert (
        f"{file}: agents.lead.native_agents: unknown agent 'spook'; agents: lead, worker"
        in problems
    )


def test_root_agent_must_exist(base_toml, make_profile):
    file, problems = problems_for(
        make_profile, base_toml.replace('root_agent = "lead"', 'root_agent = "boss"')
    )
    assert f"{file}: root_agent: unknown agent 'boss'; agents: lead, worker" in problems


def test_unreachable_agents_are_reported(base_toml, make_profile):
    message = one_problem(make_profile, base_toml.replace('can_spawn = ["worker"]\n', ""))
    assert "agents.worker: unreachable" in message


def test_delegation_depth_limits_worker_spawns(base_toml, make_profile):
    toml = base_toml.replace(
        'output_contract = "contracts/result.json"',
        'output_contract = "contracts/result.json"\ncan_spawn = ["helper"]',
    )
    toml += '\n[agents.helper]\nmodel = "local_scripted__scripted"\n'
    guidance = {"lead": "lead", "worker": "work", "helper": "help"}
    message = one_problem(make_profile, toml, guidance=guidance)
    assert (
        "agents.worker.can_spawn: worker runs at delegation depth 1; coordination.max_depth = 1"
        in message
    )
    assert (
        validate_profile(
            make_profile(
                toml.replace("max_depth = 1", "max_depth = 2"), name="deeper", guidance=guidance
            )
        )
        == []
    )


def test_control_grants_name_agents_and_known_actions(base_toml, make_profile):
    toml = base_toml.replace(
        'output_contract = "contracts/result.json"',
        'output_contract = "contracts/result.json"\n'
        'controls = { lead = { actions = ["inspect"] }, ghost = { actions = ["steer"] } }',
    )
    file, problems = problems_for(make_profile, toml)
    assert problems == [
        f"{file}: agents.worker.controls: unknown agent 'ghost'; agents: lead, worker"
    ]


@pytest.mark.parametrize(
    ("action", "phrase"),
    [("cancel", "never grants cancellation"), ("explode", "unknown control action 'explode'")],
)
def test_control_actions_come_from_the_action_list(base_toml, make_profile, action, phrase):
    toml = base_toml.replace(
        'can_spawn = ["worker"]',
        f'can_spawn = ["worker"]\ncontrols = {{ worker = {{ actions = ["{action}"] }} }}',
    )
    message = one_problem(make_profile, toml)
    assert "agents.lead.controls.worker.actions:" in message and phrase in message


def test_low_trust_agents_are_read_only_with_literal_operations(base_toml, make_profile):
    toml = base_toml.replace(
        'output_contract = "contracts/result.json"',
        'output_contract = "contracts/result.json"\ntrust = "low"\nliteral_operations = ["locate"]',
    )
    assert "a low-trust agent is read-only" in one_problem(make_profile, toml)
    no_ops = toml.replace(
        'permissions = "workspace-write"\noutput', 'permissions = "read-only"\noutput'
    ).replace('literal_operations = ["locate"]', "")
    assert "needs literal_operations" in one_problem(make_profile, no_ops, name="noops")
    bad_op = no_ops + "\n"
    bad_op = bad_op.replace('trust = "low"', 'trust = "low"\nliteral_operations = ["rm_rf"]')
    assert "unknown literal_task operation 'rm_rf'" in one_problem(
        make_profile, bad_op, name="badop"
    )


def test_output_contract_file_must_exist(base_toml, make_profile):
    toml = base_toml.replace("contracts/result.json", "contracts/missing.json")
    message = one_problem(make_profile, toml)
    assert "agents.worker.output_contract: contracts/missing.json not found" in message


def test_output_contract_path_is_confined_to_contracts(base_toml, make_profile):
    message = one_problem(
        make_profile, base_toml.replace("contracts/result.json", "../result.json")
    )
    assert "must be 'contracts/<name>.json'" in message


def test_output_contract_must_be_valid_json_schema(make_profile):
    bad_schema = {"type": "object", "properties": {"x": {"type": "strng"}}}
    message = one_problem(make_profile, contracts={"result.json": bad_schema})
    assert "agents.worker.output_contract: result.json is not a valid JSON Schema" in message
    message = one_problem(make_profile, contracts={"result.json": "{not json"}, name="notjson")
    assert "result.json is not valid JSON" in message


def test_a_shared_contract_is_found_in_mmo_contracts(base_toml, make_profile):
    toml = base_toml.replace("contracts/result.json", "contracts/review.json")
    assert validate_profile(make_profile(toml)) == []


def test_unknown_host_driver_lists_installed_names(base_toml, make_profile):
    toml = base_toml.replace(
        'output_contract = "contracts/result.json"',
        'output_contract = "contracts/result.json"\nhost = "kubernetes"',
    )
    message = one_problem(make_profile, toml)
    assert "agents.worker.host: unknown execution hosts driver 'kubernetes'" in message
    assert "installed: app_server" in message


def test_host_options_are_validated_by_the_host_driver(base_toml, make_profile):
    toml = base_toml.replace(
        'output_contract = "contracts/result.json"',
        'output_contract = "contracts/result.json"\nhost_options = { cpus = 2 }',
    )
    message = one_problem(make_profile, toml)
    assert "agents.worker.host_options" in message and "cpus" in message


def test_unknown_isolation_driver_lists_installed_names(base_toml, make_profile):
    toml = base_toml.replace("max_depth = 1", 'max_depth = 1\nisolation = "docker"')
    message = one_problem(make_profile, toml)
    assert "coordination.isolation: unknown workspace isolation driver 'docker'" in message
    assert "copy, git_worktree" in message


def test_copy_isolation_is_accepted(base_toml, make_profile):
    toml = base_toml.replace("max_depth = 1", 'max_depth = 1\nisolation = "copy"')
    assert validate_profile(make_profile(toml)) == []


def test_tool_bridge_is_resolved_by_name(base_toml, make_profile):
    toml = base_toml.replace(
        'output_contract = "contracts/result.json"',
        'output_contract = "contracts/result.json"\n'
        'tool_mcp_servers = { web = { required = false, bridge = "carrier_pigeon" } }',
    )
    message = one_problem(make_profile, toml)
    assert (
        "agents.worker.tool_mcp_servers.web.bridge: unknown tool bridges driver 'carrier_pigeon'"
        in message
    )
    assert "native_mcp, switchyard" in message


def test_required_tool_servers_must_be_declared(base_toml, make_profile, mmo_env):
    toml = base_toml.replace(
        'output_contract = "contracts/result.json"',
        'output_contract = "contracts/result.json"\n'
        'tool_mcp_servers = { firecrawl = { enabled_tools = ["search"], bridge = "switchyard" } }',
    )
    message = one_problem(make_profile, toml)
    assert "agents.worker.tool_mcp_servers.firecrawl: no tool MCP server 'firecrawl'" in message
    declared = mmo_env.config_dir / "tool-mcp.d"
    declared.mkdir()
    (declared / "web.toml").write_text(
        'schema_version = 1\n[tool_mcp_servers.firecrawl]\ntransport = "streamable_http"\n'
        'url = "https://example.invalid/mcp"\nenabled_tools = ["search", "scrape"]\n',
        encoding="utf-8",
    )
    assert validate_profile(make_profile(toml, name="declared")) == []
    wrong_tool = toml.replace('["search"]', '["crawl"]')
    assert "['crawl'] are not enabled tools" in one_problem(
        make_profile, wrong_tool, name="wrongtool"
    )


def test_every_agent_needs_guidance(make_profile):
    folder = make_profile(guidance={"lead": "# Lead\n"})
    assert validate_profile(folder) == [
        f"{folder / 'profile.toml'}: agents.worker: "
        "guidance file agents/worker.md is missing or empty"
    ]


def test_the_skill_needs_the_team_skill_front_matter(make_profile):
    folder = make_profile(skill="---\nname: my-skill\ndescription: x\n---\nbody\n")
    assert validate_profile(folder) == [
        f"{folder / 'skill.md'}: name: must be 'mmo-orchestration' (found 'my-skill')"
    ]
    missing = make_profile(skill=None, name="noskill")
    assert (
        "skill.md: (document): the team's orchestration skill (skill.md) is missing"
        in validate_profile(missing)[0]
    )


def test_images_need_a_model_that_takes_them(base_toml, make_profile):
    toml = base_toml.replace(
        'output_contract = "contracts/result.json"',
        'output_contract = "contracts/result.json"\naccepts_images = true',
    )
    assert (
        "agents.worker.accepts_images: model opencode_go_openai_chat__glm_5_1 does not take images"
        in (one_problem(make_profile, toml))
    )


def test_every_problem_is_reported_at_once(base_toml, make_profile):
    toml = base_toml.replace('reasoning = "high"', 'reasoning = "low"').replace(
        "opencode_go_openai_chat__glm_5_1", "nope__x"
    )
    _file, problems = problems_for(make_profile, toml, guidance={"lead": "x"})
    assert len(problems) == 3


def test_contract_files_are_json_schema_draft_checked(make_profile):
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "required": "summary",
    }
    message = one_problem(make_profile, contracts={"result.json": json.dumps(schema)})
    assert "not a valid JSON Schema at required" in message

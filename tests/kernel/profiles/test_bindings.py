"""Offline and explicit model bindings at compile time (spec 02, 11 --offline)."""

from __future__ import annotations

import pytest

from mmo_kernel.profiles.snapshots import compile_profile, snapshot_profile


def test_star_binding_maps_every_agent_to_the_scripted_model(make_profile):
    snap = compile_profile(make_profile(), bindings={"*": "local_scripted"})
    assert set(snap["manifest"]["route_ids"].values()) == {"local_scripted__scripted"}
    resolved = snapshot_profile(snap)
    for agent in resolved.agents.values():
        assert agent.reasoning is None and agent.allowed_reasoning_efforts == []
        assert agent.route == "local_scripted" and agent.route_driver == "scripted"
    assert resolved.bindings == {"*": "local_scripted"}
    assert resolved.agents["lead"].goal_token_budget == 1000


def test_bound_snapshots_differ_from_unbound_ones(make_profile):
    folder = make_profile()
    assert (
        compile_profile(folder)["manifest"]["snapshot_hash"]
        != compile_profile(folder, bindings={"*": "local_scripted"})["manifest"]["snapshot_hash"]
    )


def test_an_agent_binding_wins_over_the_star(make_profile):
    snap = compile_profile(
        make_profile(),
        bindings={"*": "local_scripted", "worker": "opencode_go_openai_chat__deepseek_v4_pro"},
    )
    assert snap["manifest"]["route_ids"] == {
        "lead": "local_scripted__scripted",
        "worker": "opencode_go_openai_chat__deepseek_v4_pro",
    }
    worker = snapshot_profile(snap).agents["worker"]
    assert worker.reasoning == "high" and "max" in worker.allowed_reasoning_efforts


def test_rebinding_keeps_only_efforts_the_new_model_takes(make_profile):
    # lead allows medium/high; the DeepSeek flash model only has high/max
    snap = compile_profile(
        make_profile(), bindings={"lead": "opencode_go_openai_chat__deepseek_v4_flash"}
    )
    lead = snapshot_profile(snap).agents["lead"]
    assert lead.reasoning == "high" and lead.allowed_reasoning_efforts == ["high"]


def test_a_route_with_a_default_model_can_be_bound_by_route_id(make_profile):
    snap = compile_profile(make_profile(), bindings={"worker": "openrouter_openai_chat"})
    assert snap["manifest"]["route_ids"]["worker"] == "openrouter_openai_chat__qwen3_coder"


@pytest.mark.parametrize(
    ("bindings", "phrase"),
    [
        ({"ghost": "local_scripted"}, "bindings: unknown agent 'ghost'"),
        ({"*": "moon_route"}, "unknown route or model 'moon_route'"),
        ({"*": 3}, "bindings must map agent ids"),
    ],
)
def test_bad_bindings_are_value_errors(make_profile, mmo_env, bindings, phrase):
    with pytest.raises(ValueError, match=phrase):
        compile_profile(make_profile(), bindings=bindings)
    assert not (mmo_env.state_dir / "snapshots").exists() or not any(
        (mmo_env.state_dir / "snapshots").iterdir()
    )


def test_a_route_without_default_needs_a_model_key(make_profile, mmo_env):
    folder = mmo_env.config_dir / "catalog.d"
    folder.mkdir()
    (folder / "two.toml").write_text(
        """\
schema_version = 1
[routes.two_models]
name = "two"
driver = "codex_custom"
api_operator = "x"
access_product = "x"
base_url = "https://example.invalid/v1"
[models.two_models__a]
route = "two_models"
upstream_id = "a"
maker = "x"
[models.two_models__b]
route = "two_models"
upstream_id = "b"
maker = "x"
""",
        encoding="utf-8",
    )
    with pytest.raises(
        ValueError, match="route 'two_models' has several models and no default_model"
    ):
        compile_profile(make_profile(), bindings={"worker": "two_models"})
    snap = compile_profile(make_profile(name="again"), bindings={"worker": "two_models__b"})
    assert snap["manifest"]["route_ids"]["worker"] == "two_models__b"


def test_a_binding_that_breaks_a_rule_is_reported_like_a_profile_problem(make_profile, base_toml):
    toml = base_toml.replace(
        'output_contract = "contracts/result.json"',
        'output_contract = "contracts/result.json"\naccepts_images = true',
    )
    folder = make_profile(
        toml.replace(
            "opencode_go_openai_chat__glm_5_1", "opencode_zen_anthropic_messages__claude_sonnet_4_5"
        )
    )
    with pytest.raises(ValueError, match="accepts_images: model opencode_go_openai_chat__glm_5_1"):
        compile_profile(folder, bindings={"worker": "opencode_go_openai_chat__glm_5_1"})

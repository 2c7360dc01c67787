"""Which tools each caller is offered, and the shape of their schemas and annotations."""

from __future__ import annotations

import copy

import jsonschema
import pytest
from kernel.mesh.meshkit import PROFILE, make_session, req, session_call

from mmo_kernel.mesh.surface import AGENT_MCP_CONTROL_TOOLS, tools_for

CONTROLS = [
    "agent_inspect",
    "agent_trace",
    "agent_trace_record",
    "agent_steer",
    "agent_interrupt",
    "agent_pause",
    "agent_continue",
    "agent_detach",
    "agent_stop",
    "agent_compact",
    "agent_finalize",
    "agent_set_effort",
    "agent_respond",
    "agent_fork",
]
ROOT = [
    "agent_spawn",
    "agents_spawn",
    "agent_status",
    "agents_wait",
    "agent_result",
    "agent_cancel",
    "agent_result_accept",
    "agent_result_reject",
    "agent_patch_integrate",
    *CONTROLS,
]


def _tools(env):
    run = session_call(env, req(2, "tools/list"))
    return {t["name"]: t for t in run.by_id(2)["result"]["tools"]}


def test_control_tools_constant_is_the_spec_list():
    assert list(AGENT_MCP_CONTROL_TOOLS) == CONTROLS


def test_root_gets_every_tool_in_order(mmo_env):
    session = make_session(mmo_env.state_dir)
    assert list(_tools(session.root_env())) == ROOT


def test_tainted_root_loses_spawn_and_integrate(mmo_env):
    session = make_session(mmo_env.state_dir, tainted=True)
    names = list(_tools(session.root_env()))
    assert names == [
        n for n in ROOT if n not in {"agent_spawn", "agents_spawn", "agent_patch_integrate"}
    ]


def test_worker_that_may_spawn_gets_spawn_and_cancel_but_no_disposition(mmo_env):
    session = make_session(mmo_env.state_dir)
    job_id, token = session.add_job("builder", depth=1)
    names = list(_tools(session.worker_env("builder", job_id, token)))
    assert names == [
        "agent_spawn",
        "agents_spawn",
        "agent_status",
        "agents_wait",
        "agent_result",
        "agent_cancel",
        *CONTROLS,
    ]


def test_worker_at_max_depth_gets_no_spawn_tools(mmo_env):
    session = make_session(mmo_env.state_dir)
    job_id, token = session.add_job("builder", depth=2)
    assert list(_tools(session.worker_env("builder", job_id, token))) == [
        "agent_status",
        "agents_wait",
        "agent_result",
        *CONTROLS,
    ]


def test_worker_without_can_spawn_gets_read_and_control_tools_only(mmo_env):
    session = make_session(mmo_env.state_dir)
    job_id, token = session.add_job("reviewer", depth=1)
    assert list(_tools(session.worker_env("reviewer", job_id, token))) == [
        "agent_status",
        "agents_wait",
        "agent_result",
        *CONTROLS,
    ]


def test_worker_in_a_tainted_session_cannot_spawn(mmo_env):
    session = make_session(mmo_env.state_dir, tainted=True)
    job_id, token = session.add_job("builder", depth=1)
    names = list(_tools(session.worker_env("builder", job_id, token)))
    assert "agent_spawn" not in names and "agents_spawn" not in names


def test_root_of_a_profile_with_max_depth_zero_cannot_spawn(mmo_env):
    profile = copy.deepcopy(PROFILE)
    profile["coordination"]["max_depth"] = 0
    session = make_session(mmo_env.state_dir, profile=profile)
    names = list(_tools(session.root_env()))
    assert "agent_spawn" not in names and "agent_cancel" in names


def test_spawn_schema_is_plain_and_lists_exactly_the_spawnable_agents_in_profile_order(mmo_env):
    session = make_session(mmo_env.state_dir)
    tools = _tools(session.root_env())
    schema = tools["agent_spawn"]["inputSchema"]
    assert schema["type"] == "object" and schema["additionalProperties"] is False
    assert schema["properties"]["agent"]["enum"] == ["builder", "reviewer", "scout"]
    assert schema["required"] == ["agent"]
    assert set(schema["properties"]) == {
        "agent",
        "task_kind",
        "task",
        "mode",
        "write_scopes",
        "literal_task",
        "attachments",
    }
    text = repr(schema)
    for forbidden in ("oneOf", "anyOf", "$ref", "$defs", "'null'"):
        assert forbidden not in text
    items = tools["agents_spawn"]["inputSchema"]["properties"]["agents"]["items"]
    assert items == schema
    job_id, token = session.add_job("builder", depth=1)
    worker = _tools(session.worker_env("builder", job_id, token))
    assert worker["agent_spawn"]["inputSchema"]["properties"]["agent"]["enum"] == ["scout"]


def test_every_schema_is_a_valid_closed_object_schema(mmo_env):
    session = make_session(mmo_env.state_dir)
    for name, tool in _tools(session.root_env()).items():
        schema = tool["inputSchema"]
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["type"] == "object" and schema["additionalProperties"] is False, name
        assert "oneOf" not in repr(schema), name


def test_annotations_are_explicit_booleans_with_the_spec_hints(mmo_env):
    session = make_session(mmo_env.state_dir)
    tools = _tools(session.root_env())
    for name, tool in tools.items():
        hints = tool["annotations"]
        for key in ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"):
            assert isinstance(hints[key], bool), (name, key)
    for name in ("agent_status", "agents_wait", "agent_result"):
        assert tools[name]["annotations"]["readOnlyHint"] is False
    for name in ("agent_patch_integrate", "agent_cancel"):
        assert tools[name]["annotations"]["destructiveHint"] is True
    assert tools["agent_inspect"]["annotations"]["readOnlyHint"] is True


def test_arguments_use_the_api_keyword_names(mmo_env):
    session = make_session(mmo_env.state_dir)
    tools = _tools(session.root_env())
    props = {name: set(t["inputSchema"]["properties"]) for name, t in tools.items()}
    assert props["agent_status"] == {"job_ids"}
    assert props["agents_wait"] == {
        "job_ids",
        "timeout_seconds",
        "include_results",
        "after_revision",
    }
    assert props["agent_result"] == {"job_id", "cursor", "max_chars"}
    for name in (
        "agent_cancel",
        "agent_result_accept",
        "agent_result_reject",
        "agent_patch_integrate",
    ):
        assert props[name] == {"job_id", "reason"}
    for name in CONTROLS:
        if name not in ("agent_inspect", "agent_trace", "agent_trace_record"):
            assert {"job_id", "expected_revision"} <= props[name], name
    assert props["agent_steer"] == {"job_id", "expected_revision", "input"}
    assert props["agent_set_effort"] == {"job_id", "expected_revision", "effort"}
    assert props["agent_respond"] == {"job_id", "expected_revision", "request_id", "response"}


def test_tools_for_rejects_an_unknown_kind():
    with pytest.raises(ValueError, match="root, worker"):
        tools_for("admin")


def test_no_progress_tools_exist():
    names = tools_for("root", spawnable=["a"])
    assert "agent_progress" not in names and "agent_progress_history" not in names

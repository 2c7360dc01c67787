"""Smoke diagnostics: evidence from event logs, planning, judging and the report."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from mmo_kernel.lifecycle.smoke import (
    SmokeTarget,
    _successful_mcp_tools,
    judge,
    judge_root,
    plan_smoke,
    smoke_prompt,
    smoke_report,
    smoke_task,
)
from mmo_kernel.profiles.schema import AgentSpec
from mmo_kernel.tools.servers import ToolServer

ALIASES = {"mmo_mcp__repo_search__query": "repo.search.query"}


def _row(method: str, item: dict[str, Any], direction: str = "received") -> dict[str, Any]:
    return {"recorded_at": "2025-01-01T00:00:00Z", "direction": direction,
            "message": {"method": method, "params": {"threadId": "t", "turnId": "u",
                                                     "item": item}}}


def _mcp(status: str, server: str = "web", tool: str = "fetch", **extra: Any) -> dict[str, Any]:
    return {"type": "mcpToolCall", "id": "c", "server": server, "tool": tool, "arguments": {},
            "result": extra.pop("result", {"content": []}), "error": extra.pop("error", None),
            "status": status, **extra}


def _dynamic(status: str, tool: str, success: bool | None) -> dict[str, Any]:
    return {"type": "dynamicToolCall", "id": "d", "namespace": None, "tool": tool,
            "arguments": {}, "status": status, "contentItems": [], "success": success}


def _write(path: Path, rows: list[Any]) -> Path:
    lines = [json.dumps(r) if not isinstance(r, str) else r for r in rows]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_only_successful_completed_calls_count_as_tool_evidence(tmp_path: Path) -> None:
    log = _write(tmp_path / "events.jsonl", [
        _row("item/started", _mcp("inProgress", tool="started_only")),
        _row("item/completed", _mcp("completed")),
        _row("item/completed", _mcp("completed", tool="errored",
                                    error={"message": "MCP tool call requires approval"})),
        _row("item/completed", _mcp("failed", tool="failed")),
        _row("item/completed", _mcp("completed", tool="is_error",
                                    result={"content": [], "isError": True})),
        _row("item/completed", {**_mcp("completed", server="ida", tool="inspect"),
                                "type": "mcp_tool_call"}),
        _row("item/completed", _dynamic("completed", "mmo_mcp__repo_search__query", True)),
        _row("item/completed", _dynamic("failed", "mmo_mcp__repo_search__other", False)),
        _row("item/completed", _dynamic("completed", "not_an_mcp_tool", True)),
        _row("item/completed", _mcp("completed", tool="echoed_back"), direction="sent"),
        '{"torn": ',
    ])
    assert _successful_mcp_tools(log, ALIASES) == {"web.fetch", "ida.inspect",
                                                   "repo.search.query"}
    assert _successful_mcp_tools(tmp_path / "missing.jsonl", ALIASES) == set()


def test_a_failed_dynamic_call_of_an_aliased_tool_is_not_evidence(tmp_path: Path) -> None:
    log = _write(tmp_path / "events.jsonl", [
        _row("item/completed", _dynamic("failed", "mmo_mcp__repo_search__query", False))])
    assert _successful_mcp_tools(log, ALIASES) == set()


def _agent(**fields: Any) -> AgentSpec:
    return AgentSpec.model_validate({"model": "m", **fields})


def _team() -> tuple[SimpleNamespace, dict[str, ToolServer]]:
    servers = {"web": ToolServer(name="web", transport="stdio", command="/bin/true",
                                 enabled_tools=["fetch", "search"]),
               "repo.search": ToolServer(name="repo.search", transport="stdio",
                                         command="/bin/true", enabled_tools=["query"])}
    agents = {
        "lead": _agent(can_spawn=["coder"], native_agents=["scout"],
                       tool_mcp_servers={"web": {"enabled_tools": ["fetch"]}}),
        "scout": _agent(),
        "coder": _agent(tool_mcp_servers={
            "repo.search": {"bridge": "switchyard"},
            "web": {"required": False}}),
    }
    return SimpleNamespace(root_agent="lead", agents=agents), servers


def test_the_plan_exercises_natives_through_their_parent_and_workers_through_the_mesh() -> None:
    profile, servers = _team()
    plan = plan_smoke(profile, servers, nonce="n1")
    assert [(t.agent, t.backend, t.parent) for t in plan] == [
        ("lead", "native", None), ("scout", "native", "lead"), ("coder", "mcp", None)]
    lead, _, coder = plan
    assert lead.required_tools == ["web.fetch"] and lead.aliases == {}
    assert coder.required_tools == ["repo.search.query"]  # web is optional for the coder
    assert coder.aliases == {"mmo_mcp__repo_search__query": "repo.search.query"}
    assert coder.marker == "MMO_SMOKE_OK_coder_n1"
    assert [t.agent for t in plan_smoke(profile, servers, root_only=True)] == ["lead", "scout"]
    # workers_only: every agent but the root itself, the root's native agents included
    assert [(t.agent, t.parent) for t in plan_smoke(profile, servers, workers_only=True)] == [
        ("scout", "lead"), ("coder", None)]
    with pytest.raises(ValueError, match="root_only and workers_only exclude each other"):
        plan_smoke(profile, servers, root_only=True, workers_only=True)


def test_the_prompt_names_the_tools_the_native_agents_and_the_marker() -> None:
    profile, servers = _team()
    lead, scout, _ = plan_smoke(profile, servers, nonce="n2")
    prompt = smoke_prompt(lead, [scout])
    assert "web.fetch" in prompt and "scout" in prompt
    assert "MMO_SMOKE_OK_scout_n2" in prompt and prompt.rstrip().endswith("MMO_SMOKE_OK_lead_n2.")


def test_the_prompt_carries_a_script_that_calls_the_tools_and_spawns_the_natives() -> None:
    """What the offline scripted model runs: each required tool (``try``), each native
    spawned with its own marker task and waited for, and a final answer that quotes
    the natives' replies rather than their markers."""
    profile, servers = _team()
    lead, scout, _ = plan_smoke(profile, servers, nonce="n3")
    prompt = smoke_prompt(lead, [scout])
    script = prompt.split("```mmo-script\n", 1)[1].split("\n```", 1)[0].splitlines()
    assert script[0] == "try mcp web.fetch minimal"
    spawn = json.loads(script[1].removeprefix("spawn1: tool multi_agent_v1.spawn_agent "))
    assert spawn["agent_type"] == "scout"
    assert spawn["message"] == smoke_prompt(scout)
    assert "say MMO_SMOKE_OK_scout_n3" in spawn["message"]
    wait = json.loads(script[2].removeprefix("wait1: tool multi_agent_v1.wait_agent "))
    assert wait["targets"] == ["{{spawn1.agent_id}}"]
    assert script[3] == "say MMO_SMOKE_OK_lead_n3 {{wait1}}"
    coder = plan_smoke(profile, servers, nonce="n3")[2]  # a switchyard-bridged tool
    assert "try tool mmo_mcp__repo_search__query minimal" in smoke_prompt(coder).splitlines()


def test_a_low_trust_worker_gets_its_smoke_task_as_a_literal_task() -> None:
    scout = _agent(trust="low", permissions="read-only",
                   literal_operations=["summarize_supplied", "locate"])
    profile = SimpleNamespace(root_agent="lead", agents={
        "lead": _agent(can_spawn=["scout"]), "scout": scout})
    (target,) = plan_smoke(profile, {}, workers_only=True, nonce="n4")
    task = smoke_task(target, [])
    assert task == {"literal_task": {"operation": "summarize_supplied",
                                     "text": smoke_prompt(target), "max_points": 1}}
    locate_only = SmokeTarget("finder", "mcp", "M", [], literal_operations=("locate",))
    with pytest.raises(ValueError, match="allows only literal operations locate"):
        smoke_task(locate_only, [])
    assert smoke_task(SmokeTarget("coder", "mcp", "M", []), []) == {
        "task_kind": "smoke", "task": smoke_prompt(SmokeTarget("coder", "mcp", "M", []))}


def _target(required: list[str]) -> SmokeTarget:
    return SmokeTarget("coder", "mcp", "MMO_SMOKE_OK_coder_x", required, dict(ALIASES))


def test_judging_needs_the_marker_and_every_required_tool(tmp_path: Path) -> None:
    log = _write(tmp_path / "events.jsonl", [
        _row("item/completed", _dynamic("completed", "mmo_mcp__repo_search__query", True))])
    passed = judge(_target(["repo.search.query"]), "done MMO_SMOKE_OK_coder_x", log)
    no_marker = judge(_target(["repo.search.query"]), "FAKE_CODEX_OK", log)
    no_tool = judge(_target(["repo.search.query", "web.fetch"]), "MMO_SMOKE_OK_coder_x", log)
    assert passed == {"agent": "coder", "backend": "mcp", "marker_present": True,
                      "required_tools": ["repo.search.query"],
                      "successful_tools": ["repo.search.query"], "cleanup": None, "error": None}
    assert no_marker["marker_present"] is False
    assert no_marker["error"] == "marker MMO_SMOKE_OK_coder_x missing from the final result"
    assert no_tool["error"] == "no successful call of required tools ['web.fetch']"
    assert smoke_report([passed]) == {"passed": True, "results": [passed]}
    assert smoke_report([passed, no_tool])["passed"] is False
    assert smoke_report([])["passed"] is False


def test_a_root_detached_at_the_wall_fails_and_carries_its_cleanup(tmp_path: Path) -> None:
    lead = SmokeTarget("lead", "native", "MMO_SMOKE_OK_lead_x", [])
    scout = SmokeTarget("scout", "native", "MMO_SMOKE_OK_scout_x", [], parent="lead")
    cleanup = {"mode": "graceful_stop", "result": "stopped"}
    outcome = {"status": "detached", "root_status": "harness_wall_detached",
               "events_path": str(tmp_path / "root-events.jsonl"), "result": None}
    rows = judge_root(outcome, lead, [scout], cleanup)
    assert [r["agent"] for r in rows] == ["lead", "scout"]
    assert rows[0]["cleanup"] == cleanup and rows[1]["cleanup"] is None
    assert all(r["error"].startswith("the root did not finish before the smoke wall expired")
               for r in rows)


def test_a_native_agent_and_its_parent_are_judged_on_their_own_threads(tmp_path: Path) -> None:
    """Codex logs a sub-agent's items under its own thread: the native agent's evidence
    is the thread spawned with its marker, the parent's is everything else."""
    lead = SmokeTarget("lead", "native", "MMO_SMOKE_OK_lead_x", ["web.fetch"])
    scout = SmokeTarget("scout", "native", "MMO_SMOKE_OK_scout_x", ["web.search"], parent="lead")

    def on(thread: str, item: dict[str, Any]) -> dict[str, Any]:
        row = _row("item/completed", item)
        row["message"]["params"]["threadId"] = thread
        return row

    spawn = {"type": "collabAgentToolCall", "id": "s", "tool": "spawnAgent",
             "status": "completed", "receiverThreadIds": ["sub"],
             "prompt": smoke_prompt(scout)}
    log = _write(tmp_path / "events.jsonl", [
        on("main", _mcp("completed", tool="search")), on("main", spawn),
        on("sub", _mcp("completed", tool="fetch"))])
    text = "MMO_SMOKE_OK_lead_x MMO_SMOKE_OK_scout_x"
    lead_row, scout_row = judge_root({"status": "completed", "events_path": str(log),
                                      "result": text}, lead, [scout], None)
    assert lead_row["successful_tools"] == ["web.search"] and lead_row["error"] is not None
    assert scout_row["successful_tools"] == ["web.fetch"] and scout_row["error"] is not None
    assert "web.search" in scout_row["error"] and "web.fetch" in lead_row["error"]

"""Smoke diagnostics (spec 09): a short marker task per agent, judged only from evidence.

The judgement is pure: an agent passes when its final text holds its marker
and every required tool shows a *successful, completed* call in its event
log. Running the marker tasks (sessions, root host, jobs) is the one
function :func:`run_smoke_tasks`; everything else here reads records and
``events.jsonl`` rows (``{"recorded_at", "direction", "message"}``).
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict

from mmo_kernel.state.audit import read_jsonl

if TYPE_CHECKING:
    from mmo_kernel.tools.servers import ToolServer

MCP_ITEM_TYPES = frozenset({"mcpToolCall", "mcp_tool_call"})
DYNAMIC_ITEM_TYPE = "dynamicToolCall"
DEFAULT_WALL_SECONDS = 300.0
WALL_DETACHED = "harness_wall_detached"


class SmokeResult(BaseModel):
    """One row of the smoke report."""

    model_config = ConfigDict(extra="forbid")

    agent: str
    backend: Literal["native", "mcp"]
    marker_present: bool
    required_tools: list[str]
    successful_tools: list[str]
    cleanup: dict[str, Any] | None = None
    error: str | None = None


@dataclass(frozen=True)
class SmokeTarget:
    """One agent to exercise: ``parent`` runs it for ``native`` agents (the root has none)."""

    agent: str
    backend: Literal["native", "mcp"]
    marker: str
    required_tools: list[str]
    aliases: dict[str, str] = field(default_factory=dict)
    parent: str | None = None


# ------------------------------------------------------------ evidence --


def _completed_items(events_path: Path) -> Iterable[dict[str, Any]]:
    for row in read_jsonl(Path(events_path)):
        if row.get("direction") not in (None, "received"):
            continue
        message = row.get("message")
        if not isinstance(message, dict) or message.get("method") != "item/completed":
            continue
        params = message.get("params")
        item = params.get("item") if isinstance(params, dict) else None
        if isinstance(item, dict) and item.get("status") == "completed":
            yield item


def _mcp_call_succeeded(item: dict[str, Any]) -> bool:
    result = item.get("result")
    return not item.get("error") and not (isinstance(result, dict) and result.get("isError"))


def _successful_mcp_tools(events_path: str | os.PathLike[str],
                          dynamic_tool_aliases: Mapping[str, str]) -> set[str]:
    """``{"server.tool"}`` with at least one successful, completed call in the log.

    Native MCP calls count as completed ``mcpToolCall`` items with no error;
    bridged calls as completed ``dynamicToolCall`` items with ``success``,
    mapped back through the alias table (``mmo_mcp__repo_search__query`` ->
    ``repo.search.query``). Other dynamic tools are not MCP evidence.
    """
    found: set[str] = set()
    for item in _completed_items(Path(events_path)):
        kind = item.get("type")
        if kind in MCP_ITEM_TYPES and _mcp_call_succeeded(item):
            server, tool = item.get("server"), item.get("tool")
            if isinstance(server, str) and isinstance(tool, str):
                found.add(f"{server}.{tool}")
        elif kind == DYNAMIC_ITEM_TYPE and item.get("success") is True:
            alias = dynamic_tool_aliases.get(str(item.get("tool")))
            if alias:
                found.add(alias)
    return found


# ------------------------------------------------------------ planning --


def _opted(server: Any, opt_in: Any) -> list[str]:
    return list(opt_in.enabled_tools or server.enabled_tools)


def required_tools(spec: Any, servers: Mapping[str, Any]) -> list[str]:
    """``server.tool`` for every tool of every server the agent requires (``required``)."""
    tools: list[str] = []
    for name, opt_in in spec.tool_mcp_servers.items():
        if opt_in.required and name in servers:
            tools.extend(f"{name}.{tool}" for tool in _opted(servers[name], opt_in))
    return sorted(tools)


def dynamic_aliases(spec: Any, servers: Mapping[str, ToolServer]) -> dict[str, str]:
    """Run-time tool name -> ``server.tool`` from each bridge the agent's opt-ins name
    (no server is started); a bridge that writes Codex config contributes none."""
    from mmo_kernel.plugin.drivers import opt_ins_by_bridge
    from mmo_kernel.plugin.manager import tool_bridge

    aliases: dict[str, str] = {}
    for name, opt_ins in sorted(opt_ins_by_bridge(spec.tool_mcp_servers).items()):
        aliases.update(tool_bridge(name).alias_table(servers, opt_ins))
    return aliases


def smoke_marker(agent: str, nonce: str | None = None) -> str:
    return f"MMO_SMOKE_OK_{agent}_{nonce or secrets.token_hex(4)}"


def plan_smoke(profile: Any, servers: Mapping[str, Any], root_only: bool = False,
               workers_only: bool = False, nonce: str | None = None) -> list[SmokeTarget]:
    """Who is exercised how: the root and the native agents under it through their
    parent (``native``), spawnable workers through the mesh (``mcp``)."""
    if root_only and workers_only:
        raise ValueError("root_only and workers_only exclude each other")
    root = profile.root_agent
    workers = [a for a in profile.agents if a != root and any(
        a in spec.can_spawn for spec in profile.agents.values())]

    def target(agent: str, backend: Literal["native", "mcp"], parent: str | None
               ) -> SmokeTarget:
        spec = profile.agents[agent]
        return SmokeTarget(agent, backend, smoke_marker(agent, nonce),
                           required_tools(spec, servers), dynamic_aliases(spec, servers), parent)

    plan: list[SmokeTarget] = []
    for agent in ([] if workers_only else [root]) + ([] if root_only else workers):
        plan.append(target(agent, "native" if agent == root else "mcp", None))
        plan.extend(target(n, "native", agent) for n in profile.agents[agent].native_agents)
    return plan


def smoke_prompt(target: SmokeTarget, natives: Iterable[SmokeTarget] = ()) -> str:
    """The marker task: call each required tool once, then answer with the marker(s)."""
    lines = [f"MMO smoke test for agent {target.agent}. Do not change any file."]
    if target.required_tools:
        lines.append("Call each of these tools exactly once with minimal valid arguments: "
                     + ", ".join(target.required_tools) + ".")
    for native in natives:
        tools = (f" It must first call each of: {', '.join(native.required_tools)}."
                 if native.required_tools else "")
        lines.append(f"Ask your native agent {native.agent} to reply with exactly "
                     f"{native.marker}.{tools} Include its reply verbatim.")
    lines.append(f"Then finish with a final message containing exactly {target.marker}.")
    return "\n".join(lines)


# ------------------------------------------------------------- judging --


def judge(target: SmokeTarget, final_text: str | None,
          events_path: str | os.PathLike[str] | None,
          cleanup: dict[str, Any] | None = None, error: str | None = None) -> dict[str, Any]:
    """One report row from the agent's final text and event log."""
    marker_present = bool(final_text) and target.marker in str(final_text)
    successful = (sorted(_successful_mcp_tools(events_path, target.aliases))
                  if events_path else [])
    problems = [error] if error else []
    if error and final_text is None and not events_path:
        pass  # the agent never ran: the error says everything
    elif not marker_present:
        problems.append(f"marker {target.marker} missing from the final result")
    missing = [t for t in target.required_tools if t not in successful]
    if missing and (events_path or not error):
        problems.append(f"no successful call of required tools {missing}")
    return SmokeResult(agent=target.agent, backend=target.backend,
                       marker_present=marker_present, required_tools=list(target.required_tools),
                       successful_tools=successful, cleanup=cleanup,
                       error="; ".join(problems) or None).model_dump()


def smoke_report(results: list[dict[str, Any]]) -> dict[str, Any]:
    """``{"passed", "results"}``; an empty plan never passes."""
    return {"passed": bool(results) and all(r["error"] is None for r in results),
            "results": results}


def judge_root(outcome: Mapping[str, Any], target: SmokeTarget, natives: list[SmokeTarget],
               cleanup: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Rows for a root run (``run_root_exec`` outcome) and the native agents under it."""
    error = None
    if outcome.get("root_status") == WALL_DETACHED:
        error = "the root did not finish before the smoke wall expired"
    elif outcome.get("status") != "completed":
        error = f"the root ended {outcome.get('status')}"
    events, text = outcome.get("events_path"), outcome.get("result")
    rows = [judge(target, text, events, cleanup, error)]
    rows.extend(judge(n, text, events, None, error) for n in natives)
    return rows


def judge_job(job: Mapping[str, Any], text: str | None, target: SmokeTarget,
              natives: list[SmokeTarget], events_path: Path) -> list[dict[str, Any]]:
    """Rows for one worker job (its record and result text) and its native agents."""
    error = None if job.get("status") in ("completed", "completed_with_warnings") else (
        f"the job ended {job.get('status')}: {job.get('error') or 'no error recorded'}")
    rows = [judge(target, text, events_path, None, error)]
    rows.extend(judge(n, text, events_path, None, error) for n in natives)
    return rows


# ------------------------------------------------------- orchestration --


def _natives_of(plan: list[SmokeTarget], parent: str) -> list[SmokeTarget]:
    return [t for t in plan if t.parent == parent]


def run_smoke_tasks(profile: Any, cwd: str | os.PathLike[str], plan: list[SmokeTarget],
                    bindings: Mapping[str, str] | None = None,
                    wall_seconds: float = DEFAULT_WALL_SECONDS) -> list[dict[str, Any]]:
    """Run the marker tasks for ``plan`` and judge them.

    The root runs non-interactively (``run_root_exec``); a root left
    ``detached`` by the wall is stopped gracefully (``stop_session(id,
    grace_seconds=0)``) and recorded in ``cleanup``. Workers run as jobs
    spawned by the root agent in a session of their own, the way the mesh's
    ``agent_spawn`` launches them.
    """
    from mmo_kernel.lifecycle.controls import stop_session
    from mmo_kernel.lifecycle.root_exec import run_root_exec

    rows: list[dict[str, Any]] = []
    roots = [t for t in plan if t.parent is None and t.backend == "native"]
    for target in roots:
        natives = _natives_of(plan, target.agent)
        outcome = run_root_exec(profile, cwd, smoke_prompt(target, natives), wall_seconds,
                                bindings=bindings)
        cleanup = None
        if outcome.get("root_status") == WALL_DETACHED:
            stopped = stop_session(outcome["session"]["session_id"], grace_seconds=0)
            cleanup = {"mode": "graceful_stop", "result": stopped["session"]["status"]}
        rows.extend(judge_root(outcome, target, natives, cleanup))
    workers = [t for t in plan if t.backend == "mcp"]
    if workers:
        rows.extend(_run_workers(profile, cwd, plan, workers, bindings, wall_seconds))
    return rows


def _run_workers(profile: Any, cwd: str | os.PathLike[str], plan: list[SmokeTarget],
                 workers: list[SmokeTarget], bindings: Mapping[str, str] | None,
                 wall_seconds: float) -> list[dict[str, Any]]:
    """One job at a time (so team limits never refuse a smoke), each judged on its own."""
    from mmo_kernel.sessions.create import create_session
    from mmo_kernel.sessions.state import finish_session

    session = create_session(profile, cwd=cwd, bindings=bindings)
    sid, root = session["session_id"], session["root_agent"]
    rows: list[dict[str, Any]] = []
    try:
        for target in workers:
            rows.extend(_run_worker(sid, root, target, _natives_of(plan, target.agent),
                                    wall_seconds))
    finally:
        finish_session(sid, 0 if rows and all(r["error"] is None for r in rows) else 1)
    return rows


def _run_worker(session_id: str, root: str, target: SmokeTarget, natives: list[SmokeTarget],
                wall_seconds: float) -> list[dict[str, Any]]:
    from mmo_kernel.jobs.cancel import cancel_job
    from mmo_kernel.jobs.listing import load_job
    from mmo_kernel.jobs.records import job_dir
    from mmo_kernel.jobs.results import current_result
    from mmo_kernel.jobs.spawn import spawn_job
    from mmo_kernel.jobs.waiting import wait_for_jobs

    try:
        job_id = spawn_job(session_id, root, None, target.agent, task_kind="smoke",
                           task=smoke_prompt(target, natives))["job_id"]
    except Exception as exc:  # one refused agent must not hide the others' results
        error = f"spawn refused: {type(exc).__name__}: {exc}"
        return [judge(t, None, None, None, error) for t in [target, *natives]]
    waited = wait_for_jobs([job_id], session_id, wall_seconds, include_results=False)
    cleanup = None
    if job_id in (waited.get("unfinished") or []):
        cancel_job(job_id, session_id, reason="smoke wall expired")
        cleanup = {"mode": "cancel", "result": load_job(job_id)["status"]}
    job = load_job(job_id)
    _wait_host_exit(job)
    try:
        text: str | None = current_result(job)[1]
    except (OSError, ValueError, RuntimeError):
        text = None
    rows = judge_job(job, text, target, natives, job_dir(job_id) / "events.jsonl")
    rows[0]["cleanup"] = cleanup
    return rows


def _wait_host_exit(job: Mapping[str, Any], seconds: float = 10.0) -> None:
    """A terminal job's host may still be closing its app-server; a smoke leaves nothing running."""
    from mmo_kernel.state.processes import process_matches

    deadline = time.monotonic() + seconds
    while (process_matches(job.get("runner_pid"), job.get("runner_start_token"))
           and time.monotonic() < deadline):
        time.sleep(0.05)


def smoke_profile(profile: Any, cwd: str | os.PathLike[str],
                  bindings: Mapping[str, str] | None = None, root_only: bool = False,
                  workers_only: bool = False,
                  wall_seconds: float = DEFAULT_WALL_SECONDS) -> dict[str, Any]:
    """Run the marker tasks (CLI ``mmo smoke``) and report ``{"passed", "results"}``."""
    from mmo_kernel.profiles.snapshots import snapshot_profile
    from mmo_kernel.sessions.create import resolve_snapshot
    from mmo_kernel.tools.servers import load_tool_servers

    if root_only and workers_only:
        raise ValueError("root_only and workers_only exclude each other")
    doc = snapshot_profile(resolve_snapshot(profile, None, bindings))
    plan = plan_smoke(doc, load_tool_servers(), root_only, workers_only)
    return smoke_report(run_smoke_tasks(profile, cwd, plan, bindings, wall_seconds))

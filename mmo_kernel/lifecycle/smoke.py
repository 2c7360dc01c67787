"""Smoke diagnostics (spec 09): a short marker task per agent, judged only from evidence.

The judgement is pure: an agent passes when its final text holds its marker
and every required tool shows a *successful, completed* call in its event
log. Running the marker tasks (sessions, root host, jobs) is the one
function :func:`run_smoke_tasks`; everything else here reads records and
``events.jsonl`` rows (``{"recorded_at", "direction", "message"}``).
"""

from __future__ import annotations

import json
import os
import secrets
import time
from collections.abc import Callable, Iterable, Mapping
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
NATIVE_TOOLS = "multi_agent_v1"
"""The namespace of Codex's own sub-agent tools (``spawn_agent``, ``wait_agent``)."""
NATIVE_WAIT_MS = 600_000
SCRIPT_FENCE = "```mmo-script"
LITERAL_OPERATION = "summarize_supplied"
"""The literal operation that carries the smoke task to a low-trust agent as supplied text."""


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
    literal_operations: tuple[str, ...] | None = None
    """Set for a low-trust agent: it accepts only these ``literal_task`` operations."""


# ------------------------------------------------------------ evidence --


def _completed_items(events_path: Path) -> Iterable[tuple[str | None, dict[str, Any]]]:
    """``(threadId, item)`` of every completed item the host received."""
    for row in read_jsonl(Path(events_path)):
        if row.get("direction") not in (None, "received"):
            continue
        message = row.get("message")
        if not isinstance(message, dict) or message.get("method") != "item/completed":
            continue
        params = message.get("params")
        item = params.get("item") if isinstance(params, dict) else None
        if isinstance(item, dict) and item.get("status") == "completed":
            thread = params.get("threadId")
            yield (thread if isinstance(thread, str) else None), item


def _mcp_call_succeeded(item: dict[str, Any]) -> bool:
    result = item.get("result")
    return not item.get("error") and not (isinstance(result, dict) and result.get("isError"))


def _successful_mcp_tools(events_path: str | os.PathLike[str],
                          dynamic_tool_aliases: Mapping[str, str],
                          in_thread: Callable[[str | None], bool] | None = None) -> set[str]:
    """``{"server.tool"}`` with at least one successful, completed call in the log.

    Native MCP calls count as completed ``mcpToolCall`` items with no error;
    bridged calls as completed ``dynamicToolCall`` items with ``success``,
    mapped back through the alias table (``mmo_mcp__repo_search__query`` ->
    ``repo.search.query``). Other dynamic tools are not MCP evidence.
    ``in_thread`` keeps only the calls of the threads it accepts.
    """
    found: set[str] = set()
    for thread, item in _completed_items(Path(events_path)):
        if in_thread is not None and not in_thread(thread):
            continue
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


def _spawned_threads(events_path: Path) -> dict[str, str]:
    """Codex sub-agent threads in the log: receiver thread id -> the prompt it was given."""
    threads: dict[str, str] = {}
    for _, item in _completed_items(events_path):
        if item.get("type") == "collabAgentToolCall" and item.get("tool") == "spawnAgent":
            for thread in item.get("receiverThreadIds") or []:
                threads[str(thread)] = str(item.get("prompt") or "")
    return threads


def _own_calls(target: SmokeTarget, events_path: Path) -> Callable[[str | None], bool]:
    """Which threads' calls are the target's evidence: a native agent's own sub-agent
    thread (the one spawned with its marker), else the parent's threads, not its
    sub-agents' (a native's call never counts for its parent, nor the reverse)."""
    spawned = _spawned_threads(events_path)
    if target.parent is None:
        return lambda thread: thread not in spawned
    mine = {thread for thread, prompt in spawned.items() if target.marker in prompt}
    return lambda thread: thread in mine


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
    parent (``native``), spawnable workers through the mesh (``mcp``). ``workers_only``
    keeps the root's native agents (run through a minimal root turn), not the root."""
    if root_only and workers_only:
        raise ValueError("root_only and workers_only exclude each other")
    root = profile.root_agent
    workers = [a for a in profile.agents if a != root and any(
        a in spec.can_spawn for spec in profile.agents.values())]

    def target(agent: str, backend: Literal["native", "mcp"], parent: str | None
               ) -> SmokeTarget:
        spec = profile.agents[agent]
        literal = tuple(spec.literal_operations) if spec.trust == "low" else None
        return SmokeTarget(agent, backend, smoke_marker(agent, nonce),
                           required_tools(spec, servers), dynamic_aliases(spec, servers), parent,
                           literal)

    plan: list[SmokeTarget] = []
    for agent in [root] + ([] if root_only else workers):
        if not (workers_only and agent == root):
            plan.append(target(agent, "native" if agent == root else "mcp", None))
        plan.extend(target(n, "native", agent) for n in profile.agents[agent].native_agents)
    return plan


def smoke_prompt(target: SmokeTarget, natives: Iterable[SmokeTarget] = ()) -> str:
    """The marker task: call each required tool once, then answer with the marker(s).

    The same steps follow as an ``mmo-script`` block (docs/scripted-model.md), so
    the offline scripted model performs them for real: each required tool called
    with the smallest arguments its schema accepts (``try``: a failed call is
    judged from evidence instead of stopping the task; a bridged tool under its
    run-time name), each native agent spawned with its own marker task through
    Codex's sub-agent tools and waited for, and a final answer holding the
    agent's marker and the natives' replies (under a contract, inside a
    contract-valid result).
    """
    natives = list(natives)
    lines = [f"MMO smoke test for agent {target.agent}. Do not change any file."]
    if target.required_tools:
        lines.append("Call each of these tools exactly once with minimal valid arguments: "
                     + ", ".join(target.required_tools) + ".")
    for native in natives:
        tools = (f" It must first call each of: {', '.join(native.required_tools)}."
                 if native.required_tools else "")
        lines.append(f"Ask your native agent {native.agent} to reply with exactly "
                     f"{native.marker}.{tools} Include its reply verbatim.")
    lines.append("The same steps for the offline scripted model:")
    lines.extend(_smoke_script(target, natives))
    lines.append(f"Then finish with a final message containing exactly {target.marker}.")
    return "\n".join(lines)


def _smoke_script(target: SmokeTarget, natives: list[SmokeTarget]) -> list[str]:
    """The ``mmo-script`` block of :func:`smoke_prompt`, one step per line.

    A native agent's task travels as a JSON string, so its own block's fences
    are not fences of this one; the final text quotes the natives' replies
    (``{{waitN}}``) instead of their markers, so a native that never answered
    is not reported present.
    """
    dynamic = {tool: name for name, tool in target.aliases.items()}
    steps = [f"try tool {dynamic[tool]} minimal" if tool in dynamic else f"try mcp {tool} minimal"
             for tool in target.required_tools]
    replies = []
    for number, native in enumerate(natives, 1):
        spawn = {"agent_type": native.agent, "message": smoke_prompt(native)}
        wait = {"targets": [f"{{{{spawn{number}.agent_id}}}}"], "timeout_ms": NATIVE_WAIT_MS}
        steps.append(f"spawn{number}: tool {NATIVE_TOOLS}.spawn_agent {json.dumps(spawn)}")
        steps.append(f"wait{number}: tool {NATIVE_TOOLS}.wait_agent {json.dumps(wait)}")
        replies.append(f"{{{{wait{number}}}}}")
    steps.append(" ".join(["say", target.marker, *replies]))
    return [SCRIPT_FENCE, *steps, "```"]


# ------------------------------------------------------------- judging --


def judge(target: SmokeTarget, final_text: str | None,
          events_path: str | os.PathLike[str] | None,
          cleanup: dict[str, Any] | None = None, error: str | None = None) -> dict[str, Any]:
    """One report row from the agent's final text and event log."""
    marker_present = bool(final_text) and target.marker in str(final_text)
    successful = (sorted(_successful_mcp_tools(
        events_path, target.aliases, _own_calls(target, Path(events_path))))
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
    grace_seconds=0)``) and recorded in ``cleanup``. Native agents of a root
    that is not itself in the plan (``workers_only``) run through a minimal
    root turn whose own row is not reported. Workers run as jobs spawned by
    the root agent in a session of their own, the way the mesh's
    ``agent_spawn`` launches them.
    """
    rows: list[dict[str, Any]] = []
    planned = {t.agent for t in plan}
    roots = [t for t in plan if t.parent is None and t.backend == "native"]
    roots += [SmokeTarget(parent, "native", smoke_marker(parent), [])
              for parent in dict.fromkeys(t.parent for t in plan)
              if parent is not None and parent not in planned]
    for target in roots:
        root_rows = _run_root(profile, cwd, target, _natives_of(plan, target.agent), bindings,
                              wall_seconds)
        rows.extend(root_rows if target.agent in planned else root_rows[1:])
    workers = [t for t in plan if t.backend == "mcp"]
    if workers:
        rows.extend(_run_workers(profile, cwd, plan, workers, bindings, wall_seconds))
    return rows


def _run_root(profile: Any, cwd: str | os.PathLike[str], target: SmokeTarget,
              natives: list[SmokeTarget], bindings: Mapping[str, str] | None,
              wall_seconds: float) -> list[dict[str, Any]]:
    from mmo_kernel.lifecycle.controls import stop_session
    from mmo_kernel.lifecycle.root_exec import run_root_exec

    outcome = run_root_exec(profile, cwd, smoke_prompt(target, natives), wall_seconds,
                            bindings=bindings)
    cleanup = None
    if outcome.get("root_status") == WALL_DETACHED:
        stopped = stop_session(outcome["session"]["session_id"], grace_seconds=0)
        cleanup = {"mode": "graceful_stop", "result": stopped["session"]["status"]}
    return judge_root(outcome, target, natives, cleanup)


def smoke_task(target: SmokeTarget, natives: list[SmokeTarget]) -> dict[str, Any]:
    """``spawn_job`` keywords for a worker's marker task: free text, or for a low-trust
    agent (literal tasks only) the same text supplied to ``summarize_supplied``."""
    prompt = smoke_prompt(target, natives)
    if target.literal_operations is None:
        return {"task_kind": "smoke", "task": prompt}
    if LITERAL_OPERATION not in target.literal_operations:
        raise ValueError(f"low-trust agent {target.agent!r} allows only literal operations "
                         f"{', '.join(target.literal_operations)}; the smoke task needs "
                         f"{LITERAL_OPERATION}")
    return {"literal_task": {"operation": LITERAL_OPERATION, "text": prompt, "max_points": 1}}


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
        job_id = spawn_job(session_id, root, None, target.agent,
                           **smoke_task(target, natives))["job_id"]
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

"""The runner's executor registry: one forwarded ``call`` frame in, one envelope out.

Executors take ``(arguments, ctx)`` and return the OUTPUT dict, raising ``ToolFailure``
for a failed result. Modules are imported lazily (on the first call of one of their
tools) so a broken or slow import of one area never takes the whole runner down, and
each module may expose either a function named after the tool or its own
``EXECUTORS`` dict. Unexpected exceptions become a one-line failure (logged to stderr
with the traceback, never in the reply).
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from mmo_kernel.project_tools.envelope import ToolFailure, failure, from_exception, success
from mmo_kernel.runner.context import CallContext, Project, RunnerConfig
from mmo_kernel.state.actor import acting_as

LOG = logging.getLogger("mmo.runner")

Executor = Callable[[dict[str, Any], CallContext], dict[str, Any]]

_MODULES: dict[str, tuple[str, ...]] = {
    "mmo_kernel.runner.files": ("read_files", "edit_project_files", "transfer_project_artifact",
                                "artifact_read", "artifact_write"),
    "mmo_kernel.runner.review": ("review_changes",),
    "mmo_kernel.runner.process_jobs": ("run_script", "run_process", "observe_jobs",
                                       "wait_for_job_readiness", "write_job_input"),
    "mmo_kernel.runner.sessions": ("work_on_project", "session_status"),
    "mmo_kernel.runner.finish": ("finish_coding_task",),
    "mmo_kernel.runner.team": ("team_agents", "team_spawn", "team_status", "team_wait",
                               "team_result", "team_accept", "team_reject", "team_integrate",
                               "team_cancel"),
    "mmo_kernel.runner.dispatch": ("resolve_project_path",),
}
TOOL_MODULES: dict[str, str] = {tool: module for module, tools in _MODULES.items()
                                for tool in tools}
"""Every tool the runner executes -> the module holding its executor."""

PROJECT_ARGUMENTS = ("project", "source_project", "destination_project")


class _LazyExecutors(Mapping[str, Executor]):
    """``EXECUTORS[tool]`` imports the tool's module on first use."""

    def __getitem__(self, tool: str) -> Executor:
        module_name = TOOL_MODULES[tool]
        module = importlib.import_module(module_name)
        table = getattr(module, "EXECUTORS", None)
        if isinstance(table, dict) and tool in table:  # (this module's own table is lazy)
            return table[tool]
        executor = getattr(module, tool, None)
        if not callable(executor):
            raise LookupError(f"{module_name} has no executor for {tool}")
        return executor

    def __iter__(self) -> Iterator[str]:
        return iter(TOOL_MODULES)

    def __len__(self) -> int:
        return len(TOOL_MODULES)


EXECUTORS: Mapping[str, Executor] = _LazyExecutors()


def resolve_project_path(arguments: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    """Internal (router-only): the registered project containing ``path`` (a raw path the
    host gave with ``client_id``). The path is never echoed, in success or failure."""
    raw = arguments.get("path")
    if not isinstance(raw, str) or not raw:
        raise ToolFailure("invalid_arguments", "path must be a non-empty string")
    try:
        target = Path(raw).expanduser()
        if not target.is_absolute():
            raise ToolFailure("project_not_found", "no registered project contains that path")
        target = Path(target.resolve(strict=False))
    except (OSError, RuntimeError, ValueError):
        raise ToolFailure("project_not_found", "no registered project contains that path") from None
    best: Project | None = None
    for project in ctx.projects.values():
        if target == project.root or project.root in target.parents:
            if best is None or len(project.root.parts) > len(best.root.parts):
                best = project
    if best is None:
        raise ToolFailure("project_not_found", "no registered project contains that path")
    return {"project": best.id}


def _context(frame: Mapping[str, Any], arguments: Mapping[str, Any], *, config: RunnerConfig,
             projects: Mapping[str, Project], jobs: Any, state_dir: Path) -> CallContext:
    project: Project | None = None
    for key in PROJECT_ARGUMENTS:
        value = arguments.get(key)
        if value is None:
            continue
        if not isinstance(value, str) or value not in projects:
            raise ToolFailure("project_not_found", f"{key}: no such project on this runner")
        if key in ("project", "source_project") and project is None:
            project = projects[value]
    session = frame.get("session") or arguments.get("session_id")
    return CallContext(project=project, projects=dict(projects),
                       session_id=session if isinstance(session, str) else None,
                       user=str(frame.get("user") or ""), policy=config.policy, config=config,
                       jobs=jobs, state_dir=state_dir, tool=str(frame.get("tool") or ""),
                       extra={"deadline_unix_ms": frame.get("deadline_unix_ms")})


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:300]


def dispatch(frame: Mapping[str, Any], *, config: RunnerConfig, projects: Mapping[str, Project],
             jobs: Any, state_dir: Path) -> dict[str, Any]:
    """Execute one ``call`` frame and return its envelope; never raises."""
    tool = frame.get("tool")
    arguments = frame.get("arguments")
    if not isinstance(tool, str) or tool not in TOOL_MODULES:
        return failure("unknown_tool", f"unknown tool: {str(tool)[:80]}")
    if not isinstance(arguments, dict):
        return failure("invalid_arguments", "arguments must be an object")
    try:
        ctx = _context(frame, arguments, config=config, projects=projects, jobs=jobs,
                       state_dir=state_dir)
        with acting_as("mesh", ctx.user or "external"):  # audit: the external lead acted
            output = EXECUTORS[tool](dict(arguments), ctx)
        return success(output)
    except ToolFailure as exc:
        return from_exception(exc)
    except Exception as exc:  # an executor bug must not kill the link: one line back
        LOG.exception("tool %s failed unexpectedly", tool)
        # the spec has no internal-error kind: the runner could not serve the call, and
        # what it did before failing is unknown
        return failure("runner_unavailable",
                       f"{tool} failed on the runner: {type(exc).__name__}: {_one_line(exc)}",
                       state_changed="unknown")

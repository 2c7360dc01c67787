"""Project sessions on the runner: MMO sessions with ``session_kind = "external"`` (spec 12).

``work_on_project`` creates a NEW session in the project root with the runner's team
profile (never one picked by recency), or resumes exactly the one named. The runner
process is the session's host, recorded as its *client* (``root_client_pid`` + start
token: MMO never signals a client), so kernel reconciliation turns a dead runner's
sessions ``suspended``; ``attach_sessions`` marks them ``running`` again when a runner
for the same ``client_id`` is connected, ``suspend_sessions`` when its link drops.
No Codex binary, gateway or agent home is needed until the first ``team_spawn``.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from mmo_kernel.project_tools.envelope import ToolFailure
from mmo_kernel.project_tools.paths import open_regular
from mmo_kernel.runner.config import team_bindings, team_profile
from mmo_kernel.runner.context import CallContext, Project, RunnerConfig
from mmo_kernel.runner.review import git_status, run_git

LOG = logging.getLogger("mmo.runner")
INSTRUCTIONS_FILE = "AGENTS.md"
INSTRUCTIONS_MAX_BYTES = 4096
DIRTY_PATHS_MAX = 200
LIVE_STATUSES = ("starting", "running", "detached", "suspended")


def _me() -> tuple[int, str]:
    from mmo_kernel.state.processes import process_start_token

    pid = os.getpid()
    token = process_start_token(pid)
    if token is None:  # pragma: no cover - our own process always has one
        raise RuntimeError("cannot read this process's start token")
    return pid, token


def _instructions(project: Project) -> dict[str, Any]:
    """The project's AGENTS.md (<= 4 KiB, cut at a character boundary), if it is a
    regular file inside the project; anything else is simply absent."""
    try:
        fd, _, _ = open_regular(project.root, INSTRUCTIONS_FILE)
    except ToolFailure:
        return {}
    try:
        with os.fdopen(fd, "rb") as handle:
            data = handle.read(INSTRUCTIONS_MAX_BYTES + 1)
    except OSError:
        return {}
    truncated = len(data) > INSTRUCTIONS_MAX_BYTES
    text = data[:INSTRUCTIONS_MAX_BYTES].decode("utf-8", errors="ignore" if truncated
                                                 else "replace")
    return {"instructions": text, "instructions_truncated": truncated}


def _session_or_fail(session_id: str, project: Project | None, user: str | None = None,
                     config: RunnerConfig | None = None) -> dict[str, Any]:
    """The reconciled record of an external session of ``project``; anything else is
    ``session_not_found`` (never a hint that it exists)."""
    from mmo_kernel.api import load_session

    try:
        record = load_session(session_id)
    except (FileNotFoundError, ValueError, RuntimeError, OSError):
        raise ToolFailure("session_not_found", "no such session") from None
    if record.get("session_kind") != "external":
        raise ToolFailure("session_not_found", "no such session")
    if project is not None and Path(record["cwd"]) != project.root:
        raise ToolFailure("session_not_found", "no such session")
    if user is not None and record.get("external_lead") not in (None, user):
        raise ToolFailure("session_not_found", "no such session")
    if config is not None and record.get("external_client_id") not in (None, config.client_id):
        raise ToolFailure("session_not_found", "no such session")
    return record


def require_session(ctx: CallContext, session_id: str | None = None) -> dict[str, Any]:
    """The live session a tool acts in (``session_not_found`` / ``session_terminal``)."""
    from mmo_kernel.api import TERMINAL_SESSION_STATUSES

    sid = session_id or ctx.session_id
    if not sid:
        raise ToolFailure("session_not_found", "no such session")
    record = _session_or_fail(sid, ctx.project, ctx.user or None, ctx.config)
    if record["status"] in TERMINAL_SESSION_STATUSES:
        raise ToolFailure("session_terminal", f"the session is {record['status']}")
    return record


def attach(session_id: str) -> dict[str, Any]:
    """Record this runner as the session's host and mark it ``running``."""
    from mmo_kernel.sessions.state import REMOVE, update_session

    pid, token = _me()
    return update_session(session_id, status_if=LIVE_STATUSES, status="running",
                          root_client_pid=pid, root_client_start_token=token, error=REMOVE,
                          failure=REMOVE)


def _create(ctx: CallContext) -> dict[str, Any]:
    from mmo_kernel.api import create_session

    assert ctx.project is not None
    pid, token = _me()
    try:
        return create_session(team_profile(ctx.config), cwd=ctx.project.root,
                              bindings=team_bindings(ctx.config), session_kind="external",
                              external={"root_client_pid": pid, "root_client_start_token": token,
                                        "external_client_id": ctx.config.client_id,
                                        "external_lead": ctx.user or None})
    except (ValueError, RuntimeError, OSError) as exc:
        LOG.error("cannot create a session for project %s: %s", ctx.project.id, exc)
        raise ToolFailure("team_unavailable",
                          f"the runner cannot start a session with team profile "
                          f"{team_profile(ctx.config)!r}: see the runner log") from None


def work_on_project(arguments: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    """Start a new external session, or resume exactly ``session_id``."""
    if ctx.project is None:
        raise ToolFailure("invalid_arguments", "project is required")
    sid = arguments.get("session_id")
    if sid:
        record = require_session(ctx, str(sid))
        record = attach(record["session_id"])
    else:
        record = _create(ctx)
    return {"session_id": record["session_id"], **_instructions(ctx.project)}


def workspace(project: Project) -> dict[str, Any] | None:
    """Git branch and dirty paths (<= 200, project-relative) of a git project."""
    if project.vcs != "git":
        return None
    head = run_git(project.root, "rev-parse", "--abbrev-ref", "HEAD", check=False)
    branch = head.stdout.decode("utf-8", "replace") if head.returncode == 0 else None
    paths = [item["path"] for item in git_status(project.root) or []]
    return {"branch": (branch or "").strip() or None, "dirty_paths": paths[:DIRTY_PATHS_MAX],
            "dirty_count": len(paths), "dirty_truncated": len(paths) > DIRTY_PATHS_MAX}


def session_status(arguments: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    """Internal (router-only): the session's status and, for git projects, its workspace."""
    sid = arguments.get("session_id") or ctx.session_id
    if not isinstance(sid, str) or not sid:
        raise ToolFailure("session_not_found", "no such session")
    record = _session_or_fail(sid, ctx.project, ctx.user or None, ctx.config)
    output: dict[str, Any] = {"status": record["status"]}
    if arguments.get("include_workspace", True):
        project = ctx.project or _project_of(record, ctx)
        space = workspace(project) if project is not None else None
        if space is not None:
            output["workspace"] = space
    return output


def _project_of(record: dict[str, Any], ctx: CallContext) -> Project | None:
    root = Path(record["cwd"])
    return next((p for p in ctx.projects.values() if p.root == root), None)


def _my_sessions(config: RunnerConfig) -> list[dict[str, Any]]:
    from mmo_kernel.api import iter_session_records

    try:
        records = iter_session_records(include_unreadable=True)
    except (OSError, RuntimeError) as exc:
        LOG.warning("cannot list sessions: %s", exc)
        return []
    return [r for r in records if r.get("session_kind") == "external"
            and r.get("external_client_id") == config.client_id
            and r.get("status") in LIVE_STATUSES]


def attach_sessions(config: RunnerConfig) -> int:
    """On (re)connect: every live external session of this client is ``running`` again."""
    count = 0
    for record in _my_sessions(config):
        try:
            attach(record["session_id"])
            count += 1
        except (OSError, RuntimeError, ValueError) as exc:
            LOG.warning("cannot resume session %s: %s", record["session_id"], exc)
    return count


def _hosted_elsewhere(record: dict[str, Any]) -> bool:
    """Another LIVE process hosts the session: the runner that replaced this one for the
    same ``client_id`` (close 4409) attached it, so this runner must not suspend it."""
    from mmo_kernel.state.processes import process_matches

    pid = record.get("root_client_pid")
    return (isinstance(pid, int) and pid != os.getpid()
            and process_matches(pid, record.get("root_client_start_token")))


def suspend_sessions(config: RunnerConfig, reason: str) -> int:
    """On a lost link or shutdown: this client's running external sessions are
    ``suspended`` (spec 12: running while connected, suspended while not)."""
    from mmo_kernel.sessions.state import update_session

    count = 0
    for record in _my_sessions(config):
        if record.get("status") == "suspended" or _hosted_elsewhere(record):
            continue
        try:
            update_session(record["session_id"], status_if=("starting", "running", "detached"),
                           status="suspended", error=reason)
            count += 1
        except (OSError, RuntimeError, ValueError) as exc:
            LOG.warning("cannot suspend session %s: %s", record["session_id"], exc)
    return count


EXECUTORS = {"work_on_project": work_on_project, "session_status": session_status}

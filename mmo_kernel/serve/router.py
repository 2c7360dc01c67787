"""The tool router: every ``tools/call`` of spec 12 goes through :meth:`Router.call`.

Order of work for one call: the dispatcher unwrapped -> scope check
(``insufficient_scope``) -> ``_mmo.record`` resolved -> ``validate_arguments`` ->
``project`` / ``session_id`` / job / goal ids resolved for the caller (foreign or
unknown -> ``*_not_found``, never a hint that it exists) -> a server tool, or a call
forwarded to the project's runner through the hub with runner-local ids. The reply is
post-processed (public session ids, refs, followable suggested calls, the job index,
work results, the activity log) and returned as the envelope.

Sessions are chosen by ``session_id`` only: never by recency, window or client hint.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mmo_kernel.project_tools.catalog import (
    DISPATCHER,
    ToolSpec,
    client_tool,
    split_mmo,
    validate_arguments,
)
from mmo_kernel.project_tools.envelope import (
    ToolFailure,
    failure,
    from_exception,
    success,
    suggested,
)
from mmo_kernel.serve.activity import ActivityLog
from mmo_kernel.serve.goals import GoalStore
from mmo_kernel.serve.sessions_index import (
    PROJECT_ID,
    PROJECT_REF,
    SESSION_REF,
    SessionsIndex,
    project_id_of,
    public_session_id,
    raw_session_id,
    split_project_id,
)
from mmo_kernel.serve.work_results import WorkResults
from mmo_kernel.state.redaction import redact_text

log = logging.getLogger("mmo.serve.router")

CALL_DEADLINE_MS = 40_000
"""Server-side deadline of one forwarded call (spec 12, Limits)."""
HANDOFF_BRIEF_BYTES = 8 * 1024
SELECTOR_ERROR = "missing client_id required with path; call list_projects to find project ids"
PROJECT_KEYS = ("project", "source_project", "destination_project")
GOAL_MUTATIONS = {"prepare_goal_workflow", "checkpoint_goal", "revise_goal_plan", "update_goal"}
GOAL_TOOLS = GOAL_MUTATIONS | {"get_goal", "present_goal_plan"}
TEAM_TOOLS = {"team_agents", "team_spawn", "team_status", "team_wait", "team_result",
              "team_accept", "team_reject", "team_integrate", "team_cancel"}
JOB_STARTERS = {"run_script", "run_process"}

_SECRET_LINE = re.compile(
    r"(?i)\b(?:api[_-]?key|secret|passw(?:or)?d|passphrase|token|credentials?|auth(?:orization)?"
    r"|private[_-]?key|access[_-]?key)\b\s*[:=]"
    r"|(?i:\bbearer\s+)[A-Za-z0-9._~+/=-]{8,}"
    r"|\bmmo_(?:adm|pat|rt)_[A-Za-z0-9_-]{8,}"
    r"|\bsk-[A-Za-z0-9_-]{16,}|\bgh[pousr]_[A-Za-z0-9]{20,}|\bAKIA[0-9A-Z]{16}\b"
    r"|\bxox[abprs]-[A-Za-z0-9-]{10,}|-----BEGIN [A-Z ]*PRIVATE KEY-----")
REDACTED_LINE = "[redacted: secret-like line]"
MMO_TOKEN_TEXT = re.compile(r"\bmmo_(?:adm|pat|rt)_[A-Za-z0-9_-]{8,}")
REDACTED_TOKEN = "[redacted:mmo_token]"
VERBATIM_TOOLS = {"edit_project_files", "run_script", "run_process", "write_job_input"}
"""Tools whose arguments are the user's bytes (file content, scripts, stdin): kept exactly.
Every other tool's text may be recorded (session index, goals, work results, the runner's
session and job records), so MMO tokens in it are redacted first (spec 12: no token in any
response, record or log)."""


def _ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class ProjectRef:
    """A project the caller may use: its runner, local id, public id and registry entry."""

    client_id: str
    local: str
    project_id: str
    info: dict[str, Any]
    online: bool


@dataclass(frozen=True)
class SessionRef:
    """A session the caller owns."""

    raw: str
    public: str
    user: str
    client_id: str
    local: str
    instruction: str

    @property
    def project_id(self) -> str:
        return project_id_of(self.client_id, self.local)


class Router:
    """Routes tool calls for one server (see the module docstring)."""

    def __init__(self, store: Any, hub: Any, state_dir: Path) -> None:
        self.store = store
        self.hub = hub
        self.index = SessionsIndex(Path(state_dir))
        self.goals = GoalStore(Path(state_dir))
        self.work_results = WorkResults(Path(state_dir))
        self.activity = ActivityLog(Path(state_dir))
        if hub is not None:
            if callable(getattr(hub, "on_job_event", None)):
                hub.on_job_event(self._job_event)
            if callable(getattr(hub, "on_hello", None)):
                hub.on_hello(self._hello)

    # ------------------------------------------------------------------ entry --

    async def call(self, principal: Any, tool: str, arguments: Any, *,
                   ui_capable: bool = True) -> dict[str, Any]:
        """One tool call as ``principal`` -> the tool's envelope (never raises ToolFailure).

        ``ui_capable`` tells whether the request may reach app-only tools (the MCP
        endpoint passes what the client declared; ``/api/tools/call`` keeps the default).
        """
        record: SessionRef | None = None
        business: list[str | None] = [None]
        name = tool
        try:
            name, spec, inner, mmo = self._unwrap(tool, arguments, ui_capable)
            self._check_scope(principal, spec)
            user = principal.username
            if mmo is not None and mmo.record is not None:
                record = self._session(user, mmo.record)
            model = validate_arguments(name, inner)
            args = model.model_dump(mode="json")
            if name not in VERBATIM_TOOLS:
                args = _without_tokens(args)
            envelope = await self._run(principal, name, args, business)
        except ToolFailure as exc:
            envelope = from_exception(exc)
        if record is not None:
            output = envelope.get("output") or {}
            self.activity.append(record.public, tool=name, success=bool(envelope["success"]),
                                 business_session=business[0],
                                 error_kind=None if envelope["success"]
                                 else output.get("error_kind"))
        return envelope

    def _unwrap(self, tool: Any, arguments: Any, ui_capable: bool
                ) -> tuple[str, ToolSpec, dict[str, Any], Any]:
        """(tool name, spec, its arguments without ``_mmo``, the ``_mmo`` envelope)."""
        if not isinstance(arguments, dict):
            raise ToolFailure("invalid_arguments", f"invalid arguments for {str(tool)[:100]}: "
                                                   "arguments must be an object")
        if tool == DISPATCHER:
            rest, outer = split_mmo(arguments)
            dispatched = validate_arguments(DISPATCHER, rest)
            name = str(dispatched.tool)  # type: ignore[attr-defined]
            inner_args = dict(dispatched.arguments)  # type: ignore[attr-defined]
            if name == DISPATCHER:
                raise ToolFailure("invalid_arguments", "call_project_tool cannot dispatch "
                                                       "call_project_tool")
            spec = client_tool(name, ui_capable)
            if spec is None:
                raise ToolFailure("unknown_tool", f"unknown tool: {name[:100]}")
            inner, own = split_mmo(inner_args)
            if outer is not None and own is not None:
                raise ToolFailure("invalid_arguments", "invalid arguments for "
                                  f"{DISPATCHER}: _mmo given twice (beside tool and inside "
                                  "arguments)")
            return name, spec, inner, outer if outer is not None else own
        spec = client_tool(tool, ui_capable) if isinstance(tool, str) else None
        if spec is None:
            raise ToolFailure("unknown_tool", f"unknown tool: {str(tool)[:100]}")
        inner, mmo = split_mmo(arguments)
        return tool, spec, inner, mmo

    def _check_scope(self, principal: Any, spec: ToolSpec) -> None:
        if spec.scope is None:
            return
        if getattr(principal, "username", None) is None:
            # The admin token reaches list_projects only (a readiness check).
            if spec.name == "list_projects":
                return
            raise ToolFailure("insufficient_scope", f"missing required scope: {spec.scope}")
        if spec.scope not in principal.scopes:
            raise ToolFailure("insufficient_scope", f"missing required scope: {spec.scope}")

    async def _run(self, principal: Any, tool: str, args: dict[str, Any],
                   business: list[str | None]) -> dict[str, Any]:
        user = principal.username
        if tool == "list_projects":
            return success(self._list_projects(user))
        if tool == "work_on_project":
            return await self._work_on_project(user, args, business)
        if tool in GOAL_TOOLS:
            return success(self._goal_tool(user, tool, args, business))
        if tool == "read_session_handoff":
            return await self._handoff(user, args, business)
        if tool == "get_work_result_state":
            project = self._project(user, args["project"])
            session = self._session(user, args["session_id"], project)
            business[0] = session.public
            return success({"work_result": self.work_results.get(session.public)})
        if tool == "transfer_project_artifact":
            return await self._transfer(user, args)
        if tool in ("observe_jobs", "wait_for_job_readiness"):
            return await self._job_query(user, tool, args)
        if tool == "write_job_input":
            return await self._write_job_input(user, args)
        if tool in TEAM_TOOLS:
            session = self._session(user, args["session_id"])
            business[0] = session.public
            return await self._forward_in(session.client_id, tool, args, user, session)
        return await self._project_tool(user, tool, args, business)

    # -------------------------------------------------------------- resolving --

    def _runner(self, client_id: str) -> dict[str, Any] | None:
        if self.hub is None:
            return None
        finder = getattr(self.hub, "runner", None)
        if callable(finder):
            found = finder(client_id)
            return found if isinstance(found, dict) else None
        for runner in self.hub.known_runners():
            if runner.get("client_id") == client_id:
                return runner
        return None

    def _project(self, user: str, value: str) -> ProjectRef:
        """A project id or ref of ``user``'s runners; anything else ``project_not_found``."""
        project_id = self.index.project_for_ref(user, value) if PROJECT_REF.match(value) \
            else value
        parts = split_project_id(project_id) if project_id else None
        runner = self._runner(parts[0]) if parts else None
        info = None
        if parts and runner and self._enrolled(runner, user):
            info = next((p for p in runner.get("projects") or [] if p.get("id") == parts[1]),
                        None)
        if parts is None or runner is None or info is None or project_id is None:
            shown = value if PROJECT_REF.match(value) or PROJECT_ID.match(value) else None
            raise ToolFailure("project_not_found",
                              f"project not found: {shown}" if shown else
                              "project not found; use an id or project_ref from list_projects")
        return ProjectRef(client_id=parts[0], local=parts[1], project_id=project_id, info=info,
                          online=bool(runner.get("online")))

    def _session(self, user: str | None, value: str,
                 project: ProjectRef | None = None) -> SessionRef:
        """A session id or ref of ``user`` (and of ``project`` when given)."""
        public = self.index.session_for_ref(user, value) if SESSION_REF.match(value) else value
        raw = raw_session_id(public) if public else None
        row = self.index.session(raw) if raw else None
        ok = (row is not None and user is not None and row.get("user") == user
              and self._runner_owner_ok(row.get("client_id"), user))
        if ok and project is not None and row is not None:
            ok = (row["client_id"] == project.client_id and row["project"] == project.local)
        if not ok or row is None or raw is None or public is None:
            shown = value if SESSION_REF.match(value) or raw_session_id(value) else None
            raise ToolFailure("session_not_found",
                              f"session not found: {shown}" if shown else "session not found")
        return SessionRef(raw=raw, public=public_session_id(raw), user=row["user"],
                          client_id=row["client_id"], local=row["project"],
                          instruction=str(row.get("instruction") or ""))

    def _runner_owner_ok(self, client_id: Any, user: str) -> bool:
        """A session stays reachable only while its runner is still enrolled for the user."""
        runner = self._runner(str(client_id)) if client_id else None
        return runner is None or self._enrolled(runner, user)

    def _enrolled(self, runner: dict[str, Any], user: str | None) -> bool:
        """The runner is ``user``'s: its hello named the user and a runner token for its
        ``client_id`` was issued to that user."""
        if user is None or runner.get("owner") != user:
            return False
        enrolled = getattr(self.store, "runner_client_ids", None)
        return not callable(enrolled) or runner.get("client_id") in enrolled(user)

    def _project_view(self, user: str | None, runner: dict[str, Any],
                      project: dict[str, Any]) -> dict[str, Any]:
        project_id = project_id_of(runner["client_id"], project["id"])
        return {"id": project_id,
                "project_ref": self.index.project_ref(user, project_id) if user else None,
                "name": project.get("name") or project["id"],
                "description": project.get("description") or "",
                "client_id": runner["client_id"], "online": bool(runner.get("online")),
                "vcs": project.get("vcs") or "none"}

    # ------------------------------------------------------------- forwarding --

    async def _forward(self, client_id: str, tool: str, arguments: dict[str, Any], user: str,
                       session_raw: str | None, deadline_ms: int | None = None
                       ) -> dict[str, Any]:
        if self.hub is None:
            return failure("runner_unavailable", f"runner {client_id} is offline")
        deadline = deadline_ms if deadline_ms is not None else _ms() + CALL_DEADLINE_MS
        envelope = await self.hub.call(client_id, tool, arguments, user, session_raw, deadline)
        if not isinstance(envelope, dict) or not isinstance(envelope.get("output"), dict):
            return failure("runner_disconnected", f"runner {client_id} sent no valid reply",
                           state_changed="unknown")
        return envelope

    async def _forward_in(self, client_id: str, tool: str, args: dict[str, Any], user: str,
                          session: SessionRef | None,
                          projects: dict[str, ProjectRef] | None = None) -> dict[str, Any]:
        """Forward with runner-local ids and map the reply back to public ids."""
        arguments = dict(args)
        for key, project in (projects or {}).items():
            arguments[key] = project.local
        if session is not None and "session_id" in arguments:
            arguments["session_id"] = session.raw
        envelope = await self._forward(client_id, tool, arguments, user,
                                       session.raw if session else None)
        return _outward(envelope, session, projects or {})

    async def _project_tool(self, user: str, tool: str, args: dict[str, Any],
                            business: list[str | None]) -> dict[str, Any]:
        """Tools on one project (and maybe a session): files, scripts, review, finish."""
        project = self._project(user, args["project"])
        session = None
        if args.get("session_id") is not None:
            session = self._session(user, args["session_id"], project)
            business[0] = session.public
        envelope = await self._forward_in(project.client_id, tool, args, user, session,
                                          {"project": project})
        output = envelope.get("output") or {}
        if tool in JOB_STARTERS and isinstance(output.get("job_id"), str):
            self.index.record_job(output["job_id"], client_id=project.client_id, user=user,
                                  session=session.public if session else None,
                                  project=project.project_id)
        if tool == "finish_coding_task" and envelope.get("success") and session is not None:
            self.work_results.record_finish(session.public, summary=args.get("summary"),
                                            output=output,
                                            outputs_given=args.get("outputs") is not None)
            envelope = success({**output, "state_changed": True})  # the work result is new
        return envelope

    # -------------------------------------------------------------- projects --

    def _list_projects(self, user: str | None) -> dict[str, Any]:
        runners = self.hub.known_runners() if self.hub is not None else []
        projects = []
        for runner in runners:
            if user is None and not runner.get("online"):
                continue  # the admin's readiness check: every online project
            if user is not None and not self._enrolled(runner, user):
                continue
            for project in runner.get("projects") or []:
                projects.append(self._project_view(user, runner, project))
        projects.sort(key=lambda p: p["id"])
        return {"projects": projects, "total_count": len(projects)}

    async def _work_on_project(self, user: str, args: dict[str, Any],
                               business: list[str | None]) -> dict[str, Any]:
        project = await self._selected_project(user, args)
        session = None
        if args.get("session_id") is not None:
            session = self._session(user, args["session_id"], project)
        forwarded = {"project": project.local,
                     "session_id": session.raw if session else None,
                     "instruction": args["instruction"]}
        envelope = await self._forward(project.client_id, "work_on_project", forwarded, user,
                                       session.raw if session else None)
        if not envelope.get("success"):
            return _outward(envelope, session, {"project": project})
        output = envelope["output"]
        raw = session.raw if session else output.get("session_id")
        if not isinstance(raw, str) or raw_session_id(public_session_id(raw)) is None:
            return failure("runner_disconnected", "the runner returned no usable session id",
                           state_changed="unknown")
        self.index.register_session(raw_id=raw, user=user, client_id=project.client_id,
                                    project=project.local, instruction=args["instruction"])
        public = public_session_id(raw)
        business[0] = public
        reply: dict[str, Any] = {
            "project_id": project.project_id,
            "project_ref": self.index.project_ref(user, project.project_id),
            "session_id": public, "session_ref": self.index.session_ref(user, public),
            "continuation": "resumed_explicitly" if session else "started"}
        for key in ("instructions", "instructions_truncated"):
            if key in output:
                reply[key] = output[key]
        return success(reply)

    async def _selected_project(self, user: str, args: dict[str, Any]) -> ProjectRef:
        """``project``, or ``client_id`` + ``path`` (the path is never echoed)."""
        project, client_id, path = args.get("project"), args.get("client_id"), args.get("path")
        if path is not None and client_id is None:
            raise ToolFailure("invalid_project_selector", SELECTOR_ERROR,
                              suggested_call=suggested("list_projects", {}, True,
                                                       "list the project ids to pass as "
                                                       "project"))
        if project is not None:
            if path is not None or client_id is not None:
                raise ToolFailure("invalid_project_selector",
                                  "give either project or client_id with path, not both")
            return self._project(user, project)
        if path is None:
            raise ToolFailure("invalid_project_selector",
                              "give project (an id or project_ref) or client_id with path; "
                              "call list_projects to find project ids",
                              suggested_call=suggested("list_projects", {}, True,
                                                       "list the project ids to pass as "
                                                       "project"))
        runner = self._runner(str(client_id))
        if runner is None or not self._enrolled(runner, user):
            raise ToolFailure("project_not_found", "no project of yours contains that path "
                                                   "on that runner")
        client_id = str(client_id)
        envelope = await self._forward(client_id, "resolve_project_path", {"path": path}, user,
                                       None)
        if not envelope.get("success"):
            kind = envelope["output"].get("error_kind", "project_not_found")
            if kind in ("runner_unavailable", "runner_disconnected", "timeout"):
                raise ToolFailure(kind, f"runner {client_id} could not resolve the path",
                                  envelope["output"].get("state_changed", False))
            raise ToolFailure("project_not_found", "no project of yours contains that path "
                                                   "on that runner")
        local = envelope["output"].get("project")
        if not isinstance(local, str):
            raise ToolFailure("project_not_found", "no project of yours contains that path "
                                                   "on that runner")
        return self._project(user, project_id_of(client_id, local))

    # ---------------------------------------------------------------- handoff --

    async def _handoff(self, user: str, args: dict[str, Any],
                       business: list[str | None]) -> dict[str, Any]:
        project = self._project(user, args["project"])
        session = self._session(user, args["session_id"], project)
        business[0] = session.public
        envelope = await self._forward(project.client_id, "session_status",
                                       {"project": project.local, "session_id": session.raw},
                                       user, session.raw)
        workspace = None
        if envelope.get("success"):
            status = envelope["output"].get("status")
            workspace = envelope["output"].get("workspace")
        elif envelope["output"].get("error_kind") in ("runner_unavailable",
                                                      "runner_disconnected", "timeout"):
            status = "suspended"  # the runner is the session's host: offline = suspended
        else:
            return _outward(envelope, session, {"project": project})
        goal = self.goals.latest_for_session(session.public)
        recent = self.activity.recent(session.public)
        reply: dict[str, Any] = {
            "session_id": session.public,
            "session_ref": self.index.session_ref(user, session.public),
            "project_ref": self.index.project_ref(user, project.project_id),
            "status": status, "instruction": redact_secret_lines(session.instruction),
            "handoff_brief": self._brief(session, project, status, goal, recent),
            "recent_activity": recent,
            "goal_context": ({"goal": self.goals.brief(session.public)}
                             if goal is not None else None)}
        if args.get("include_workspace"):
            reply["workspace"] = workspace
        return success(reply)

    def _brief(self, session: SessionRef, project: ProjectRef, status: Any,
               goal: dict[str, Any] | None, recent: list[dict[str, Any]]) -> str:
        """A plain-text brief for a new lead: what the session is for and where it stands."""
        lines = [f"Session {session.public} on project {project.project_id} "
                 f"({project.info.get('name') or project.local}); status: {status}.",
                 "Instruction:", *(session.instruction.splitlines() or ["(none)"])]
        if goal is not None:
            summary, plan = goal["summary"], goal["plan"]
            done = sum(1 for s in plan["steps"] if s["status"] == "completed")
            lines += ["", f"Goal {summary['goal_id']}: {summary['title']} (revision "
                          f"{summary['revision']}, {summary['lifecycle']}, {done}/"
                          f"{len(plan['steps'])} steps completed).",
                      f"Objective: {summary.get('objective') or ''}"]
            for condition in summary.get("completion_conditions") or []:
                lines.append(f"- done when: {condition}")
            for step in plan["steps"]:
                marker = {"completed": "x", "in_progress": ">"}.get(step["status"], " ")
                lines.append(f"[{marker}] {step['id']}: {step['title']}")
            if goal.get("last_checkpoint_summary"):
                lines += ["Last checkpoint:", *str(goal["last_checkpoint_summary"]).splitlines()]
        result = self.work_results.get(session.public)
        if result["status"] == "finished":
            outcome = result.get("task_outcome") or {}
            reasons = ", ".join(outcome.get("blocking_reasons") or []) or "none"
            lines += ["", f"Last finish: outcome {outcome.get('status')}, validation "
                          f"{outcome.get('validation')}, blocking reasons: {reasons}."]
            if result.get("summary"):
                lines += ["Summary:", *str(result["summary"]).splitlines()]
        if recent:
            lines += ["", "Recent activity (oldest first):"]
            for entry in recent:
                state = "ok" if entry.get("success") else entry.get("error_kind") or "failed"
                lines.append(f"- {entry.get('tool')}: {state}")
        return _bounded_brief(lines)

    # ----------------------------------------------------------------- goals --

    def _goal_tool(self, user: str, tool: str, args: dict[str, Any],
                   business: list[str | None]) -> dict[str, Any]:
        if tool == "prepare_goal_workflow":
            session = self._session(user, args["session_id"])
            business[0] = session.public
            return self.goals.prepare({**args, "session_id": session.public})
        goal_id = args["goal_id"]
        owner = self.goals.session_of(goal_id)
        try:
            found = self._session(user, owner) if owner else None
        except ToolFailure:
            found = None
        if found is None:
            raise ToolFailure("goal_not_found", f"goal not found: {goal_id[:100]}")
        session = found
        business[0] = session.public
        if tool == "get_goal":
            return self.goals.get(goal_id)
        if tool == "present_goal_plan":
            return self.goals.card(goal_id)
        if tool == "checkpoint_goal":
            return self.goals.checkpoint(args)
        if tool == "revise_goal_plan":
            return self.goals.revise(args)
        return self.goals.update(args)

    # -------------------------------------------------------------- transfers --

    async def _transfer(self, user: str, args: dict[str, Any]) -> dict[str, Any]:
        source = self._project(user, args["source_project"])
        destination = self._project(user, args["destination_project"])
        projects = {"source_project": source, "destination_project": destination}
        if source.client_id == destination.client_id:
            return await self._forward_in(source.client_id, "transfer_project_artifact", args,
                                          user, None, projects)
        deadline = _ms() + CALL_DEADLINE_MS
        read = await self._forward(source.client_id, "artifact_read",
                                   {"project": source.local, "path": args["source_path"]},
                                   user, None, deadline)
        if not read.get("success"):
            return _outward(read, None, {"project": source})
        data = read["output"].get("data_b64")
        if not isinstance(data, str):
            return failure("runner_disconnected", f"runner {source.client_id} sent no bytes",
                           state_changed=False)
        written = await self._forward(destination.client_id, "artifact_write",
                                      {"project": destination.local,
                                       "path": args["destination_path"], "data_b64": data,
                                       "overwrite": bool(args.get("overwrite"))},
                                      user, None, deadline)
        if written.get("success") and read["output"].get("sha256") != \
                written["output"].get("sha256"):
            log.warning("cross-runner transfer: destination sha256 differs from the source")
        return _outward(written, None, {"project": destination})

    # ------------------------------------------------------------------- jobs --

    def _job(self, user: str, job_id: str) -> dict[str, Any]:
        row = self.index.job(job_id) if isinstance(job_id, str) else None
        if row is not None and row.get("user") == user \
                and self._runner_owner_ok(row.get("client_id"), user):
            return row
        raise ToolFailure("job_not_found", f"job not found: {str(job_id)[:100]}")

    async def _job_query(self, user: str, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        """observe_jobs / wait_for_job_readiness, routed by job id to the jobs' runners."""
        if tool == "observe_jobs":
            ids = [item["job_id"] for item in args["items"]]
        else:
            ids = list(args["job_ids"])
        rows = {job_id: self._job(user, job_id) for job_id in ids}
        by_runner: dict[str, list[str]] = {}
        for job_id in ids:
            by_runner.setdefault(rows[job_id]["client_id"], [])
            if job_id not in by_runner[rows[job_id]["client_id"]]:
                by_runner[rows[job_id]["client_id"]].append(job_id)

        def part(job_ids: list[str]) -> dict[str, Any]:
            if tool == "observe_jobs":
                return {**args, "items": [i for i in args["items"] if i["job_id"] in job_ids]}
            return {**args, "job_ids": job_ids}

        if len(by_runner) == 1:
            (client_id, _), = by_runner.items()
            return await self._forward(client_id, tool, args, user, None)
        if tool == "wait_for_job_readiness" and args["mode"] == "any":
            return await self._wait_any(user, by_runner, part, ids)
        replies = await asyncio.gather(*(self._forward(c, tool, part(j), user, None)
                                         for c, j in by_runner.items()))
        for reply in replies:
            if not reply.get("success"):
                return reply
        if tool == "observe_jobs":
            found = {item.get("job_id"): item for reply in replies
                     for item in reply["output"].get("items") or []}
            return success({"items": [found[i["job_id"]] for i in args["items"]
                                      if i["job_id"] in found]})
        return success(_merge_readiness(replies, ids))

    async def _wait_any(self, user: str, by_runner: dict[str, list[str]], part: Any,
                        ids: list[str]) -> dict[str, Any]:
        """One join over several runners: the first runner with a ready job answers."""
        tasks = {asyncio.ensure_future(self._forward(c, "wait_for_job_readiness", part(j),
                                                     user, None)): c
                 for c, j in by_runner.items()}
        replies: list[dict[str, Any]] = []
        pending = set(tasks)
        try:
            while pending:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    reply = task.result()
                    if not reply.get("success"):
                        return reply
                    replies.append(reply)
                if any(r["output"].get("ready_job_ids") for r in replies):
                    break
        finally:
            for task in pending:
                task.cancel()
        merged = _merge_readiness(replies, ids)
        merged["pending_job_ids"] = [i for i in ids if i not in merged["ready_job_ids"]]
        if merged["ready_job_ids"]:
            merged["timed_out"] = False
        return success(merged)

    async def _write_job_input(self, user: str, args: dict[str, Any]) -> dict[str, Any]:
        project = self._project(user, args["project"])
        row = self._job(user, args["job_id"])
        if row["client_id"] != project.client_id or \
                row.get("project") not in (None, project.project_id):
            raise ToolFailure("job_not_found", f"job not found: {args['job_id'][:100]}")
        return await self._forward_in(project.client_id, "write_job_input", args, user, None,
                                      {"project": project})

    def _job_event(self, client_id: str, event: dict[str, Any]) -> None:
        """A runner announced a job change: remember whose it is (the runner's owner)."""
        job_id = event.get("job_id")
        if not isinstance(job_id, str):
            return
        runner = self._runner(client_id)
        owner = runner.get("owner") if runner else None
        self.index.record_job(job_id, client_id=client_id, user=owner, session=None,
                              project=None)
        status = event.get("status")
        self.index.note_job_status(job_id, client_id, status if isinstance(status, str)
                                   else None)

    def _hello(self, client_id: str, hello: dict[str, Any]) -> None:
        """Jobs a reconnecting runner still runs stay reachable (even after a server restart
        that lost nothing, the index keeps them; this covers a job announced only here)."""
        for job_id in hello.get("live_job_ids") or []:
            if isinstance(job_id, str):
                self.index.record_job(job_id, client_id=client_id, user=hello.get("owner"),
                                      session=None, project=None)


# ------------------------------------------------------------------ helpers --


def _merge_readiness(replies: list[dict[str, Any]], ids: list[str]) -> dict[str, Any]:
    ready = {j for r in replies for j in r["output"].get("ready_job_ids") or []}
    return {"ready_job_ids": [i for i in ids if i in ready],
            "pending_job_ids": [i for i in ids if i not in ready],
            "timed_out": any(bool(r["output"].get("timed_out")) for r in replies)}


def _outward(envelope: dict[str, Any], session: SessionRef | None,
             projects: dict[str, ProjectRef]) -> dict[str, Any]:
    """A runner's envelope with public ids: raw session ids become ``mmo_sess_<id>`` and a
    ``suggested_call``'s local project ids their ``runner:<client>:<id>`` form, so following
    the suggestion as given is correct."""
    local = {p.local: p.project_id for p in projects.values()}
    output = _public_sessions(envelope.get("output"), session)
    if isinstance(output, dict) and isinstance(output.get("suggested_call"), dict):
        call = dict(output["suggested_call"])
        arguments = call.get("arguments")
        if isinstance(arguments, dict):
            call["arguments"] = _public_projects(arguments, local)
        output["suggested_call"] = call
    return {**envelope, "output": output}


def _public_sessions(value: Any, session: SessionRef | None) -> Any:
    if session is None:
        return value
    if isinstance(value, dict):
        return {k: (session.public if k == "session_id" and v == session.raw
                    else _public_sessions(v, session)) for k, v in value.items()}
    if isinstance(value, list):
        return [_public_sessions(v, session) for v in value]
    return value


def _public_projects(arguments: dict[str, Any], local: dict[str, str]) -> dict[str, Any]:
    return {k: (local.get(v, v) if k in PROJECT_KEYS and isinstance(v, str) else v)
            for k, v in arguments.items()}


def _without_tokens(value: Any) -> Any:
    """``value`` with every MMO token (``mmo_adm_`` / ``mmo_pat_`` / ``mmo_rt_``) replaced."""
    if isinstance(value, str):
        return MMO_TOKEN_TEXT.sub(REDACTED_TOKEN, value) if "mmo_" in value else value
    if isinstance(value, dict):
        return {k: _without_tokens(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_tokens(v) for v in value]
    return value


def redact_secret_lines(text: str) -> str:
    """Known credential values redacted, and every line that looks like it holds a secret
    (``password: ...``, bearer tokens, key prefixes, PEM keys) replaced as a whole."""
    lines = redact_text(text).split("\n")
    return "\n".join(REDACTED_LINE if _SECRET_LINE.search(line) else line for line in lines)


def _bounded_brief(lines: list[str]) -> str:
    """At most 8 KiB of UTF-8, cut at a line boundary with a marker line."""
    text = redact_secret_lines("\n".join(lines))
    if len(text.encode("utf-8")) <= HANDOFF_BRIEF_BYTES:
        return text
    marker = "[... handoff brief truncated ...]"
    budget = HANDOFF_BRIEF_BYTES - len(marker.encode("utf-8")) - 1
    kept: list[str] = []
    used = 0
    for line in text.split("\n"):
        size = len(line.encode("utf-8")) + 1
        if used + size > budget:
            if not kept:  # one huge first line: cut inside it, on a character boundary
                kept.append(line.encode("utf-8")[:budget - 1].decode("utf-8", "ignore"))
            break
        kept.append(line)
        used += size
    return "\n".join([*kept, marker])


__all__ = ["Router", "SELECTOR_ERROR", "redact_secret_lines"]

"""The project-tool catalog of spec 12: every tool's scope, listing, annotations and arguments.

One definition serves the MCP endpoint (``tools/list``, which tool names a surface
accepts), the router (scope check, argument validation) and the runner (the forwarded
arguments have the same field names). Argument models reject unknown fields; the
invocation envelope ``_mmo`` is stripped before validation (see :func:`split_mmo`).
Bounds that are pure argument shapes (page sizes, item counts, wait caps) live here so
every surface refuses them identically with ``invalid_arguments``; rules that depend on
state (step ids unique, selector rules) belong to the tool.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from mmo_kernel.project_tools.envelope import ToolFailure

SCOPES: tuple[str, ...] = ("read", "write", "execute", "goals", "delegate", "admin")
UI_MIME_TYPE = "text/html;profile=mcp-app"
UI_EXTENSION = "io.modelcontextprotocol/ui"
DISPATCHER = "call_project_tool"

Listing = Literal["direct", "dispatcher", "app", "internal"]
RunsOn = Literal["server", "runner"]

MiB = 1024 * 1024
Id = Annotated[str, Field(min_length=1, max_length=512)]
RelPath = Annotated[str, Field(min_length=1, max_length=4096)]


class Args(BaseModel):
    """Base of every argument model: unknown fields are refused (spec 12 "Tool results"), and
    so is a value of another JSON type than ``inputSchema`` says (no ``"yes"`` for a boolean,
    no ``"5"`` or ``true`` for an integer): a bad argument is never guessed into a good one."""

    model_config = ConfigDict(extra="forbid", strict=True)


def _utf8_at_most(limit: int, what: str):  # type: ignore[no-untyped-def]
    def check(value: str | None) -> str | None:
        if value is not None and len(value.encode("utf-8", "surrogatepass")) > limit:
            raise ValueError(f"{what} exceeds {limit // MiB} MiB")
        return value
    return check


# --- projects and sessions -------------------------------------------------------------

class MmoInvocation(Args):
    """The invocation envelope ``_mmo``: bookkeeping only, never selects a session."""

    record: Id | None = Field(None, description="Session id or ref whose activity log records "
                                                "this call.")


class ListProjectsArgs(Args):
    pass


class WorkOnProjectArgs(Args):
    project: Id | None = Field(None, description="Project id (runner:<client_id>:<id>) or "
                                                 "project_ref (~p<n>).")
    client_id: Id | None = Field(None, description="Runner client_id; required with path.")
    path: RelPath | None = Field(None, description="A path inside a registered project on that "
                                                   "runner (needs client_id).")
    session_id: Id | None = Field(None, description="Resume exactly this session (id or ref); "
                                                    "omitted: always start a new session.")
    instruction: str = Field(max_length=64 * 1024, description="What this session is for.")


class ReadSessionHandoffArgs(Args):
    project: Id
    session_id: Id
    include_workspace: bool = Field(description="Include git branch and dirty paths.")


# --- files -------------------------------------------------------------------------------

class ReadFilesItem(Args):
    path: RelPath = Field(description="Project-relative POSIX path.")
    limit: int = Field(400, ge=1, le=2000, description="Lines per page.")
    cursor: int = Field(0, ge=0, description="Lines already returned (next_cursor of the "
                                             "previous page).")
    expected_read_revision: str | None = Field(None, max_length=100,
                                               description="Fail stale_file_revision if the "
                                                           "bytes differ.")


class ReadFilesArgs(Args):
    project: Id
    session_id: Id | None = None
    items: list[ReadFilesItem] = Field(min_length=1, max_length=20)


class ReplaceExactEdit(Args):
    kind: Literal["replace_exact"]
    old_text: str = Field(min_length=1, description="Must occur exactly once.")
    new_text: str


class CreateChange(Args):
    kind: Literal["create"]
    path: RelPath
    content: str

    bound_content = field_validator("content")(_utf8_at_most(4 * MiB, "content"))


class EditChange(Args):
    kind: Literal["edit"]
    path: RelPath
    expected_read_revision: str = Field(max_length=100)
    edits: list[ReplaceExactEdit] = Field(min_length=1)

    @field_validator("edits")
    @classmethod
    def _bounded(cls, edits: list[ReplaceExactEdit]) -> list[ReplaceExactEdit]:
        size = sum(len(e.new_text.encode("utf-8", "surrogatepass")) for e in edits)
        if size > 4 * MiB:
            raise ValueError("new_text exceeds 4 MiB per change")
        return edits


class EditProjectFilesArgs(Args):
    project: Id
    session_id: Id | None = None
    changes: list[Annotated[CreateChange | EditChange, Field(discriminator="kind")]] = Field(
        min_length=1, max_length=50)


class TransferProjectArtifactArgs(Args):
    source_project: Id
    source_path: RelPath
    destination_project: Id
    destination_path: RelPath
    overwrite: bool = False


# --- process execution -------------------------------------------------------------------

class RunScriptArgs(Args):
    project: Id
    session_id: Id
    language: Literal["python", "shell"]
    script: str = Field(min_length=1)
    timeout_secs: float = Field(60, gt=0, description="Kill the process group after this.")
    wait_secs: float = Field(20, ge=0, le=30, description="Wait inline up to this long.")
    purpose: str | None = Field(None, max_length=200,
                                description='"validation" marks the session\'s latest '
                                            'validation run.')

    bound_script = field_validator("script")(_utf8_at_most(4 * MiB, "script"))


class RunProcessArgs(Args):
    project: Id
    session_id: Id
    executable: str = Field(min_length=1, max_length=4096)
    args: list[str]
    cwd: RelPath | None = Field(None, description="Project-relative working directory.")
    stdin: str | None = None
    interactive: bool = Field(False, description="Return at once with stdin open.")
    timeout_secs: float = Field(gt=0)
    wait_secs: float = Field(20, ge=0, le=30)

    bound_stdin = field_validator("stdin")(_utf8_at_most(MiB, "stdin"))


class ObserveJobsItem(Args):
    job_id: Id
    after_observation_token: str | None = Field(None, max_length=200)


class ObserveJobsArgs(Args):
    items: list[ObserveJobsItem] = Field(min_length=1, max_length=50)
    tail_lines: int = Field(80, ge=0, le=500)
    wait_secs: float = Field(0, ge=0, le=30)


class WaitForJobReadinessArgs(Args):
    job_ids: list[Id] = Field(min_length=1, max_length=50)
    mode: Literal["all", "any"]
    wait_secs: float = Field(ge=0, le=30)


class WriteJobInputArgs(Args):
    project: Id
    job_id: Id
    input_id: Id
    data: str | None = None
    close: bool = False

    bound_data = field_validator("data")(_utf8_at_most(MiB, "data"))


# --- review, finish, work results --------------------------------------------------------

class WorkspaceScope(Args):
    kind: Literal["workspace"]


class CommitScope(Args):
    kind: Literal["commit"]
    rev: str = Field(min_length=1, max_length=256)


class JobScope(Args):
    kind: Literal["job"]
    job_id: Id


class ReviewChangesArgs(Args):
    project: Id
    session_id: Id
    scope: Annotated[WorkspaceScope | CommitScope | JobScope, Field(discriminator="kind")]
    paths: list[RelPath] | None = None


class FinishCodingTaskArgs(Args):
    project: Id
    session_id: Id
    summary: str | None = Field(None, max_length=64 * 1024)
    summary_only: bool = False
    outputs: list[RelPath] | None = Field(None, max_length=200,
                                          description="Paths to verify by sha256.")


class GetWorkResultStateArgs(Args):
    project: Id
    session_id: Id


# --- goal plans --------------------------------------------------------------------------

class GoalStepInput(Args):
    id: str = Field(min_length=1, max_length=200)
    title: str = Field(max_length=2000)


class PrepareGoalWorkflowArgs(Args):
    session_id: Id
    title: str = Field(max_length=2000)
    objective: str = Field(max_length=64 * 1024)
    completion_conditions: list[str]
    steps: list[GoalStepInput]
    idempotency_key: Id


class CheckpointGoalArgs(Args):
    goal_id: Id
    expected_revision: int
    completed_step_ids: list[str] = Field(default_factory=list)
    current_step_id: str | None = None
    summary: str = Field(max_length=64 * 1024)
    idempotency_key: Id


class ReviseGoalPlanArgs(Args):
    goal_id: Id
    expected_revision: int
    reason: str = Field(max_length=64 * 1024)
    steps: list[GoalStepInput]
    idempotency_key: Id


class UpdateGoalArgs(Args):
    goal_id: Id
    expected_revision: int
    lifecycle: Literal["active", "completed", "abandoned"]
    terminal_reason: str | None = Field(None, max_length=64 * 1024)
    idempotency_key: Id


class GetGoalArgs(Args):
    goal_id: Id


class PresentGoalPlanArgs(Args):
    goal_id: Id


# --- worker teams ------------------------------------------------------------------------

class TeamAgentRequest(Args):
    agent: Id
    task: str
    task_kind: str | None = None
    mode: Literal["read-only", "workspace-write"] | None = None
    write_scopes: list[str] | None = None


class TeamAgentsArgs(Args):
    session_id: Id


class TeamSpawnArgs(Args):
    session_id: Id
    agents: list[TeamAgentRequest] = Field(min_length=1)
    idempotency_key: Id


class TeamStatusArgs(Args):
    session_id: Id
    job_ids: list[Id] = Field(min_length=1)


class TeamWaitArgs(Args):
    session_id: Id
    job_ids: list[Id] = Field(min_length=1)
    timeout_seconds: float = Field(ge=0, le=60)
    after_revision: dict[str, int] | None = None


class TeamResultArgs(Args):
    session_id: Id
    job_id: Id
    cursor: int | None = Field(None, ge=0)
    max_chars: int | None = Field(None, ge=1)


class TeamJobReasonArgs(Args):
    session_id: Id
    job_id: Id
    reason: str = Field(max_length=64 * 1024)


class TeamAcceptArgs(TeamJobReasonArgs):
    pass


class TeamRejectArgs(TeamJobReasonArgs):
    pass


class TeamIntegrateArgs(TeamJobReasonArgs):
    pass


class TeamCancelArgs(TeamJobReasonArgs):
    pass


# --- the dispatcher and the router's internal runner tools -------------------------------

class CallProjectToolArgs(Args):
    tool: str = Field(min_length=1, max_length=200, description="The project tool to call.")
    arguments: dict[str, Any] = Field(default_factory=dict,
                                      description="That tool's arguments.")


class ResolveProjectPathArgs(Args):
    path: str = Field(min_length=1, max_length=4096)


class SessionStatusArgs(Args):
    session_id: Id


class ArtifactReadArgs(Args):
    project: Id
    path: RelPath


class ArtifactWriteArgs(Args):
    project: Id
    path: RelPath
    data_b64: str
    overwrite: bool = False


# --- the catalog -------------------------------------------------------------------------

@dataclass(frozen=True)
class ToolSpec:
    """One tool: ``scope`` None means the tool itself needs none (dispatcher, internal)."""

    name: str
    scope: str | None
    runs_on: RunsOn
    listing: Listing
    annotations: dict[str, bool]
    description: str
    args: type[BaseModel]
    ui_resource: str | None = None
    title: str = field(default="")


def _hints(read_only: bool, destructive: bool, idempotent: bool,
           open_world: bool = False) -> dict[str, bool]:
    return {"readOnlyHint": read_only, "destructiveHint": destructive,
            "idempotentHint": idempotent, "openWorldHint": open_world}


READ = _hints(True, False, True)
GOAL_UI = "ui://mmo/goal-plan"
WORK_RESULT_UI = "ui://mmo/work-result"

_SPECS: list[ToolSpec] = [
    ToolSpec("list_projects", "read", "server", "direct", READ,
             "List the projects of your online and offline runners, with ids and refs.",
             ListProjectsArgs),
    ToolSpec("work_on_project", "read", "runner", "direct", _hints(False, False, False),
             "Start a new session on a project (or resume exactly the session_id given); "
             "returns the session id/ref and the project's AGENTS.md instructions.",
             WorkOnProjectArgs),
    ToolSpec("read_files", "read", "runner", "direct", READ,
             "Read text files of a project by pages of lines; follow suggested_call to read "
             "the rest without skipping or repeating a line.",
             ReadFilesArgs),
    ToolSpec("edit_project_files", "write", "runner", "direct", _hints(False, True, False),
             "Create files or replace exact text in files read before (expected_read_revision); "
             "all changes apply atomically or none does.",
             EditProjectFilesArgs),
    ToolSpec("run_script", "execute", "runner", "direct", _hints(False, True, False, True),
             "Run a script as a process job in the project root; waits inline up to wait_secs, "
             "else returns a pending job to wait for.",
             RunScriptArgs),
    ToolSpec("run_process", "execute", "runner", "direct", _hints(False, True, False, True),
             "Start an executable as a process job in the project (optionally interactive "
             "with stdin open).",
             RunProcessArgs),
    ToolSpec("observe_jobs", "read", "runner", "direct", READ,
             "Status and output tails of process jobs; with after_observation_token waits up "
             "to wait_secs for a change.",
             ObserveJobsArgs),
    ToolSpec("wait_for_job_readiness", "read", "runner", "direct", READ,
             "Wait until all (or any) of the process jobs are terminal, up to wait_secs.",
             WaitForJobReadinessArgs),
    ToolSpec("review_changes", "read", "runner", "direct", READ,
             "Git review of the working tree, a commit or a worker job's patch: files and diff.",
             ReviewChangesArgs),
    ToolSpec("finish_coding_task", "write", "runner", "direct", _hints(False, False, False),
             "Record the session's work result: verify outputs by sha256, report the task "
             "outcome and changes; the session stays open.",
             FinishCodingTaskArgs),
    ToolSpec(DISPATCHER, None, "server", "direct", _hints(False, True, False, True),
             "Call any project tool by name with its arguments and return its result unchanged. "
             "Tools reached only here: read_session_handoff, transfer_project_artifact, "
             "write_job_input, prepare_goal_workflow, checkpoint_goal, revise_goal_plan, "
             "update_goal, get_goal, present_goal_plan, team_agents, team_spawn, team_status, "
             "team_wait, team_result, team_accept, team_reject, team_integrate, team_cancel.",
             CallProjectToolArgs),
    ToolSpec("get_work_result_state", "read", "server", "app", READ,
             "The session's latest work result (for the work-result view).",
             GetWorkResultStateArgs, WORK_RESULT_UI),
    ToolSpec("read_session_handoff", "read", "server", "dispatcher", READ,
             "A session's handoff: instruction, brief, recent activity, goal context and "
             "optionally the git workspace.",
             ReadSessionHandoffArgs),
    ToolSpec("transfer_project_artifact", "write", "runner", "dispatcher",
             _hints(False, True, False),
             "Copy a file byte-exact between projects (also across runners), up to 256 MiB.",
             TransferProjectArtifactArgs),
    ToolSpec("write_job_input", "execute", "runner", "dispatcher", _hints(False, False, True),
             "Write to (or close) an interactive process job's stdin; same input_id and "
             "payload return the same receipt.",
             WriteJobInputArgs),
    ToolSpec("prepare_goal_workflow", "goals", "server", "dispatcher",
             _hints(False, False, True),
             "Create the session's goal plan (revision 1, all steps pending).",
             PrepareGoalWorkflowArgs),
    ToolSpec("checkpoint_goal", "goals", "server", "dispatcher", _hints(False, False, True),
             "Mark steps completed and set (or clear) the current step.",
             CheckpointGoalArgs),
    ToolSpec("revise_goal_plan", "goals", "server", "dispatcher", _hints(False, True, True),
             "Replace the plan's steps (completed steps stay, in order); the prior plan goes "
             "to plan_history.",
             ReviseGoalPlanArgs),
    ToolSpec("update_goal", "goals", "server", "dispatcher", _hints(False, True, True),
             "Set the goal's lifecycle (completed needs every step completed, or abandoned).",
             UpdateGoalArgs),
    ToolSpec("get_goal", "read", "server", "dispatcher", READ,
             "The goal record: summary, plan and plan history.", GetGoalArgs),
    ToolSpec("present_goal_plan", "read", "server", "dispatcher", READ,
             "The goal plan card (for the goal-plan view).", PresentGoalPlanArgs, GOAL_UI),
    ToolSpec("team_agents", "read", "runner", "dispatcher", READ,
             "The worker agents the session's lead may spawn, with model and permissions.",
             TeamAgentsArgs),
    ToolSpec("team_spawn", "delegate", "runner", "dispatcher", _hints(False, False, True, True),
             "Spawn worker jobs atomically; replaying the idempotency_key returns the same "
             "job_ids.",
             TeamSpawnArgs),
    ToolSpec("team_status", "read", "runner", "dispatcher", READ,
             "Public records of the session's worker jobs.", TeamStatusArgs),
    ToolSpec("team_wait", "delegate", "runner", "dispatcher", READ,
             "Wait (up to 60 s) for worker jobs to finish or progress.", TeamWaitArgs),
    ToolSpec("team_result", "delegate", "runner", "dispatcher", _hints(False, False, True),
             "Read one page of a worker job's result.", TeamResultArgs),
    ToolSpec("team_accept", "delegate", "runner", "dispatcher", _hints(False, False, False),
             "Accept a worker job's result.", TeamAcceptArgs),
    ToolSpec("team_reject", "delegate", "runner", "dispatcher", _hints(False, False, False),
             "Reject a worker job's result.", TeamRejectArgs),
    ToolSpec("team_integrate", "delegate", "runner", "dispatcher", _hints(False, True, False),
             "Integrate a writer job's reviewed patch into the project transactionally.",
             TeamIntegrateArgs),
    ToolSpec("team_cancel", "delegate", "runner", "dispatcher", _hints(False, True, False),
             "Cancel a worker job.", TeamCancelArgs),
    # Router-only calls to a runner: never listed, never accepted from a client.
    ToolSpec("resolve_project_path", None, "runner", "internal", READ,
             "The local project id holding a path.", ResolveProjectPathArgs),
    ToolSpec("session_status", None, "runner", "internal", READ,
             "An MMO session's status and workspace.", SessionStatusArgs),
    ToolSpec("artifact_read", None, "runner", "internal", READ,
             "A file's bytes for a cross-runner transfer.", ArtifactReadArgs),
    ToolSpec("artifact_write", None, "runner", "internal", _hints(False, True, False),
             "Write a cross-runner transfer's bytes.", ArtifactWriteArgs),
]

TOOLS: dict[str, ToolSpec] = {spec.name: spec for spec in _SPECS}
DIRECT_TOOLS: tuple[str, ...] = tuple(s.name for s in _SPECS if s.listing == "direct")
INTERNAL_TOOLS: frozenset[str] = frozenset(s.name for s in _SPECS if s.listing == "internal")


def client_tool(name: str, ui_capable: bool) -> ToolSpec | None:
    """The tool a client may call by ``name`` (through the dispatcher or, if listed,
    directly), or None: internal tools never, app-only tools only for UI-capable clients."""
    spec = TOOLS.get(name)
    if spec is None or spec.listing == "internal":
        return None
    if spec.listing == "app" and not ui_capable:
        return None
    return spec


def direct_tool(name: str, ui_capable: bool) -> ToolSpec | None:
    """The tool ``tools/call`` accepts by ``name`` (a listed tool), or None (``unknown tool``)."""
    spec = client_tool(name, ui_capable)
    return spec if spec is not None and spec.listing in ("direct", "app") else None


def split_mmo(arguments: dict[str, Any]) -> tuple[dict[str, Any], MmoInvocation | None]:
    """``arguments`` without ``_mmo``, and the parsed invocation envelope (or None)."""
    rest = {k: v for k, v in arguments.items() if k != "_mmo"}
    raw = arguments.get("_mmo")
    if raw is None:
        return rest, None
    try:
        return rest, MmoInvocation.model_validate(raw)
    except ValidationError as exc:
        raise ToolFailure("invalid_arguments", _message("_mmo", exc)) from None


def validate_arguments(name: str, arguments: Any) -> BaseModel:
    """The validated argument model of tool ``name`` (``_mmo`` stripped first).

    Raises ``ToolFailure("unknown_tool")`` for an unknown name and
    ``ToolFailure("invalid_arguments")`` naming the first bad field, never its value.
    """
    spec = TOOLS.get(name)
    if spec is None:
        raise ToolFailure("unknown_tool", f"unknown tool: {name[:100]}")
    if not isinstance(arguments, dict):
        raise ToolFailure("invalid_arguments", f"invalid arguments for {name}: "
                                               "arguments must be an object")
    rest, _ = split_mmo(arguments)
    try:
        return spec.args.model_validate(rest)
    except ValidationError as exc:
        raise ToolFailure("invalid_arguments", _message(name, exc)) from None


def _message(name: str, exc: ValidationError) -> str:
    """One line naming the first bad field; pydantic's input values are never included."""
    errors = exc.errors(include_url=False, include_input=False)
    first = errors[0]
    where = ".".join(str(part) for part in first["loc"]) or "arguments"
    if first["type"] == "extra_forbidden":
        what = "unknown field"
    elif first["type"] == "missing":
        what = "field required"
    else:
        what = str(first["msg"]).removeprefix("Value error, ")
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"invalid arguments for {name}: {where}: {what}{more}"


# --- tools/list --------------------------------------------------------------------------

_MMO_SCHEMA = {
    "type": "object",
    "description": "Invocation envelope (bookkeeping only): record = a session id or ref "
                   "whose activity log records this call.",
    "properties": {"record": {"type": "string"}},
    "additionalProperties": False,
}


def input_schema(spec: ToolSpec) -> dict[str, Any]:
    """The tool's JSON Schema with ``$ref``s inlined and the ``_mmo`` envelope added."""
    schema = spec.args.model_json_schema()
    defs = schema.pop("$defs", {})
    schema = _inline(schema, defs)
    schema.pop("title", None)
    schema.setdefault("properties", {})["_mmo"] = copy.deepcopy(_MMO_SCHEMA)
    schema["additionalProperties"] = False
    return schema


def _inline(node: Any, defs: dict[str, Any]) -> Any:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            target = _inline(defs[ref.removeprefix("#/$defs/")], defs)
            merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
            return merged
        return {k: _inline(v, defs) for k, v in node.items()
                if k != "discriminator" and (k != "title" or not isinstance(v, str))}
    if isinstance(node, list):
        return [_inline(item, defs) for item in node]
    return node


def ui_meta(spec: ToolSpec) -> dict[str, Any] | None:
    """``_meta.ui`` of a UI tool: its resource and who may call it."""
    if spec.ui_resource is None:
        return None
    visibility = ["app"] if spec.listing == "app" else ["model", "app"]
    return {"resourceUri": spec.ui_resource, "visibility": visibility}


def mcp_tool(spec: ToolSpec) -> dict[str, Any]:
    """The MCP ``Tool`` object of one tool."""
    tool: dict[str, Any] = {"name": spec.name, "description": spec.description,
                            "inputSchema": input_schema(spec),
                            "annotations": dict(spec.annotations)}
    meta = ui_meta(spec)
    if meta is not None:
        tool["_meta"] = {"ui": meta}
    return tool


def listed_tools(ui_capable: bool) -> list[dict[str, Any]]:
    """``tools/list``: the direct tools, plus the app-only ones for UI-capable clients."""
    return [mcp_tool(s) for s in _SPECS
            if s.listing == "direct" or (s.listing == "app" and ui_capable)]


def ui_capable(capabilities: Any) -> bool:
    """True when client capabilities accept MCP Apps HTML (spec 12 "UI-capable")."""
    if not isinstance(capabilities, dict):
        return False
    extensions = capabilities.get("extensions")
    ui = extensions.get(UI_EXTENSION) if isinstance(extensions, dict) else None
    mime_types = ui.get("mimeTypes") if isinstance(ui, dict) else None
    return isinstance(mime_types, list) and UI_MIME_TYPE in mime_types

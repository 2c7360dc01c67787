"""Strict argument models of the mesh tools (pydantic, unknown fields rejected).

Field names are the API's keyword names (spec 07), except where the API's
name would be ambiguous to a model: ``job_id`` stands for ``source_job_id``
in ``agent_fork``. Loaded on the first ``tools/list`` or ``tools/call``,
never at start-up.

``SpawnRequest`` is also what admission takes (``mmo_kernel.jobs``): a
request validated here reaches admission as the same object, so the mesh
and the Python API can never disagree about what a valid spawn is.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

JobId = Annotated[
    str, Field(min_length=1, max_length=200, description="A job id returned by a spawn.")
]
Revision = Annotated[
    int,
    Field(
        ge=0, description="The job's current control_revision (from agent_inspect or agent_status)."
    ),
]


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class SpawnRequest(_Args):
    """One spawn request (spec 04 "Spawning", spec 07 ``agent_spawn``): the only definition."""

    agent: str = Field(description="The agent to spawn.")
    task_kind: str | None = Field(None, description="A short label for the kind of task.")
    task: str | None = Field(None, description="The full task for the agent.")
    mode: Literal["read-only", "workspace-write"] = Field(
        "read-only", description="workspace-write only for agents that may write."
    )
    write_scopes: list[str] | None = Field(
        None, description="Relative paths the job may write (workspace-write only)."
    )
    literal_task: dict[str, Any] | None = Field(
        None,
        description='For low-trust agents: {"operation": ..., ...} instead of a free-text task.',
    )
    attachments: list[str] | None = Field(None, description="Local image paths given to the agent.")


class AgentsSpawnArgs(_Args):
    agents: list[SpawnRequest] = Field(
        min_length=1, description="Jobs admitted all-or-nothing as one batch."
    )


class StatusArgs(_Args):
    job_ids: list[JobId] = Field(min_length=1)


MAX_WAIT_SECONDS = 1200.0
"""Longest ``agents_wait``: the default lifecycle timeout, so the reply beats Codex's tool
timeout (lifecycle + 30 s). A longer ``timeout_seconds`` is clamped and the result says so."""


class WaitArgs(_Args):
    job_ids: list[JobId] = Field(min_length=1)
    timeout_seconds: float = Field(
        60.0,
        ge=0,
        description=f"Longest wait in seconds (at most {MAX_WAIT_SECONDS:.0f}; longer is clamped).",
    )
    include_results: bool = Field(True, description="Add bounded result previews of finished jobs.")
    after_revision: dict[str, Annotated[int, Field(ge=0)]] | None = Field(
        None,
        description="Return as soon as a job's progress revision moves past this (one per job).",
    )


class ResultArgs(_Args):
    job_id: JobId
    cursor: int = Field(0, ge=0, description="Character offset; follow next_cursor.")
    max_chars: int = Field(20000, ge=1, le=200000)


class CancelArgs(_Args):
    job_id: JobId
    reason: str | None = Field(None, max_length=500)


class DispositionArgs(_Args):
    job_id: JobId
    reason: str = Field(
        min_length=1, max_length=2000, description="Why; recorded in the audit log."
    )


class InspectArgs(_Args):
    job_id: JobId


class TraceArgs(_Args):
    job_id: JobId
    cursor: int = Field(0, ge=0, description="0-based event line to start from.")
    limit: int = Field(50, ge=1, le=500)


class TraceRecordArgs(_Args):
    agent_run_ref: str = Field(min_length=1, description="The agent_run_ref of a trace record.")
    record_cursor: int = Field(ge=0, description="The record_cursor of the record to page.")
    cursor: int = Field(0, ge=0)
    max_chars: int = Field(20000, ge=1, le=200000)


class ControlArgs(_Args):
    job_id: JobId
    expected_revision: Revision


class SteerArgs(ControlArgs):
    input: str = Field(min_length=1, description="Guidance delivered into the active turn.")


class ContinueArgs(ControlArgs):
    input: str | None = Field(None, description="Input for the next turn.")


class SetEffortArgs(ControlArgs):
    effort: str = Field(min_length=1, description="One of the agent's allowed reasoning efforts.")


class RespondArgs(ControlArgs):
    request_id: str | int = Field(description="The id of a pending request (see agent_inspect).")
    response: dict[str, Any] = Field(
        description=(
            '{"decision": "accept"|"decline"|...} for approvals, {"answers": {...}} for user input.'
        )
    )


class ForkArgs(ControlArgs):
    task_kind: str | None = None
    task: str = Field(min_length=1, description="The task for the forked job.")


def _strip(node: Any, defs: dict[str, Any]) -> Any:
    """Inline ``$ref``s, drop titles and null branches so clients see plain object schemas."""
    if isinstance(node, list):
        return [_strip(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        return _strip(defs[node["$ref"].rsplit("/", 1)[-1]], defs)
    branches = node.get("anyOf")
    if isinstance(branches, list):
        kept = [b for b in branches if b != {"type": "null"}]
        merged = {k: v for k, v in node.items() if k != "anyOf"}
        if len(kept) == 1:
            merged.update(kept[0])
            node = merged
        elif all(set(b) == {"type"} and isinstance(b["type"], str) for b in kept):
            merged["type"] = [b["type"] for b in kept]
            node = merged
    out = {}
    for key, value in node.items():
        if key in ("title", "$defs") or (key == "default" and value is None):
            continue
        out[key] = value if key in ("default", "enum", "const") else _strip(value, defs)
    return out


def input_schema(model: type[BaseModel]) -> dict[str, Any]:
    """A plain JSON object schema (no ``$ref``, ``oneOf`` or null unions) for ``model``."""
    raw = model.model_json_schema()
    schema = _strip(raw, raw.get("$defs", {}))
    schema.setdefault("properties", {})
    return schema

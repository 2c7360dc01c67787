"""Tool definitions (``tools/list`` entries): argument model, description, annotations."""

from __future__ import annotations

from collections.abc import Sequence
from copy import deepcopy
from dataclasses import dataclass
from functools import cache
from typing import Any

from pydantic import BaseModel

from mmo_kernel.mesh import arguments as a


@dataclass(frozen=True)
class ToolSpec:
    """One mesh tool: the model validating its arguments and how clients should treat it."""

    name: str
    model: type[BaseModel]
    description: str
    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False


def _spec(name: str, model: type[BaseModel], description: str, **hints: bool) -> ToolSpec:
    return ToolSpec(name, model, description, **hints)


TOOL_SPECS: dict[str, ToolSpec] = {
    s.name: s
    for s in (
        _spec(
            "agent_spawn",
            a.SpawnRequest,
            "Delegate a task to one worker agent; returns its job.",
        ),
        _spec(
            "agents_spawn",
            a.AgentsSpawnArgs,
            "Delegate several tasks at once, admitted all-or-nothing.",
        ),
        _spec("agent_status", a.StatusArgs, "Current public status of jobs."),
        _spec(
            "agents_wait",
            a.WaitArgs,
            "Wait until jobs finish or progress, or stop to await your control "
            "(suspended, paused), with bounded result previews.",
        ),
        _spec(
            "agent_result",
            a.ResultArgs,
            "Read a job's result page by page (reading marks it read).",
        ),
        _spec("agent_cancel", a.CancelArgs, "Cancel a job and its descendants.", destructive=True),
        _spec("agent_result_accept", a.DispositionArgs, "Accept a job's read result."),
        _spec("agent_result_reject", a.DispositionArgs, "Reject a job's read result."),
        _spec(
            "agent_patch_integrate",
            a.DispositionArgs,
            "Apply an accepted writer's patch to the canonical workspace.",
            destructive=True,
        ),
        _spec(
            "agent_inspect",
            a.InspectArgs,
            "A job's record and live state (pending requests, revision).",
            read_only=True,
            idempotent=True,
        ),
        _spec(
            "agent_trace",
            a.TraceArgs,
            "Page through a job's filtered event trace.",
            read_only=True,
            idempotent=True,
        ),
        _spec(
            "agent_trace_record",
            a.TraceRecordArgs,
            "Page one full trace record losslessly.",
            read_only=True,
            idempotent=True,
        ),
        _spec("agent_steer", a.SteerArgs, "Send guidance into a job's active turn."),
        _spec("agent_interrupt", a.ControlArgs, "Interrupt a job's turn, keeping its thread."),
        _spec("agent_pause", a.ControlArgs, "Cold-pause a job."),
        _spec("agent_continue", a.ContinueArgs, "Continue a paused, interrupted or suspended job."),
        _spec("agent_detach", a.ControlArgs, "Let a job keep working without its caller."),
        _spec(
            "agent_stop",
            a.ControlArgs,
            "Stop a job, keeping its partial evidence.",
            destructive=True,
        ),
        _spec("agent_compact", a.ControlArgs, "Compact a job's thread."),
        _spec("agent_finalize", a.ControlArgs, "Ask a job for its final result now."),
        _spec(
            "agent_set_effort",
            a.SetEffortArgs,
            "Change a job's reasoning effort for its next turn.",
        ),
        _spec(
            "agent_respond", a.RespondArgs, "Answer a job's pending approval or user-input request."
        ),
        _spec("agent_fork", a.ForkArgs, "Fork a job's thread into a new job with a new task."),
    )
}


@cache
def _base_schema(name: str) -> dict[str, Any]:
    return a.input_schema(TOOL_SPECS[name].model)


def input_schema(name: str, spawnable: Sequence[str]) -> dict[str, Any]:
    """The tool's input schema; spawn tools list exactly the spawnable agents as an enum."""
    schema = deepcopy(_base_schema(name))
    if name == "agent_spawn":
        schema["properties"]["agent"]["enum"] = list(spawnable)
    elif name == "agents_spawn":
        schema["properties"]["agents"]["items"] = input_schema("agent_spawn", spawnable)
    return schema


def tool_annotations(spec: ToolSpec) -> dict[str, Any]:
    """MCP tool annotations, every hint an explicit boolean."""
    return {
        "title": spec.name.replace("_", " "),
        "readOnlyHint": spec.read_only,
        "destructiveHint": spec.destructive,
        "idempotentHint": spec.idempotent,
        "openWorldHint": False,
    }


def definitions(names: Sequence[str], spawnable: Sequence[str]) -> list[dict[str, Any]]:
    """``tools/list`` entries for ``names``, in that order."""
    return [
        {
            "name": name,
            "description": TOOL_SPECS[name].description,
            "inputSchema": input_schema(name, spawnable),
            "annotations": tool_annotations(TOOL_SPECS[name]),
        }
        for name in names
    ]

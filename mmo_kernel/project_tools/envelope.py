"""Tool-result envelopes of spec 12 ("Tool results"), shared by `mmo serve` and `mmo runner`.

Every tool call, wherever it runs, ends as one ENVELOPE ``{"success", "output",
"error"?}``; the MCP endpoint wraps it with :func:`mcp_result`. A tool signals failure
by raising :class:`ToolFailure`, so executors never build failure dicts by hand and
the one-line rule for ``error`` is enforced in one place.
"""

from __future__ import annotations

import json
from typing import Any, Literal

ERROR_KINDS: tuple[str, ...] = (
    "invalid_arguments", "unknown_tool", "insufficient_scope", "invalid_project_selector",
    "project_not_found", "session_not_found", "session_terminal", "runner_unavailable",
    "runner_disconnected", "path_outside_project", "not_a_regular_file", "file_not_found",
    "not_a_text_file", "stale_file_revision", "file_exists", "edit_text_not_found",
    "edit_text_not_unique", "destination_exists", "policy_denied", "nonzero_exit",
    "timeout", "job_limit_reached", "job_not_found", "job_not_running",
    "job_input_conflict", "job_stdin_closed", "not_a_git_project", "goal_not_found",
    "goal_idempotency_conflict", "goal_revision_changed", "invalid_goal_plan",
    "goal_terminal", "goal_steps_incomplete", "team_unavailable", "admission_refused",
    "permission_denied",
)
"""The spec's error kinds, exactly and in its order."""

StateChanged = Literal[False, True, "unknown"]
FOLLOWABLE = "mechanically_followable"
NEEDS_JUDGEMENT = "needs_judgement"
MAX_ERROR_CHARS = 500
"""An ``error`` is one short line; longer texts are cut (a message never carries a payload)."""


def one_line(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    """``text`` on one line (whitespace runs collapsed), at most ``limit`` characters."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


class ToolFailure(Exception):
    """A tool's failed result: raised by executors and server tools, turned into an envelope.

    ``extra`` is merged into the failure's ``output`` (e.g. ``suggested_call``, ``reason``,
    ``job_id``); it must hold no absolute path of the runner's machine and no secret.
    """

    def __init__(self, kind: str, message: str, state_changed: StateChanged = False,
                 **extra: Any) -> None:
        if kind not in ERROR_KINDS:
            raise ValueError(f"unknown error kind {kind!r}")
        self.kind = kind
        self.message = one_line(message)
        self.state_changed: StateChanged = state_changed
        self.extra: dict[str, Any] = dict(extra)
        super().__init__(self.message)


def success(output: dict[str, Any]) -> dict[str, Any]:
    """The successful envelope of ``output``."""
    return {"success": True, "output": output}


def failure(kind: str, error: str, state_changed: StateChanged = False,
            **extra: Any) -> dict[str, Any]:
    """The failed envelope: ``output`` holds ``error_kind``, ``state_changed`` and ``extra``."""
    return from_exception(ToolFailure(kind, error, state_changed, **extra))


def from_exception(exc: ToolFailure) -> dict[str, Any]:
    """The failed envelope of a raised :class:`ToolFailure`."""
    output = {**exc.extra, "error_kind": exc.kind, "state_changed": exc.state_changed}
    return {"success": False, "output": output, "error": exc.message}


def suggested(tool: str, arguments: dict[str, Any], followable: bool,
              reason: str) -> dict[str, Any]:
    """A ``suggested_call``; ``followable`` means calling it exactly as given is correct."""
    return {"tool": tool, "arguments": arguments,
            "follow_up_kind": FOLLOWABLE if followable else NEEDS_JUDGEMENT,
            "reason": one_line(reason)}


def compact_json(value: Any) -> str:
    """The compact JSON text used in ``content`` and for size accounting."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def mcp_result(envelope: dict[str, Any]) -> dict[str, Any]:
    """The MCP ``tools/call`` result of an envelope (structured and text forms are equal)."""
    return {"structuredContent": envelope,
            "content": [{"type": "text", "text": compact_json(envelope)}],
            "isError": not envelope.get("success", False)}


def is_envelope(value: Any) -> bool:
    """True when ``value`` has the envelope shape (a runner reply is checked with this)."""
    if not isinstance(value, dict) or not isinstance(value.get("success"), bool):
        return False
    if not isinstance(value.get("output"), dict):
        return False
    if value["success"]:
        return set(value) <= {"success", "output"}
    return (set(value) <= {"success", "output", "error"} and isinstance(value.get("error"), str)
            and value["output"].get("error_kind") in ERROR_KINDS)

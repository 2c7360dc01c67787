"""Read what Codex reports back for each kind of tool call (codex-app-server.md §7b).

Each reader returns an ``Outcome``: the text a later step can substitute,
whether the call failed, and for a command still running, its session id.
The failure rules are the contract documented in ``docs/scripted-model.md``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, ConfigDict

from .conversation import content_text

_EXITED = re.compile(r"^Process exited with code (-?\d+)$", re.M)
_RUNNING = re.compile(r"^Process running with session ID (\d+)$", re.M)
_EXCEPTION = re.compile(r"^(?:[A-Za-z_][\w]*\.)*[A-Z]\w*(?:Error|Exception): ")
_WALL = re.compile(r"^Wall time: [^\n]*\nOutput:\n?", re.S)


class Outcome(BaseModel):
    """One tool output as the script sees it."""

    model_config = ConfigDict(frozen=True)

    text: str
    error: str | None = None
    exit_code: int | None = None
    session_id: int | None = None

    def value(self) -> Any:
        """The output parsed as JSON when it is JSON, else the text."""
        try:
            return json.loads(self.text)
        except (json.JSONDecodeError, ValueError):
            return self.text


def _after_output_header(raw: str) -> str | None:
    head, sep, body = raw.partition("\nOutput:\n")
    if sep:
        return body
    return "" if raw.endswith("\nOutput:") else None


def exec_outcome(output: Any) -> Outcome:
    """``exec_command`` / ``write_stdin``: a non-zero exit or a refusal is a failure."""
    raw = content_text(output)
    body = _after_output_header(raw)
    exited = _EXITED.search(raw.partition("\nOutput:")[0])
    running = _RUNNING.search(raw.partition("\nOutput:")[0])
    if body is None or not (exited or running):
        return Outcome(text=raw, error=raw.strip() or "the command produced no result")
    if running:
        return Outcome(text=body, session_id=int(running.group(1)))
    code = int(exited.group(1))  # type: ignore[union-attr]
    error = None if code == 0 else f"command exited with code {code}: {_tail(body)}"
    return Outcome(text=body, exit_code=code, error=error)


def patch_outcome(output: Any) -> Outcome:
    """``apply_patch``: anything but ``Exit code: 0`` is a failure."""
    raw = content_text(output)
    if raw.startswith("Exit code: 0\n"):
        return Outcome(text=_after_output_header(raw) or raw)
    return Outcome(text=raw, error=raw.strip() or "apply_patch produced no result")


def mcp_outcome(output: Any) -> Outcome:
    """An MCP tool: Codex's own refusals, ``tool call error`` and ``XError: ...`` fail.

    Codex does not forward an MCP ``isError`` flag to the model; the text of
    a raising ``mmo_mesh`` tool names the exception type (spec 07), so that
    is what marks a tool-level failure.
    """
    if isinstance(output, list):
        texts = [content_text([p]) for p in output if isinstance(p, dict)]
        if texts and _WALL.match(texts[0] + "\n"):
            texts = texts[1:]
        body: str | None = "\n".join(texts)
    else:
        raw = content_text(output)
        match = _WALL.match(raw)
        body = raw[match.end():] if match else None
        if body is None:
            return Outcome(text=raw, error=raw.strip() or "the MCP call produced no result")
    assert body is not None
    if body.startswith("tool call error:") or _EXCEPTION.match(body):
        return Outcome(text=body, error=_first_lines(body))
    return Outcome(text=body)


def function_outcome(output: Any) -> Outcome:
    """A built-in function tool such as ``update_goal``: it answers with JSON, else failed."""
    raw = content_text(output)
    try:
        json.loads(raw)
    except (json.JSONDecodeError, ValueError):
        return Outcome(text=raw, error=raw.strip() or "the tool produced no result")
    return Outcome(text=raw)


def missing_outcome() -> Outcome:
    """A call with no output in the conversation (the turn was interrupted)."""
    return Outcome(text="", error="the tool call has no output (was the turn interrupted?)")


def _tail(text: str, limit: int = 400) -> str:
    text = text.strip()
    return text if len(text) <= limit else "…" + text[-limit:]


def _first_lines(text: str, lines: int = 4) -> str:
    """Codex appends a long ``Stack backtrace`` to tool call errors; keep the head."""
    head = text.split("\n\nStack backtrace:")[0]
    return "\n".join(head.strip().split("\n")[:lines])

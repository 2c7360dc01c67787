"""Replay a script against the conversation and choose the next output item.

Progress is derived only from the conversation: every tool call after the
script's anchor is matched, in order, to the next step (``write_stdin``
polls continue a running ``shell`` step) and every assistant message to a
``say`` step. Nothing is remembered between requests.
"""

from __future__ import annotations

import json
import shlex
from typing import Any

from mmo_kernel.contracts import instance_for_schema

from .conversation import Conversation, ToolCall
from .final_text import final_message
from .placeholders import PlaceholderError, Results, substitute_json, substitute_text
from .reply import CustomToolCall, FunctionCall, OutputItem
from .script import MINIMAL_ARGS, Step
from .tool_outputs import (
    Outcome,
    exec_outcome,
    function_outcome,
    mcp_outcome,
    missing_outcome,
    patch_outcome,
)

EXEC = "exec_command"
POLL = "write_stdin"
APPLY_PATCH = "apply_patch"
UPDATE_GOAL = "update_goal"
EXEC_YIELD_MS = 10_000
POLL_YIELD_MS = 30_000


class StepFailed(Exception):
    """Stop the script: ``step`` could not run or its tool reported an error."""

    def __init__(self, step: Step, error: str) -> None:
        super().__init__(error)
        self.step = step
        self.error = error


def _calls_update_goal(step: Step) -> bool:
    return step.kind == "goal" or (step.kind == "tool" and step.tool == UPDATE_GOAL)


class ScriptRun:
    """One script, replayed over the events that follow its anchor."""

    def __init__(self, conv: Conversation, steps: list[Step], anchor: int) -> None:
        self.conv = conv
        self.steps = steps
        self.anchor = anchor
        self.results = Results()
        self.done = 0

    def next_item(self) -> OutputItem:
        try:
            running = self._replay()
            if running is not None:
                return self._poll(running)
            if self.done >= len(self.steps):
                return self._end_goal("complete") or self._finished()
            step = self.steps[self.done]
            if step.kind == "say" and self.done == len(self.steps) - 1:
                return self._end_goal("complete") or self._emit(step)
            return self._emit(step)
        except StepFailed as failure:
            snippet = failure.step.source.strip()
            return self._end_goal("blocked") or final_message(
                self.conv,
                f"mmo-script stopped at step {failure.step.number} (`{snippet}`): {failure.error}",
            )

    def _end_goal(self, status: str) -> OutputItem | None:
        """In goal mode a script that has ended ends its goal, unless it already called
        ``update_goal`` itself: ``complete`` before its last answer, ``blocked`` when it
        stopped. Without this an active goal makes Codex continue the finished work
        turn after turn until the token budget runs out."""
        if self.conv.goal_objective() is None or not self.conv.offered.has_function(UPDATE_GOAL):
            return None
        if any(c.name == UPDATE_GOAL and c.index > self.anchor for c in self.conv.calls):
            return None
        args = {"status": status}
        return FunctionCall(name=UPDATE_GOAL, arguments=_dumps(args), call_id=self._call_id())

    # ------------------------------------------------------------- replay --

    def _replay(self) -> int | None:
        """Consume past events; return a running command's session id, if any."""
        running: tuple[Step, list[str], int] | None = None
        for event in self.conv.events_after(self.anchor):
            if running is None:
                self._skip_uncallable()
            if event.message is not None:
                if self.done < len(self.steps) and self.steps[self.done].kind == "say":
                    self.done += 1
                continue
            call = event.call
            assert call is not None
            if running is not None and call.name == POLL:
                step, chunks, _ = running
                outcome = _outcome_of(step, call)
                chunks.append(outcome.text)
                if outcome.session_id is not None:
                    running = (step, chunks, outcome.session_id)
                    continue
                running = None
                self._complete(step, outcome.model_copy(update={"text": "".join(chunks)}))
                continue
            if self.done >= len(self.steps) or not self.steps[self.done].is_tool_step:
                continue  # a call this script did not make
            step = self.steps[self.done]
            if call.name == UPDATE_GOAL and not _calls_update_goal(step):
                continue  # the goal this script ended when it stopped (``_end_goal``)
            outcome = _outcome_of(step, call)
            if outcome.session_id is not None:
                running = (step, [outcome.text], outcome.session_id)
                continue
            self._complete(step, outcome)
        if running is None:
            self._skip_uncallable()
        return running[2] if running is not None else None

    def _skip_uncallable(self) -> None:
        """A ``try`` step that cannot even be called (tool not offered, placeholder
        unresolved) records its error as its result and the script goes on. The check
        depends only on this request and earlier results, so every replay agrees."""
        while self.done < len(self.steps):
            step = self.steps[self.done]
            if not (step.tolerant and step.is_tool_step):
                return
            try:
                self._emit(step)
            except StepFailed as failure:
                self.results.add(step.number, step.name, failure.error, None)
                self.done += 1
                continue
            return

    def _complete(self, step: Step, outcome: Outcome) -> None:
        if outcome.error is not None and not step.tolerant:
            raise StepFailed(step, outcome.error)
        text = outcome.text[:-1] if outcome.text.endswith("\n") else outcome.text
        value = outcome.model_copy(update={"text": text}).value()
        self.results.add(step.number, step.name, text, value)
        self.done += 1

    # --------------------------------------------------------------- emit --

    def _call_id(self) -> str:
        return f"call_mmo_{len(self.conv.calls) + 1}"

    def _poll(self, session_id: int) -> OutputItem:
        args = {"session_id": session_id, "chars": "", "yield_time_ms": POLL_YIELD_MS}
        return FunctionCall(name=POLL, arguments=_dumps(args), call_id=self._call_id())

    def _finished(self) -> OutputItem:
        says = [s for s in self.steps if s.kind == "say"]
        if says:
            return final_message(self.conv, self._text(says[-1], says[-1].text))
        return final_message(self.conv, f"mmo-script finished: {len(self.steps)} steps done.")

    def _emit(self, step: Step) -> OutputItem:
        if step.kind == "say":
            return final_message(self.conv, self._text(step, step.text))
        if step.kind == "shell":
            return self._shell(step, self._text(step, step.text))
        if step.kind == "write":
            return self._write(step)
        if step.kind == "patch":
            self._require_custom(step, APPLY_PATCH)
            return CustomToolCall(
                name=APPLY_PATCH, input=_ensure_newline(self._text(step, step.text)),
                call_id=self._call_id(),
            )
        if step.kind == "goal":
            return self._function(step, UPDATE_GOAL, None, {"status": step.text})
        if step.kind == "mcp":
            return self._function(step, step.tool or "", f"mcp__{step.server}", step.args or {})
        return self._function(step, step.tool or "", step.server, step.args or {})

    def _text(self, step: Step, text: str) -> str:
        try:
            return substitute_text(text, self.results)
        except PlaceholderError as exc:
            raise StepFailed(step, str(exc)) from None

    def _shell(self, step: Step, command: str) -> OutputItem:
        self._require_function(step, EXEC, None)
        args = {"cmd": command, "login": False, "yield_time_ms": EXEC_YIELD_MS}
        return FunctionCall(name=EXEC, arguments=_dumps(args), call_id=self._call_id())

    def _write(self, step: Step) -> OutputItem:
        path = self._text(step, step.path or "")
        content = self._text(step, step.text)
        if APPLY_PATCH in self.conv.offered.custom:
            return CustomToolCall(
                name=APPLY_PATCH, input=add_file_patch(path, content), call_id=self._call_id()
            )
        return self._shell(step, heredoc_write(path, content))

    def _function(
        self, step: Step, name: str, namespace: str | None, args: dict[str, Any]
    ) -> OutputItem:
        self._require_function(step, name, namespace)
        if step.minimal_args:
            args = self._minimal_args(step, name, namespace)
        try:
            resolved = substitute_json(args, self.results)
        except PlaceholderError as exc:
            raise StepFailed(step, str(exc)) from None
        return FunctionCall(
            name=name, namespace=namespace, arguments=_dumps(resolved), call_id=self._call_id()
        )

    def _minimal_args(self, step: Step, name: str, namespace: str | None) -> dict[str, Any]:
        """The smallest arguments the offered tool's ``parameters`` accept (strings say
        ``minimal``): how a prompt calls a tool whose schema its author never saw."""
        schema = self.conv.offered.parameters.get((namespace, name))
        if not isinstance(schema, dict) or not schema:
            return {}
        try:
            value = instance_for_schema(schema, text=MINIMAL_ARGS)
        except ValueError as exc:
            raise StepFailed(step, f"no minimal arguments for {name!r}: {exc}") from None
        return value if isinstance(value, dict) else {}

    def _require_function(self, step: Step, name: str, namespace: str | None) -> None:
        offered = self.conv.offered
        if offered.has_function(name, namespace):
            return
        if namespace is None:
            have = ", ".join(sorted(offered.functions)) or "none"
            raise StepFailed(step, f"Codex did not offer the tool {name!r} (offered: {have})")
        if namespace not in offered.namespaces and not namespace.startswith("mcp__"):
            have = ", ".join(sorted(offered.namespaces)) or "none"
            raise StepFailed(step, f"Codex did not offer the tool namespace {namespace!r} "
                                   f"(namespaces offered: {have})")
        if namespace not in offered.namespaces:
            servers = sorted(n[5:] for n in offered.namespaces if n.startswith("mcp__")) or ["none"]
            raise StepFailed(
                step,
                f"Codex did not offer MCP server {namespace[5:]!r} "
                f"(MCP servers offered: {', '.join(servers)})",
            )
        have = ", ".join(sorted(offered.namespaces[namespace])) or "none"
        owner = (f"MCP server {namespace[5:]!r}" if namespace.startswith("mcp__")
                 else f"namespace {namespace!r}")
        raise StepFailed(step, f"{owner} has no tool {name!r} (tools: {have})")

    def _require_custom(self, step: Step, name: str) -> None:
        if name not in self.conv.offered.custom:
            raise StepFailed(
                step,
                f"Codex did not offer the freeform tool {name!r} "
                "(Codex offers apply_patch only to models listed in model_catalog_json)",
            )


def _outcome_of(step: Step, call: ToolCall) -> Outcome:
    if call.output is None:
        return missing_outcome()
    if call.name in (EXEC, POLL):
        return exec_outcome(call.output)
    if call.kind == "custom_tool_call":
        return patch_outcome(call.output)
    if step.kind == "mcp":
        return mcp_outcome(call.output)
    return function_outcome(call.output)


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _ensure_newline(text: str) -> str:
    return text if text.endswith("\n") else text + "\n"


def add_file_patch(path: str, content: str) -> str:
    """An ``apply_patch`` patch that creates or replaces ``path`` with ``content``.

    ``*** Add File`` overwrites an existing file; every line ends with a
    newline, so the file always ends with one (an empty content gives one
    empty line, the grammar needs at least one).
    """
    lines = content[:-1].split("\n") if content.endswith("\n") else content.split("\n")
    body = "".join(f"+{line}\n" for line in lines)
    return f"*** Begin Patch\n*** Add File: {path}\n{body}*** End Patch\n"


def heredoc_write(path: str, content: str) -> str:
    """A shell command that writes ``content`` (newline-terminated) to ``path``."""
    tag = "MMO_EOF"
    while tag in content.split("\n"):
        tag += "_"
    text = _ensure_newline(content)
    quoted = shlex.quote(path)
    return (
        f"mkdir -p -- \"$(dirname -- {quoted})\" && cat > {quoted} <<'{tag}'\n{text}{tag}"
    )

"""The ``mmo-script`` language: find a script in conversation text and parse it.

A script is a fenced block (```` ```mmo-script ````) whose body is either one
step per line or a JSON list of step objects. The grammar is documented in
``docs/scripted-model.md``; this module only turns text into ``Step`` values
and reports malformed scripts with the line that is wrong.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator, model_validator

FENCE_OPEN = "```mmo-script"
FENCE_CLOSE = "```"
GOAL_STATUSES = ("complete", "blocked", "paused")
MINIMAL_ARGS = "minimal"
"""In place of JSON arguments: the smallest arguments valid for the offered tool."""
VERBS = ("shell", "write", "patch", "mcp", "tool", "goal_complete", "goal", "say")

StepKind = Literal["shell", "write", "patch", "mcp", "tool", "goal", "say"]

_NAME = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*):\s+(.*)$")
_HEREDOC = re.compile(r"^(.*?)\s*<<([A-Za-z_][A-Za-z0-9_]*)$")
_RESERVED_NAME = re.compile(r"^(step\d+|last)$")


class ScriptError(ValueError):
    """A malformed script; the message names the line and what was expected."""


class Step(BaseModel):
    """One parsed step; ``number`` is 1-based and is what ``{{stepN}}`` refers to."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    number: int
    kind: StepKind
    source: str
    name: str | None = None
    tolerant: bool = False
    text: str = ""
    path: str | None = None
    server: str | None = None
    tool: str | None = None
    args: dict[str, Any] | None = None
    minimal_args: bool = False
    """``minimal`` instead of JSON: arguments built from the tool's offered schema."""

    @property
    def is_tool_step(self) -> bool:
        """Every step but ``say`` becomes a tool call."""
        return self.kind != "say"


class JsonStep(BaseModel):
    """One object of the JSON-list form; exactly one verb key is set."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = None
    try_: bool = False
    shell: str | None = None
    write: str | None = None
    content: str | None = None
    patch: str | None = None
    mcp: str | None = None
    tool: str | None = None
    args: dict[str, Any] | None = None
    goal: str | None = None
    goal_complete: bool | None = None
    say: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _rename_try(cls, data: Any) -> Any:
        if isinstance(data, dict) and "try" in data:
            data = {**data, "try_": data["try"]}
            del data["try"]
        return data

    @field_validator("goal_complete")
    @classmethod
    def _only_true(cls, value: bool | None) -> bool | None:
        if value is False:
            raise ValueError("goal_complete must be true when given")
        return value

    def verb(self) -> str:
        present = [v for v in VERBS if getattr(self, v) is not None]
        if len(present) != 1:
            raise ValueError(
                f"exactly one of {', '.join(VERBS)} is required, got {present or 'none'}"
            )
        return present[0]


def find_scripts(text: str) -> list[str]:
    """Bodies of every ```` ```mmo-script ```` block in ``text``, in order.

    A fence is a line that is exactly the fence (surrounding blanks ignored),
    so a fence inside a one-line JSON string (a worker's script passed in
    ``agent_spawn`` ``task``) is not mistaken for the end of the outer block.
    Lines of a ``<<TAG`` heredoc are taken verbatim, fences included.
    """
    lines = text.split("\n")
    bodies: list[str] = []
    i = 0
    while i < len(lines):
        if lines[i].strip() != FENCE_OPEN:
            i += 1
            continue
        i += 1
        body: list[str] = []
        closed = False
        heredoc: str | None = None
        while i < len(lines):
            line = lines[i]
            i += 1
            if heredoc is not None:
                body.append(line)
                if line == heredoc:
                    heredoc = None
                continue
            if line.strip() == FENCE_CLOSE:
                closed = True
                break
            body.append(line)
            match = _HEREDOC.match(line.rstrip())
            if match:
                heredoc = match.group(2)
        if not closed:
            raise ScriptError(f"unclosed {FENCE_OPEN} block: add a line with only {FENCE_CLOSE}")
        bodies.append("\n".join(body))
    return bodies


def parse_script(body: str) -> list[Step]:
    """Steps of one script body (line form, or JSON form when it starts with ``[``)."""
    steps = _parse_json(body) if body.lstrip().startswith("[") else _parse_lines(body)
    if not steps:
        raise ScriptError("the script has no steps")
    _check_names(steps)
    return steps


def _check_names(steps: list[Step]) -> None:
    seen: set[str] = set()
    for step in steps:
        if step.name is None:
            continue
        if _RESERVED_NAME.match(step.name):
            raise ScriptError(f"step {step.number}: name {step.name!r} is reserved")
        if step.name in seen:
            raise ScriptError(f"step {step.number}: name {step.name!r} is used twice")
        seen.add(step.name)


# ---------------------------------------------------------------- line form --


def _parse_lines(body: str) -> list[Step]:
    lines = body.split("\n")
    steps: list[Step] = []
    i = 0
    while i < len(lines):
        raw = lines[i]
        line_no = i + 1
        i += 1
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        heredoc_body: str | None = None
        match = _HEREDOC.match(line)
        if match:
            line, tag = match.group(1), match.group(2)
            collected: list[str] = []
            while i < len(lines) and lines[i] != tag:
                collected.append(lines[i])
                i += 1
            if i >= len(lines):
                raise ScriptError(f"line {line_no}: heredoc <<{tag} is not closed by a line {tag}")
            i += 1
            heredoc_body = "\n".join(collected)
        try:
            steps.append(_line_step(len(steps) + 1, line, heredoc_body, raw.strip()))
        except ScriptError as exc:
            raise ScriptError(f"line {line_no}: {exc}") from None
    return steps


def _line_step(number: int, line: str, heredoc: str | None, source: str) -> Step:
    name = None
    named = _NAME.match(line)
    if named:
        name, line = named.group(1), named.group(2)
    tolerant = False
    if line.startswith("try "):
        tolerant, line = True, line[4:].lstrip()
    verb, _, rest = line.partition(" ")
    rest = rest.strip()
    common: dict[str, Any] = {
        "number": number, "name": name, "tolerant": tolerant, "source": source
    }
    if verb == "shell":
        return Step(kind="shell", text=_one_of(rest, heredoc, "a command"), **common)
    if verb == "say":
        text = _one_of(rest, heredoc, "a message", allow_empty=True)
        return Step(kind="say", text=text, **common)
    if verb == "patch":
        return Step(kind="patch", text=_one_of(rest, heredoc, "a patch"), **common)
    if verb == "write":
        if not rest:
            raise ScriptError("write needs a path: write <path> <<EOF")
        if heredoc is None:
            raise ScriptError("write needs its content as a heredoc: write <path> <<EOF")
        return Step(kind="write", path=rest, text=heredoc, **common)
    if verb in ("mcp", "tool"):
        return _call_step(verb, rest, heredoc, common)
    if verb == "goal_complete":
        if rest or heredoc is not None:
            raise ScriptError("goal_complete takes no argument")
        return Step(kind="goal", text="complete", **common)
    if verb == "goal":
        return Step(kind="goal", text=_goal_status(rest), **common)
    raise ScriptError(f"unknown step {verb!r}; expected one of: {', '.join(VERBS)}")


def _one_of(rest: str, heredoc: str | None, what: str, allow_empty: bool = False) -> str:
    if rest and heredoc is not None:
        raise ScriptError(f"give {what} either on the line or as a heredoc, not both")
    value = heredoc if heredoc is not None else rest
    if not value and not allow_empty:
        raise ScriptError(f"missing {what}")
    return value


def _call_step(verb: str, rest: str, heredoc: str | None, common: dict[str, Any]) -> Step:
    target, _, raw_args = rest.partition(" ")
    raw_args = _one_of(raw_args.strip(), heredoc, "JSON arguments", allow_empty=True) or "{}"
    minimal = raw_args == MINIMAL_ARGS
    args = {} if minimal else _json_object(raw_args)
    common = {**common, "minimal_args": minimal}
    if verb == "tool":
        namespace, dot, name = target.rpartition(".")
        if not name or (dot and not namespace):
            raise ScriptError("tool needs a tool name: tool [<namespace>.]<name> {json}")
        return Step(kind="tool", server=namespace or None, tool=name, args=args, **common)
    server, dot, tool = target.partition(".")
    if not (server and dot and tool):
        raise ScriptError(f"mcp needs <server>.<tool>, got {target!r}")
    return Step(kind="mcp", server=server, tool=tool, args=args, **common)


def _json_object(raw: str) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ScriptError(
            f"arguments are not valid JSON ({exc.msg} at column {exc.colno})"
        ) from None
    if not isinstance(value, dict):
        raise ScriptError("arguments must be a JSON object")
    return value


def _goal_status(status: str) -> str:
    if status not in GOAL_STATUSES:
        raise ScriptError(f"goal needs one of {', '.join(GOAL_STATUSES)}, got {status!r}")
    return status


# ---------------------------------------------------------------- JSON form --


def _parse_json(body: str) -> list[Step]:
    try:
        raw = json.loads(body)
    except json.JSONDecodeError as exc:
        raise ScriptError(
            f"JSON script is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        ) from None
    if not isinstance(raw, list):
        raise ScriptError("a JSON script must be a list of step objects")
    steps = []
    for index, entry in enumerate(raw):
        try:
            steps.append(_json_step(index + 1, entry))
        except (ValidationError, ValueError) as exc:
            detail = _short_validation(exc) if isinstance(exc, ValidationError) else str(exc)
            raise ScriptError(f"step {index + 1}: {detail}") from None
    return steps


def _short_validation(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or 'step'}: {e['msg']}" for e in exc.errors()
    )


def _json_step(number: int, entry: Any) -> Step:
    js = JsonStep.model_validate(entry)
    verb = js.verb()
    common: dict[str, Any] = {
        "number": number,
        "name": js.name,
        "tolerant": js.try_,
        "source": json.dumps(entry, ensure_ascii=False)[:200],
    }
    if js.content is not None and verb != "write":
        raise ScriptError("content is only for write")
    if js.args is not None and verb not in ("mcp", "tool"):
        raise ScriptError("args is only for mcp and tool")
    if verb == "write":
        if js.content is None:
            raise ScriptError("write needs content")
        return Step(kind="write", path=js.write, text=js.content, **common)
    if verb in ("mcp", "tool"):
        target = getattr(js, verb)
        return _call_step(verb, f"{target} {json.dumps(js.args or {})}", None, common)
    if verb == "goal_complete":
        return Step(kind="goal", text="complete", **common)
    if verb == "goal":
        return Step(kind="goal", text=_goal_status(js.goal or ""), **common)
    text = getattr(js, verb)
    if not text and verb != "say":
        raise ScriptError(f"{verb} needs a value")
    return Step.model_validate({"kind": verb, "text": text, **common})

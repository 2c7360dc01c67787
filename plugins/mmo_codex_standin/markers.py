"""The ``FAKE_*`` behaviour markers (spec 10), parsed from turn input text.

Markers come from the turn's own input and from the thread's first input.
Behaviour that models the provider or the process (sleep, provider errors,
crashes, result shape) is inherited from the first input so automatic goal
turns behave like the turn that started the work; interactive side effects
(requests, writes, children, goal events, response ordering) fire only for
the turn whose own input carries the marker.
"""

from __future__ import annotations

import json
import re

from pydantic import BaseModel, ConfigDict, Field

_SLEEP = re.compile(r"\bFAKE_SLEEP(?:_SECONDS)?=(\d+(?:\.\d+)?)")
_HOLD = re.compile(r"\bFAKE_HOLD_UNTIL=(/\S+)")
_WRITE = re.compile(r"FAKE_WRITE[ \t]+(\S+?)::([^\n]*)")
_MCP = re.compile(r"FAKE_MCP_CALL[ \t]+([\w-]+)\.([\w.-]+)(?:[ \t]+(\{[^\n]*\}))?")
_TOOL = re.compile(r"FAKE_DYNAMIC_TOOL_CALL[ \t]+([\w.-]+)(?:[ \t]+(\{[^\n]*\}))?")

INHERITED_FLAGS = (
    "FAKE_PROVIDER_USAGE_LIMIT_ONCE",
    "FAKE_PROVIDER_USAGE_LIMIT",
    "FAKE_PROVIDER_BAD_REQUEST",
    "FAKE_APP_SERVER_CRASH_ONCE",
    "FAKE_APP_SERVER_CRASH_AFTER_PERSIST_ONCE",
    "FAKE_APP_SERVER_CRASH_DURING_FINALIZATION_ONCE",
    "FAKE_INVALID_FIRST_RESULT",
    "FAKE_EMPTY_RESULT",
    "FAKE_GOAL_COMPLETE_EARLY",
)
TURN_FLAGS = (
    "FAKE_REQUEST_USER_INPUT",
    "FAKE_REQUEST_COMMAND_APPROVAL",
    "FAKE_GOAL_COMPLETE_BEFORE_TURN",
    "FAKE_GOAL_BUDGET_LIMIT_BEFORE_TURN",
    "FAKE_NOTIFY_BEFORE_RESPONSE",
    "FAKE_ORPHAN_CHILD",
)
GOAL_SET_CRASH = "FAKE_APP_SERVER_CRASH_BEFORE_GOAL_REPLY_ONCE"
"""Read from the thread's first input when ``thread/goal/set`` arrives, not from a turn."""
NEXT_TURN_CRASH_BEFORE_REPLY = "FAKE_APP_SERVER_CRASH_BEFORE_NEXT_TURN_REPLY_ONCE"
NEXT_TURN_CRASH_BEFORE_PERSIST = "FAKE_APP_SERVER_CRASH_BEFORE_NEXT_TURN_PERSIST_ONCE"
"""Read from the thread's first input; fire on a later user turn of the thread (once per
thread): the process dies on that ``turn/start`` before answering it, or after answering
it but before anything of the turn is persisted. So a host's own follow-up turns (a
repair turn, a continued turn) can be lost before the thread knows them."""


class FileWrite(BaseModel):
    path: str
    content: str


class ToolCall(BaseModel):
    name: str
    arguments: dict = Field(default_factory=dict)


class McpCall(BaseModel):
    """``FAKE_MCP_CALL <server>.<tool> <json>``; ``arguments_text`` is parsed when the call runs."""

    server: str
    tool: str
    arguments_text: str = "{}"


class Markers(BaseModel):
    """What one turn must do; ``flags`` holds the plain ``FAKE_*`` words."""

    model_config = ConfigDict(frozen=True)

    sleep_seconds: float = 0.0
    hold_until: str | None = None
    """``FAKE_HOLD_UNTIL=<absolute path>``: the turn waits until that file exists."""
    flags: frozenset[str] = frozenset()
    writes: tuple[FileWrite, ...] = ()
    tool_calls: tuple[ToolCall, ...] = ()
    mcp_calls: tuple[McpCall, ...] = ()

    def has(self, flag: str) -> bool:
        return flag in self.flags


def _flags(text: str, names: tuple[str, ...]) -> set[str]:
    found = set()
    for name in names:
        if re.search(rf"\b{name}\b", text):
            found.add(name)
    return found


def crashes_before_goal_reply(first_input: str) -> bool:
    """Whether ``thread/goal/set`` on a thread begun with ``first_input`` must kill the process."""
    return bool(_flags(first_input, (GOAL_SET_CRASH,)))


def crashes_on_next_turn(first_input: str, flag: str) -> bool:
    """Whether a later user turn on a thread begun with ``first_input`` must die at ``flag``."""
    return bool(first_input) and bool(_flags(first_input, (flag,)))


def _arguments(raw: str | None) -> dict:
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        return {"raw": raw}
    return value if isinstance(value, dict) else {"value": value}


def _sleep(text: str) -> float:
    values = [float(v) for v in _SLEEP.findall(text)]
    return max(values) if values else 0.0


def parse(turn_text: str, first_input: str = "") -> Markers:
    """Markers for a turn with input ``turn_text`` on a thread begun with ``first_input``."""
    inherited = first_input if first_input != turn_text else ""
    flags = _flags(turn_text, INHERITED_FLAGS + TURN_FLAGS) | _flags(inherited, INHERITED_FLAGS)
    return Markers(
        sleep_seconds=max(_sleep(turn_text), _sleep(inherited)),
        hold_until=next(iter(_HOLD.findall(turn_text) or _HOLD.findall(inherited)), None),
        flags=frozenset(flags),
        writes=tuple(FileWrite(path=p, content=c) for p, c in _WRITE.findall(turn_text)),
        tool_calls=tuple(
            ToolCall(name=n, arguments=_arguments(a)) for n, a in _TOOL.findall(turn_text)
        ),
        mcp_calls=tuple(
            McpCall(server=s, tool=t, arguments_text=a or "{}")
            for s, t, a in _MCP.findall(turn_text)
        ),
    )


_FENCE = re.compile(r"```(?:json)?[ \t]*\n(.*?)```", re.S)
_SCHEMA_KEYS = {"$schema", "type", "properties", "anyOf", "oneOf", "allOf", "$ref", "enum", "const"}


def contract_schema_in(text: str) -> dict | None:
    """The last fenced JSON Schema in a prompt that talks about a schema.

    Lets a ``validated_text`` contract (no ``outputSchema``) still get a
    conforming answer: the stand-in answers with an instance of it.
    """
    if "schema" not in text.lower():
        return None
    found = None
    for block in _FENCE.findall(text):
        try:
            value = json.loads(block)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict) and _SCHEMA_KEYS & value.keys():
            found = value
    return found

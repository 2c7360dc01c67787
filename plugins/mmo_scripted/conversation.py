"""Read a Codex Responses request body: texts, tool calls and their outputs, tools offered.

Codex sends the whole conversation on every POST (codex-app-server.md §7b),
so this view is all the scripted model ever knows; it keeps no state.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

GOAL_OBJECTIVE = "goal_objective"
_ENVELOPE = re.compile(r"^\s*<[A-Za-z_][\w-]*[\s>]")
"""Codex wraps its own context (environment, skills, goal continuation) in a tag."""


class ResponsesRequest(BaseModel):
    """The fields of ``POST /responses`` the scripted model reads; others are ignored."""

    model_config = ConfigDict(extra="allow")

    model: str
    input: list[dict[str, Any]]
    tools: list[dict[str, Any]] = Field(default_factory=list)
    text: dict[str, Any] | None = None


class ToolCall(BaseModel):
    """A model call already in the conversation, with Codex's output if present."""

    model_config = ConfigDict(frozen=True)

    index: int
    call_id: str
    kind: str  # "function_call" | "custom_tool_call"
    name: str
    namespace: str | None = None
    payload: str = ""  # JSON arguments or freeform input
    output: Any = None


class Event(BaseModel):
    """What happened after a script's anchor: a tool call or an assistant message."""

    model_config = ConfigDict(frozen=True)

    index: int
    call: ToolCall | None = None
    message: str | None = None


class OfferedTools(BaseModel):
    """Tool names Codex offered in this request, and the function tools' parameter schemas."""

    model_config = ConfigDict(frozen=True)

    functions: frozenset[str] = frozenset()
    custom: frozenset[str] = frozenset()
    namespaces: dict[str, frozenset[str]] = Field(default_factory=dict)
    parameters: dict[tuple[str | None, str], Any] = Field(default_factory=dict)
    """``(namespace or None, name)`` -> the tool's JSON Schema ``parameters``."""

    def has_function(self, name: str, namespace: str | None = None) -> bool:
        if namespace is None:
            return name in self.functions
        return name in self.namespaces.get(namespace, frozenset())


def content_text(content: Any) -> str:
    """The text of a message ``content`` or a tool ``output`` (string or item list)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text", "") for p in content if isinstance(p, dict) and "text" in p]
        return "\n".join(parts)
    return ""


class Conversation:
    """Indexed view of one request body."""

    def __init__(self, request: ResponsesRequest) -> None:
        self.request = request
        self.items = request.input
        self.offered = _offered_tools(request.tools)
        self.calls = _tool_calls(self.items)

    @property
    def output_schema(self) -> dict[str, Any] | None:
        """``text.format.schema`` when the turn has an ``outputSchema``."""
        fmt = (self.request.text or {}).get("format")
        if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
            schema = fmt.get("schema")
            return schema if isinstance(schema, dict) else None
        return None

    def sources(self) -> list[tuple[int, str]]:
        """(index, text) of every item a script may come from, in order.

        User and developer messages, and the goal objective Codex injects as
        an orphan ``function_call_output`` named ``goal_objective``.
        """
        found = []
        for index, item in enumerate(self.items):
            is_message = item.get("type", "message") == "message"
            if is_message and item.get("role") in ("user", "developer"):
                found.append((index, content_text(item.get("content"))))
            elif _is_goal_objective(item):
                found.append((index, content_text(item.get("output"))))
        return found

    def goal_objective(self) -> tuple[int, str] | None:
        """The latest goal objective item, if Codex sent one (goal mode)."""
        latest = None
        for index, item in enumerate(self.items):
            if _is_goal_objective(item):
                latest = (index, content_text(item.get("output")))
        return latest

    def last_user_request(self) -> str:
        """The latest user text that is not one of Codex's tagged context envelopes."""
        for item in reversed(self.items):
            if item.get("type", "message") == "message" and item.get("role") == "user":
                text = content_text(item.get("content"))
                if text.strip() and not _ENVELOPE.match(text):
                    return text
        return ""

    def events_after(self, anchor: int) -> list[Event]:
        """Tool calls and assistant messages after item ``anchor``, in order."""
        events = []
        for index, item in enumerate(self.items):
            if index <= anchor:
                continue
            if item.get("type", "message") == "message" and item.get("role") == "assistant":
                events.append(Event(index=index, message=content_text(item.get("content"))))
        events.extend(Event(index=c.index, call=c) for c in self.calls if c.index > anchor)
        return sorted(events, key=lambda e: e.index)

    def has_new_input_after(self, index: int) -> bool:
        """Whether a user/developer message or goal objective follows item ``index``."""
        return any(i > index for i, _ in self.sources())


def _is_goal_objective(item: dict[str, Any]) -> bool:
    return item.get("type") == "function_call_output" and item.get("name") == GOAL_OBJECTIVE


def _offered_tools(tools: list[dict[str, Any]]) -> OfferedTools:
    functions: set[str] = set()
    custom: set[str] = set()
    namespaces: dict[str, frozenset[str]] = {}
    parameters: dict[tuple[str | None, str], Any] = {}
    for tool in tools:
        kind, name = tool.get("type"), tool.get("name")
        if not isinstance(name, str):
            continue
        if kind == "function":
            functions.add(name)
            parameters[(None, name)] = tool.get("parameters")
        elif kind == "custom":
            custom.add(name)
        elif kind == "namespace":
            members = [t for t in tool.get("tools", []) if isinstance(t, dict) and "name" in t]
            namespaces[name] = frozenset(t["name"] for t in members)
            parameters.update(((name, t["name"]), t.get("parameters")) for t in members)
    return OfferedTools(
        functions=frozenset(functions), custom=frozenset(custom), namespaces=namespaces,
        parameters=parameters,
    )


def _tool_calls(items: list[dict[str, Any]]) -> list[ToolCall]:
    outputs: dict[str, Any] = {}
    for item in items:
        if item.get("type") in ("function_call_output", "custom_tool_call_output"):
            call_id = item.get("call_id")
            if isinstance(call_id, str):
                outputs[call_id] = item.get("output")
    calls = []
    for index, item in enumerate(items):
        kind = item.get("type")
        if kind not in ("function_call", "custom_tool_call"):
            continue
        call_id = str(item.get("call_id", ""))
        payload = item.get("arguments") if kind == "function_call" else item.get("input")
        calls.append(
            ToolCall(
                index=index,
                call_id=call_id,
                kind=kind,
                name=str(item.get("name", "")),
                namespace=item.get("namespace"),
                payload=payload if isinstance(payload, str) else "",
                output=outputs.get(call_id),
            )
        )
    return calls

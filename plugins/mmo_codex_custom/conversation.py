"""A Responses request read into a neutral conversation both translators render.

Codex's Responses input mixes messages, tool calls and tool outputs, plus
Codex-specific items no strict Chat or Messages upstream accepts: the goal
objective arrives as an *orphan* ``function_call_output`` (no ``call_id``),
and ``apply_patch`` is a freeform ``custom`` tool. The rules here:

* developer/system messages become system text (leading ones merged);
* an orphan tool output, or one whose call is not in the history, becomes a
  user text ``[<name>] <output>`` so strict upstreams never see a dangling
  tool result;
* a tool call with no output in the history gets a synthetic output
  ``(no output recorded)``, because strict upstreams reject unanswered calls;
* namespaced tools (``mcp__echo`` / ``echo``) are flattened to
  ``mcp__echo__echo`` and split again when the upstream calls them;
* a ``custom`` tool (freeform ``apply_patch``) is offered as a function with
  one string parameter ``input`` and its calls come back as
  ``custom_tool_call`` items;
* images are kept only when the route and model accept images (messages) or
  the route preserves tool media (tool outputs); otherwise a short text note
  says an image was omitted;
* a reasoning item's ``encrypted_content`` (a replay token, see
  ``reasoning.py``) is kept on the next assistant turn for the wire to
  rebuild; reasoning items without one, or with no assistant output after
  them, are dropped;
* tools that have no equivalent upstream (web search, image generation,
  tool search) are dropped.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

IMAGE_OMITTED = "[image omitted: this route does not accept images]"
NO_OUTPUT = "(no output recorded)"
_NAME_OK = re.compile(r"[^A-Za-z0-9_-]")


@dataclass
class Part:
    kind: Literal["text", "image"]
    text: str = ""
    url: str = ""


@dataclass
class ToolCall:
    call_id: str
    name: str
    arguments: str
    custom: bool = False


@dataclass
class Turn:
    """One conversation step: ``system``/``user``/``assistant`` content, or tool traffic."""

    role: Literal["system", "user", "assistant", "tool"]
    parts: list[Part] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)
    call_id: str = ""
    reasoning: list[str] = field(default_factory=list)
    """``encrypted_content`` of the reasoning items that preceded this assistant output."""


@dataclass
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any]
    custom: bool = False
    strict: bool = False
    """``strict: true`` on a function tool: the upstream must follow ``parameters`` exactly."""


@dataclass
class Conversation:
    system: str
    turns: list[Turn]
    tools: list[ToolSpec]
    tool_names: dict[str, tuple[str | None, str, bool]]
    """flattened upstream name -> (namespace, Codex name, is custom)."""
    parallel_tool_calls: bool
    output_schema: dict[str, Any] | None
    effort: str | None
    max_output_tokens: int | None
    route: str = ""
    """The route the request is served on: replay tokens are only honoured on their own route."""


def upstream_tool_name(namespace: str | None, name: str) -> str:
    flat = f"{namespace}__{name}" if namespace else name
    return _NAME_OK.sub("_", flat)[:64]


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content
                         if isinstance(p, dict) and p.get("text"))
    return ""


def _parts(content: Any, images_ok: bool) -> list[Part]:
    if isinstance(content, str):
        return [Part("text", content)] if content else []
    parts: list[Part] = []
    for item in content if isinstance(content, list) else []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind in ("input_text", "output_text", "text") and item.get("text"):
            parts.append(Part("text", item["text"]))
        elif kind in ("input_image", "image_url", "image"):
            url = item.get("image_url")
            url = url.get("url") if isinstance(url, dict) else url
            if images_ok and isinstance(url, str) and url:
                parts.append(Part("image", url=url))
            else:
                parts.append(Part("text", IMAGE_OMITTED))
    return parts


def _tools(raw_tools: Any) -> tuple[list[ToolSpec], dict[str, tuple[str | None, str, bool]]]:
    specs: list[ToolSpec] = []
    names: dict[str, tuple[str | None, str, bool]] = {}

    def add(tool: dict[str, Any], namespace: str | None) -> None:
        kind, name = tool.get("type"), tool.get("name")
        if not isinstance(name, str) or not name:
            return
        flat = upstream_tool_name(namespace, name)
        if kind == "function":
            params = tool.get("parameters") or {"type": "object", "properties": {}}
            specs.append(ToolSpec(flat, tool.get("description") or "", params,
                                  strict=tool.get("strict") is True))
            names[flat] = (namespace, name, False)
        elif kind == "custom":
            fmt = tool.get("format") or {}
            grammar = fmt.get("definition") if isinstance(fmt, dict) else None
            description = tool.get("description") or ""
            if grammar:
                description += f"\n\nThe `input` must follow this grammar:\n{grammar}"
            params = {"type": "object", "required": ["input"], "additionalProperties": False,
                      "properties": {"input": {"type": "string",
                                               "description": "The raw freeform tool input."}}}
            specs.append(ToolSpec(flat, description, params, custom=True))
            names[flat] = (namespace, name, True)

    for tool in raw_tools if isinstance(raw_tools, list) else []:
        if not isinstance(tool, dict):
            continue
        if tool.get("type") == "namespace":
            for inner in tool.get("tools") or []:
                if isinstance(inner, dict):
                    add(inner, tool.get("name"))
        else:
            add(tool, None)
    return specs, names


def read_conversation(body: dict[str, Any], images_ok: bool, tool_media_ok: bool,
                      route: str = "") -> Conversation:
    """Normalize a Codex Responses request body (see the module rules)."""
    tools, names = _tools(body.get("tools"))
    system_parts: list[str] = []
    if isinstance(body.get("instructions"), str) and body["instructions"]:
        system_parts.append(body["instructions"])
    turns: list[Turn] = []
    items = body.get("input")
    if isinstance(items, str):
        items = [{"type": "message", "role": "user", "content": items}]
    called: set[str] = set()
    pending: list[str] = []
    """Replay tokens of reasoning items still waiting for their assistant output."""
    for item in items or []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type", "message" if "role" in item else None)
        if kind == "reasoning":
            if isinstance(item.get("encrypted_content"), str) and item["encrypted_content"]:
                pending.append(item["encrypted_content"])
            continue
        if not _is_assistant_output(kind, item):
            pending = []
        if kind == "message":
            role = item.get("role")
            if role in ("developer", "system"):
                text = _text_of(item.get("content"))
                if not turns:
                    system_parts.append(text)
                elif text:
                    turns.append(Turn("system", [Part("text", text)]))
            elif role in ("user", "assistant"):
                parts = _parts(item.get("content"), images_ok and role == "user")
                if parts:
                    turns.append(Turn(role, parts, reasoning=pending))
                    pending = []
        elif kind in ("function_call", "custom_tool_call"):
            custom = kind == "custom_tool_call"
            call_id = str(item.get("call_id") or "")
            args = json.dumps({"input": item.get("input", "")}) if custom else (
                item.get("arguments") or "{}")
            tool_name = upstream_tool_name(item.get("namespace"), item.get("name", ""))
            call = ToolCall(call_id, tool_name, args, custom)
            if turns and turns[-1].role == "assistant":
                turns[-1].calls.append(call)
                turns[-1].reasoning.extend(pending)
            else:
                turns.append(Turn("assistant", calls=[call], reasoning=pending))
            pending = []
            called.add(call_id)
        elif kind in ("function_call_output", "custom_tool_call_output"):
            call_id = item.get("call_id")
            parts = _parts(item.get("output"), tool_media_ok) or [Part("text", "")]
            if call_id and call_id in called:
                turns.append(Turn("tool", parts, call_id=call_id))
            else:
                label = item.get("name") or "tool output"
                output = _text_of(item.get("output"))
                turns.append(Turn("user", [Part("text", f"[{label}] {output}")]))
    text = body.get("text") if isinstance(body.get("text"), dict) else {}
    fmt = text.get("format") if isinstance(text.get("format"), dict) else None
    reasoning = body.get("reasoning") if isinstance(body.get("reasoning"), dict) else {}
    return Conversation(
        system="\n\n".join(p for p in system_parts if p),
        turns=_pair_tool_results(turns),
        tools=tools,
        tool_names=names,
        parallel_tool_calls=bool(body.get("parallel_tool_calls", True)),
        output_schema=fmt if fmt and fmt.get("type") == "json_schema" else None,
        effort=reasoning.get("effort") if isinstance(reasoning.get("effort"), str) else None,
        max_output_tokens=body.get("max_output_tokens") if isinstance(
            body.get("max_output_tokens"), int) else None,
        route=route,
    )


def _is_assistant_output(kind: Any, item: dict[str, Any]) -> bool:
    """Items a preceding reasoning item belongs to; any other item orphans it."""
    return kind in ("function_call", "custom_tool_call") or (
        kind == "message" and item.get("role") == "assistant")


def _pair_tool_results(turns: list[Turn]) -> list[Turn]:
    """Put each call's output right after the assistant turn that made it.

    Strict upstreams require the results of an assistant's tool calls to
    follow it immediately; a missing result gets :data:`NO_OUTPUT`.
    """
    results: dict[str, Turn] = {t.call_id: t for t in turns if t.role == "tool"}
    ordered: list[Turn] = []
    for turn in turns:
        if turn.role == "tool":
            continue
        ordered.append(turn)
        for call in turn.calls:
            ordered.append(results.pop(call.call_id, None)
                           or Turn("tool", [Part("text", NO_OUTPUT)], call_id=call.call_id))
    return ordered


def codex_call(names: dict[str, tuple[str | None, str, bool]], upstream_name: str,
               arguments: str) -> tuple[str, str | None, str, bool]:
    """Map an upstream tool call back to ``(name, namespace, payload, is_custom)``.

    A custom tool's payload is the ``input`` string out of ``{"input": ...}``.
    """
    namespace, name, custom = names.get(upstream_name, (None, upstream_name, False))
    if not custom:
        return name, namespace, arguments or "{}", False
    try:
        value = json.loads(arguments or "{}")
    except ValueError:
        return name, namespace, arguments, True
    payload = value.get("input") if isinstance(value, dict) else None
    return name, namespace, payload if isinstance(payload, str) else arguments, True

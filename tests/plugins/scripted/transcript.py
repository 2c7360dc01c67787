"""Build request bodies the way Codex 0.169.0 does, from bodies it really sent.

``data/codex_0169_bodies.json`` holds bodies recorded from the real Codex
(a catalog model with ``apply_patch`` and an MCP server ``echo``). A
``Transcript`` starts from the real prefix of one of them (built-in prompt,
environment context, the real ``tools`` list), adds the user's text, and
appends each model call with an output in the exact format Codex uses for
that tool (copied from the recordings), so the rules are exercised on the
bodies Codex produces without starting Codex.
"""

from __future__ import annotations

import copy
import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from mmo_scripted.model import decide
from mmo_scripted.reply import CustomToolCall, FunctionCall, Message, OutputItem

DATA = Path(__file__).parent / "data" / "codex_0169_bodies.json"


@lru_cache(maxsize=1)
def recorded() -> dict[str, Any]:
    return json.loads(DATA.read_text(encoding="utf-8"))


def recorded_body(name: str) -> dict[str, Any]:
    return copy.deepcopy(recorded()[name])


def exec_output(stdout: str, code: int = 0) -> str:
    return (
        f"Chunk ID: 1a2b3c\nWall time: 0.0102 seconds\nProcess exited with code {code}\n"
        f"Original token count: {max(1, len(stdout) // 4)}\nOutput:\n{stdout}"
    )


def running_output(session_id: int, stdout: str = "") -> str:
    return (
        f"Chunk ID: 4d5e6f\nWall time: 0.3020 seconds\n"
        f"Process running with session ID {session_id}\n"
        f"Original token count: 0\nOutput:\n{stdout}"
    )


def patch_ok(paths: list[str]) -> str:
    listing = "".join(f"A {p}\n" for p in paths)
    return ("Exit code: 0\nWall time: 0.1 seconds\nOutput:\n"
            f"Success. Updated the following files:\n{listing}")


def mcp_json(value: Any) -> str:
    """An MCP result with structuredContent: Codex sends its compact JSON as a string."""
    return "Wall time: 0.0048 seconds\nOutput:\n" + json.dumps(value, separators=(",", ":"))


def mcp_texts(*texts: str) -> list[dict[str, str]]:
    """An MCP result with text content only: Codex sends a list of input_text items."""
    head = {"type": "input_text", "text": "Wall time: 0.0032 seconds\nOutput:"}
    return [head, *({"type": "input_text", "text": t} for t in texts)]


class Transcript:
    """A conversation grown one model reply at a time."""

    def __init__(self, text: str, base: str = "tool_round", schema: dict | None = None,
                 tools: list[dict[str, Any]] | None = None) -> None:
        body = recorded_body(base)
        prefix_end = 4 if base == "tool_round" else len(body["input"])
        self.body: dict[str, Any] = {**body, "input": body["input"][:prefix_end]}
        if tools is not None:
            self.body["tools"] = tools
        if schema is not None:
            self.body["text"] = {"format": {"type": "json_schema", "strict": True,
                                            "schema": schema, "name": "codex_output_schema"}}
        if text:
            self.user(text)

    def user(self, text: str) -> None:
        self.body["input"].append({"type": "message", "role": "user",
                                   "content": [{"type": "input_text", "text": text}]})

    def goal_objective(self, objective: str) -> None:
        self.body["input"].append({"type": "function_call_output", "name": "goal_objective",
                                   "namespace": "agent", "output": objective})

    def next(self) -> OutputItem:
        """The model's next item, appended to the conversation (without an output)."""
        reply = decide(copy.deepcopy(self.body))
        assert len(reply.output) == 1
        item = reply.output[0]
        if isinstance(item, Message):
            self.body["input"].append({"type": "message", "role": "assistant", "content": [
                {"type": "output_text", "text": item.text}]})
        elif isinstance(item, CustomToolCall):
            self.body["input"].append({"type": "custom_tool_call", "call_id": item.call_id,
                                       "name": item.name, "input": item.input})
        else:
            entry = {"type": "function_call", "name": item.name, "arguments": item.arguments,
                     "call_id": item.call_id}
            if item.namespace:
                entry["namespace"] = item.namespace
            self.body["input"].append(entry)
        return item

    def answer(self, output: Any) -> None:
        """Codex's output for the last call."""
        last = self.body["input"][-1]
        custom = last["type"] == "custom_tool_call"
        kind = "custom_tool_call_output" if custom else "function_call_output"
        self.body["input"].append({"type": kind, "call_id": last["call_id"], "output": output})

    def call(self) -> FunctionCall:
        item = self.next()
        assert isinstance(item, FunctionCall), item
        return item

    def custom(self) -> CustomToolCall:
        item = self.next()
        assert isinstance(item, CustomToolCall), item
        return item

    def message(self) -> str:
        item = self.next()
        assert isinstance(item, Message), item
        return item.text


def script(*lines: str) -> str:
    """A user prompt carrying an mmo-script block."""
    return "Please do this.\n```mmo-script\n" + "\n".join(lines) + "\n```\n"


def without_tools(body_tools: list[dict[str, Any]], *names: str) -> list[dict[str, Any]]:
    return [t for t in body_tools if t.get("name") not in names]

"""Wire shapes of threads, turns, items and usage, as real Codex 0.169.0 emits them."""

from __future__ import annotations

from typing import Any

from mmo_codex_standin.protocol import now_ms

CLI_VERSION = "0.169.0"
CONTEXT_WINDOW = 258400


def sandbox_policy(mode: Any) -> dict[str, Any]:
    """``thread/start.sandbox`` (a mode string) or a turn's policy object, normalised."""
    if isinstance(mode, dict):
        return mode
    if mode == "danger-full-access":
        return {"type": "dangerFullAccess"}
    if mode == "workspace-write":
        return {
            "type": "workspaceWrite",
            "writableRoots": [],
            "networkAccess": False,
            "excludeTmpdirEnvVar": False,
            "excludeSlashTmp": False,
        }
    return {"type": "readOnly", "networkAccess": False}


def user_message(item_id: str, text_inputs: list[dict[str, Any]]) -> dict[str, Any]:
    content = []
    for entry in text_inputs:
        entry = dict(entry)
        if entry.get("type") == "text":
            entry.setdefault("text_elements", [])
        content.append(entry)
    return {"type": "userMessage", "id": item_id, "clientId": None, "content": content}


def agent_message(item_id: str, text: str) -> dict[str, Any]:
    return {
        "type": "agentMessage",
        "id": item_id,
        "text": text,
        "phase": None,
        "memoryCitation": None,
        "moderation": None,
        "delivery": None,
        "questions": None,
    }


def command_execution(
    item_id: str,
    command: str,
    cwd: str,
    status: str,
    output: str | None = None,
    exit_code: int | None = None,
) -> dict[str, Any]:
    return {
        "type": "commandExecution",
        "id": item_id,
        "command": command,
        "cwd": cwd,
        "processId": None,
        "source": "agent",
        "status": status,
        "commandActions": [{"type": "unknown", "command": command}],
        "aggregatedOutput": output,
        "exitCode": exit_code,
        "durationMs": None,
    }


def file_change(item_id: str, changes: list[dict[str, Any]], status: str) -> dict[str, Any]:
    return {"type": "fileChange", "id": item_id, "changes": changes, "status": status}


def dynamic_tool_call(
    item_id: str,
    tool: str,
    arguments: Any,
    status: str,
    content: list | None = None,
    success: bool | None = None,
) -> dict[str, Any]:
    return {
        "type": "dynamicToolCall",
        "id": item_id,
        "namespace": None,
        "tool": tool,
        "arguments": arguments,
        "status": status,
        "contentItems": content,
        "success": success,
        "durationMs": None,
    }


def turn(record: dict[str, Any], *, view: str) -> dict[str, Any]:
    """A Turn; ``view`` is ``full`` (read/resume), ``summary`` (completed) or ``notLoaded``."""
    items = record["items"]
    if view == "summary":
        items = [i for i in items if i["type"] == "agentMessage"][-1:]
    elif view == "notLoaded":
        items = []
    return {
        "id": record["id"],
        "rootTurnId": record["id"],
        "items": items,
        "itemsView": view,
        "status": record["status"],
        "error": record["error"],
        "startedAt": record["startedAt"],
        "completedAt": record["completedAt"],
        "durationMs": record["durationMs"],
    }


def usage_breakdown(input_tokens: int, output_tokens: int) -> dict[str, int]:
    return {
        "totalTokens": input_tokens + output_tokens,
        "inputTokens": input_tokens,
        "cachedInputTokens": 0,
        "cacheWriteInputTokens": 0,
        "outputTokens": output_tokens,
        "reasoningOutputTokens": 0,
    }


def add_usage(total: dict[str, int] | None, last: dict[str, int]) -> dict[str, int]:
    if total is None:
        return dict(last)
    return {key: total.get(key, 0) + value for key, value in last.items()}


def token_usage(total: dict[str, int], last: dict[str, int]) -> dict[str, Any]:
    return {"total": total, "last": last, "modelContextWindow": CONTEXT_WINDOW}


def item_started(thread_id: str, turn_id: str, item: dict[str, Any]) -> dict[str, Any]:
    return {"item": item, "threadId": thread_id, "turnId": turn_id, "startedAtMs": now_ms()}


def item_completed(thread_id: str, turn_id: str, item: dict[str, Any]) -> dict[str, Any]:
    return {"item": item, "threadId": thread_id, "turnId": turn_id, "completedAtMs": now_ms()}

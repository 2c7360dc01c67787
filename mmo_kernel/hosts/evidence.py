"""Results and partial results derived from recorded evidence, never invented (spec 03/04)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mmo_kernel.state.audit import read_jsonl
from mmo_kernel.state.files import atomic_write_text


def _agent_text(item: Any) -> str | None:
    if isinstance(item, dict) and item.get("type") == "agentMessage":
        text = item.get("text")
        return text if isinstance(text, str) else None
    return None


def last_agent_message(events_path: Path) -> str | None:
    """The last agent message text in an events log (``{"direction","message"}`` rows)."""
    last = None
    for row in read_jsonl(events_path):
        message = row.get("message") if isinstance(row, dict) else None
        params = message.get("params") if isinstance(message, dict) else None
        if not isinstance(params, dict):
            continue
        text = _agent_text(params.get("item"))
        if text is None and isinstance(params.get("turn"), dict):
            for item in params["turn"].get("items") or []:
                text = _agent_text(item) or text
        if text:
            last = text
    return last


def final_message(turn: dict[str, Any]) -> str | None:
    """The last agent message of a terminal turn as read back from the thread."""
    text = None
    for item in turn.get("items") or []:
        text = _agent_text(item) if _agent_text(item) is not None else text
    return text


def partial_text(events_path: Path, reason: str) -> str:
    """The last agent message (if any) followed by why the run stopped."""
    last = last_agent_message(events_path)
    body = last.rstrip() + "\n\n" if last else "(no agent message was recorded)\n\n"
    return f"{body}---\n{reason}\n"


def write_partial(path: Path, events_path: Path, reason: str) -> str:
    text = partial_text(events_path, reason)
    atomic_write_text(path, text)
    return text

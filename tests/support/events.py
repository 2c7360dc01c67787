"""Reading an agent's event log (``events.jsonl`` / ``root-events.jsonl``) as its host wrote it."""

from __future__ import annotations

import json
from pathlib import Path


def mcp_items(events_path: str | Path) -> list[dict]:
    """The completed ``mcpToolCall`` items the agent's app-server reported, in order."""
    rows = [json.loads(line) for line in Path(events_path).read_text().splitlines()]
    return [r["message"]["params"]["item"] for r in rows
            if r["direction"] == "received" and r["message"].get("method") == "item/completed"
            and r["message"]["params"]["item"]["type"] == "mcpToolCall"]

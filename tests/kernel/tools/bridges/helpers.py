"""Shared helpers of the tool-bridge tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

FIXTURE_SERVER = Path(__file__).resolve().parents[3] / "fixtures" / "tool_mcp_server.py"
FIXTURE_TOOLS = ["echo", "add", "image", "fail", "sleep", "crash", "getenv", "document"]


def requests_logged(tmp_path: Path, name: str = "fixture") -> list[dict[str, Any]]:
    path = tmp_path / f"{name}.requests.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

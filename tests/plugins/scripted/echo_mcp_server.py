"""A minimal stdio MCP server for the real-Codex tests: ``echo`` answers JSON.

It answers ``echo`` with ``structuredContent`` (like ``mmo_mesh`` does), so
a script can pick fields out of the result with ``{{step.path}}``.
"""

from __future__ import annotations

import json
import sys

TOOLS = [{"name": "echo", "description": "Echo the text back with a job id.",
          "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}},
                          "required": ["text"]}}]


def answer(message: dict) -> dict:
    method = message["method"]
    if method == "initialize":
        return {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                "serverInfo": {"name": "echo", "version": "1"}}
    if method == "tools/list":
        return {"tools": TOOLS}
    if method == "tools/call":
        value = {"job_id": "job-" + message["params"]["arguments"]["text"], "echo": True}
        return {"content": [{"type": "text", "text": json.dumps(value)}],
                "structuredContent": value}
    return {}


def main() -> None:
    for line in sys.stdin:
        message = json.loads(line)
        if "id" in message:
            reply = {"jsonrpc": "2.0", "id": message["id"], "result": answer(message)}
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()

"""MCP ``tools/call`` result bodies: structured JSON plus the same JSON as one text item."""

from __future__ import annotations

import json
from typing import Any


def success_result(result: dict[str, Any]) -> dict[str, Any]:
    """``structuredContent`` plus one text item with the same JSON (unserializable: an error)."""
    try:
        text = json.dumps(result, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        return error_result(exc)
    return {
        "content": [{"type": "text", "text": text}],
        "structuredContent": result,
        "isError": False,
    }


def error_result(exc: BaseException) -> dict[str, Any]:
    """A failed tool: ``isError``, text ``<ExceptionType>: <message>``, plus any ``reason``."""
    kind = type(exc).__name__
    message = str(exc)
    error: dict[str, Any] = {"type": kind, "message": message}
    reason = getattr(exc, "reason", None)
    if isinstance(reason, str):
        error["reason"] = reason
    return {
        "content": [{"type": "text", "text": f"{kind}: {message}"}],
        "structuredContent": {"error": error},
        "isError": True,
    }

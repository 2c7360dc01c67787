"""Checking an agent's final message against its output contract (spec 05)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import jsonschema

_MISSING = object()


@dataclass(frozen=True)
class ContractCheck:
    """``valid`` with the parsed ``value`` (JSON ``null`` included), else the ``error``."""

    valid: bool
    value: Any = None
    error: str = ""


def _parse(text: str) -> Any:
    """The message as JSON; a single fenced ```json block is accepted as the message."""
    stripped = text.strip()
    if stripped.startswith("```") and stripped.endswith("```"):
        stripped = stripped.split("\n", 1)[1].rsplit("```", 1)[0] if "\n" in stripped else ""
    try:
        return json.loads(stripped)
    except ValueError:
        return _MISSING


def check_result(text: str, schema: dict[str, Any]) -> ContractCheck:
    value = _parse(text)
    if value is _MISSING:
        return ContractCheck(False, error="the final message is not a JSON document")
    try:
        jsonschema.validate(value, schema)
    except jsonschema.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "(root)"
        return ContractCheck(False, error=f"at {where}: {exc.message}")
    return ContractCheck(True, value=value)

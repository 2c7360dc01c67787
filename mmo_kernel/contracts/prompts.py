"""What an agent is told about its result contract (spec 05).

A transport that does not constrain generation (``validated_text``) can only
get a valid document if the model sees the schema, so the schema travels as
text: after the task, and again in the single repair turn. The wording keeps
the schema in a fenced ```` ```json ```` block, the form the Codex stand-in
(and a human reading ``events.jsonl``) recognises.
"""

from __future__ import annotations

import json
from typing import Any

REPAIR_PREFIX = "Repair only the final JSON result"
"""How the repair turn's input starts (spec 05)."""


def schema_block(schema: dict[str, Any]) -> str:
    """The schema as a fenced JSON block."""
    return f"```json\n{json.dumps(schema, indent=2)}\n```"


def contract_instructions(schema: dict[str, Any]) -> str:
    """The paragraph appended to a task whose result is validated after the turn."""
    return ("Your final message is your result: exactly one JSON document, and nothing "
            "else, that satisfies this JSON Schema:\n" + schema_block(schema))


def with_contract(text: str, schema: dict[str, Any]) -> str:
    """``text`` followed by the contract instructions."""
    return f"{text.rstrip()}\n\n{contract_instructions(schema)}\n"


def repair_prompt(error: str, schema: dict[str, Any] | None = None) -> str:
    """The input of the single repair turn: the prefix, the validation error, the schema."""
    text = (f"{REPAIR_PREFIX} so that it satisfies the required schema. "
            f"Validation error: {error}\nAnswer with only the corrected JSON document.")
    return with_contract(text, schema) if schema is not None else text

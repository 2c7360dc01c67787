"""The final assistant message, made to satisfy the turn's ``outputSchema``.

Under an output schema (``text.format.schema``) the message must be JSON the
schema accepts: a text that already is such JSON is sent as is, otherwise
the shared generator ``instance_for_schema`` builds a value whose strings
carry the text.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema

from mmo_kernel.contracts import instance_for_schema

from .conversation import Conversation
from .reply import Message


def final_message(conv: Conversation, text: str) -> Message:
    schema = conv.output_schema
    if schema is None:
        return Message(text=text)
    return Message(text=schema_text(schema, text))


def schema_text(schema: dict[str, Any], text: str) -> str:
    """``text`` if it is JSON valid for ``schema``, else a generated valid value."""
    try:
        value = json.loads(text)
        jsonschema.validate(value, schema)
        return text
    except (json.JSONDecodeError, ValueError, jsonschema.ValidationError, jsonschema.SchemaError):
        pass
    generated = instance_for_schema(schema, text=text)
    return json.dumps(generated, ensure_ascii=False, separators=(",", ":"))

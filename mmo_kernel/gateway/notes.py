"""Side information a driver's stream hands to the gateway's request log."""

from __future__ import annotations

from typing import Any

NOTE_KEYS = frozenset({"usage", "provider_metadata", "upstream_model", "finish_reason"})


class LogNote(dict[str, Any]):
    """Yield one from ``serve_responses`` to add fields to the request's log record.

    The gateway merges it into the record and never sends it to Codex. Allowed
    keys: ``usage`` (Responses usage), ``provider_metadata`` (e.g. OpenRouter
    routing), ``upstream_model``, ``finish_reason``.
    """

    def __init__(self, **fields: Any) -> None:
        unknown = set(fields) - NOTE_KEYS
        if unknown:
            raise ValueError(f"unknown log note fields: {', '.join(sorted(unknown))}")
        super().__init__(fields)

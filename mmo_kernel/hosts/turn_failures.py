"""Classifying a failed Codex turn so MMO knows whether to suspend or fail (spec 03).

Codex reports a failed turn as ``{status: "failed", error: {message,
codexErrorInfo?, additionalDetails?}}``; ``codexErrorInfo`` is a string such
as ``usageLimitExceeded`` or an object such as
``{"responseStreamDisconnected": {"httpStatusCode": 502}}``.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

_RETRY_AT = re.compile(
    r"(?P<stamp>\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(?::\d{2})?)"
    r"(?:\s*(?P<zone>UTC|GMT|Z|[+-]\d{2}:?\d{2})\b)?",
    re.IGNORECASE,
)
_USAGE_WORDS = ("usage limit", "usage_limit", "rate limit", "quota", "too many requests")
_TRANSPORT_WORDS = ("stream disconnected", "disconnected", "connection reset", "timed out",
                    "timeout", "transport", "reconnecting", "broken pipe")
_TOOL_ARGUMENT_WORDS = ("failed to parse function arguments", "invalid tool arguments",
                        "malformed tool", "tool call arguments")
_BAD_REQUEST = re.compile(r"\b400 bad request\b|\binvalid_request_error\b", re.IGNORECASE)
_BAD_REQUEST_INFOS = {"badRequest", "invalidRequest"}
PROVIDER_REJECTED = "Provider rejected the request as invalid"
"""The ``summary`` of a provider's bad request (HTTP 400); the raw text stays in ``message``."""
_USAGE_INFOS = {"usageLimitExceeded", "rateLimitExceeded", "quotaExceeded"}
_TRANSPORT_INFOS = {"internalServerError", "responseStreamDisconnected",
                    "responseStreamConnectionFailed", "serverOverloaded",
                    "httpConnectionFailed", "responseTooManyFailedAttempts"}


def _info_names(info: Any) -> set[str]:
    if isinstance(info, str):
        return {info}
    if isinstance(info, dict):
        return set(info)
    return set()


def _http_status(info: Any) -> int | None:
    if isinstance(info, dict):
        for value in info.values():
            if isinstance(value, dict) and isinstance(value.get("httpStatusCode"), int):
                return value["httpStatusCode"]
    return None


def _retry_fields(message: str) -> dict[str, Any]:
    """``retry_at_raw`` always; ``retry_at`` only when the zone is named (never guessed)."""
    match = _RETRY_AT.search(message)
    if not match:
        return {}
    fields: dict[str, Any] = {"retry_at_raw": match.group(0).strip()}
    zone = match.group("zone")
    if zone:
        stamp = datetime.fromisoformat(match.group("stamp").replace(" ", "T"))
        offset = _zone_offset(zone)
        fields["retry_at"] = stamp.replace(tzinfo=offset).isoformat()
        fields["retry_at_timezone"] = zone
    return fields


def _zone_offset(zone: str) -> timezone:
    if zone.upper() in {"UTC", "GMT", "Z"}:
        return UTC
    sign = -1 if zone.startswith("-") else 1
    digits = zone[1:].replace(":", "")
    return timezone(sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:])))


def normalize_turn_failure(turn: dict[str, Any] | None) -> dict[str, Any] | None:
    """``None`` for a turn that did not fail, else ``{kind, retryable, message, ...}``.

    ``message`` is the provider's text as reported; a bad request also gets
    ``summary`` (:data:`PROVIDER_REJECTED`), the line a record's ``error`` shows.
    """
    if not turn or turn.get("status") != "failed":
        return None
    error = turn.get("error") or {}
    message = str(error.get("message") or "turn failed without an error message")
    info = error.get("codexErrorInfo")
    names = _info_names(info)
    lowered = message.lower()
    status = _http_status(info)
    if names & _USAGE_INFOS or any(word in lowered for word in _USAGE_WORDS) or status == 429:
        return {"kind": "provider_usage_limited", "retryable": True, "message": message,
                **_retry_fields(message)}
    if names & _BAD_REQUEST_INFOS or status == 400 or _BAD_REQUEST.search(message):
        return {"kind": "turn_failed", "retryable": False, "message": message,
                "summary": PROVIDER_REJECTED, "http_status": 400}
    if any(word in lowered for word in _TOOL_ARGUMENT_WORDS):
        return {"kind": "malformed_tool_arguments", "retryable": False, "message": message}
    if (names & _TRANSPORT_INFOS or any(word in lowered for word in _TRANSPORT_WORDS)
            or (status is not None and status >= 500)):
        failure: dict[str, Any] = {"kind": "provider_transport", "retryable": True,
                                   "message": message}
        if status is not None:
            failure["http_status"] = status
        return failure
    return {"kind": "turn_failed", "retryable": False, "message": message}

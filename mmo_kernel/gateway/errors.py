"""The one error a route driver raises to make the gateway answer with an HTTP error.

Codex classifies a provider failure by the HTTP status and the error body it
receives (codex-app-server.md §3 "error"), so a driver chooses both; the
gateway writes them verbatim and logs the status.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


class GatewayError(Exception):
    """An HTTP error answer for one gateway request: ``status`` plus a JSON ``body``."""

    def __init__(
        self,
        status: int,
        body: Mapping[str, Any] | str,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        if not 400 <= int(status) <= 599:
            raise ValueError(f"gateway error status must be 4xx or 5xx, got {status!r}")
        self.status = int(status)
        self.body: dict[str, Any] = (
            {"error": {"type": "gateway_error", "message": body}}
            if isinstance(body, str)
            else dict(body)
        )
        self.headers = dict(headers or {})
        super().__init__(f"HTTP {self.status}: {self.message}")

    @property
    def message(self) -> str:
        """The human-readable part of the body (what Codex shows the user)."""
        error = self.body.get("error")
        if isinstance(error, Mapping) and isinstance(error.get("message"), str):
            return error["message"]
        return json.dumps(self.body, sort_keys=True)

    @property
    def code(self) -> str | None:
        """The body's ``error.code`` (what Codex and the SDKs classify by), if it has one."""
        error = self.body.get("error")
        code = error.get("code") if isinstance(error, Mapping) else None
        return code if isinstance(code, str) and code else None

    def body_bytes(self) -> bytes:
        return json.dumps(self.body, separators=(",", ":")).encode("utf-8")


def error_body(message: str, kind: str, code: str | None = None, **extra: Any) -> dict[str, Any]:
    """An OpenAI-style ``{"error": {...}}`` body (the shape Codex parses)."""
    error: dict[str, Any] = {"type": kind, "message": message}
    if code is not None:
        error["code"] = code
    error.update(extra)
    return {"error": error}


def bad_request(message: str) -> GatewayError:
    """400: Codex reports it as a terminal, non-retryable failure with this message."""
    return GatewayError(400, error_body(message, "invalid_request_error"))


def not_found(message: str) -> GatewayError:
    return GatewayError(404, error_body(message, "not_found_error"))


def unauthorized(message: str) -> GatewayError:
    """401: Codex stops the turn (``unauthorized``); retrying cannot help."""
    return GatewayError(401, error_body(message, "authentication_error", "invalid_api_key"))


def usage_limited(message: str, resets_in_seconds: int = 3600) -> GatewayError:
    """429 with a usage-limit body: Codex reports ``usageLimitExceeded``."""
    return GatewayError(
        429,
        error_body(message, "usage_limit_reached", resets_in_seconds=resets_in_seconds),
    )


def server_error(message: str, status: int = 500) -> GatewayError:
    """5xx: Codex retries, then reports a retryable transport/server failure."""
    return GatewayError(status, error_body(message, "server_error"))


__all__ = [
    "GatewayError",
    "bad_request",
    "error_body",
    "not_found",
    "server_error",
    "unauthorized",
    "usage_limited",
]

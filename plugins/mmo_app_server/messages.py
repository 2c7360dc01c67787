"""JSON-RPC message shapes of ``codex app-server`` and how incoming lines are routed.

The server numbers its own requests from 0, so an incoming ``id`` says
nothing about who asked: a line with ``method`` is the server speaking
(a request when it also has ``id``, else a notification); a line without
``method`` is a response to one of our requests (codex-app-server.md §1).
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from mmo_kernel.host_api import utc_timestamp

RequestId = int | str


class Kind(StrEnum):
    """What an incoming message is, decided by the presence of ``method`` and ``id``."""

    SERVER_REQUEST = "server_request"
    NOTIFICATION = "notification"
    RESPONSE = "response"
    INVALID = "invalid"


def classify(message: Any) -> Kind:
    """Route one parsed line; anything that is not a JSON-RPC object is ``INVALID``."""
    if not isinstance(message, dict):
        return Kind.INVALID
    if isinstance(message.get("method"), str):
        return Kind.SERVER_REQUEST if _valid_id(message.get("id")) else Kind.NOTIFICATION
    if _valid_id(message.get("id")) and ("result" in message or "error" in message):
        return Kind.RESPONSE
    return Kind.INVALID


def _valid_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def parse_line(raw: bytes) -> dict[str, Any] | None:
    """A stdout line as a JSON object, or ``None`` (Codex itself ignores non-JSON lines)."""
    text = raw.decode("utf-8", errors="replace").strip()
    if not text:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def encode(message: dict[str, Any]) -> bytes:
    """One compact line, exactly what the stdio transport expects."""
    return (json.dumps(message, separators=(",", ":"), ensure_ascii=False) + "\n").encode("utf-8")


class ServerRequest(BaseModel):
    """A request the app-server sent us; it must get exactly one answer."""

    model_config = ConfigDict(frozen=True)

    id: RequestId
    method: str
    params: dict[str, Any] = {}

    def public(self) -> dict[str, Any]:
        """The ``{"id", "method", "params"}`` shape ``pending_requests`` lists."""
        return {"id": self.id, "method": self.method, "params": dict(self.params)}


class RpcError(BaseModel):
    """The ``error`` member of a JSON-RPC error response."""

    model_config = ConfigDict(extra="allow")

    code: int
    message: str
    data: Any = None


class EventRecord(BaseModel):
    """One row of ``events.jsonl`` / ``root-events.jsonl``."""

    recorded_at: str
    direction: Literal["sent", "received"]
    message: dict[str, Any]

    @classmethod
    def now(cls, direction: Literal["sent", "received"], message: dict[str, Any]) -> EventRecord:
        return cls(recorded_at=utc_timestamp(), direction=direction, message=message)


__all__ = [
    "EventRecord",
    "Kind",
    "RequestId",
    "RpcError",
    "ServerRequest",
    "classify",
    "encode",
    "parse_line",
]

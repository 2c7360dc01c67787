"""JSON-RPC pieces shared by every transport: errors, ids, clocks."""

from __future__ import annotations

import os
import signal
import sys
import time
import uuid
from typing import Any

INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INTERNAL_ERROR = -32603


class RpcError(Exception):
    """A request failure sent back as ``{id, error:{code, message}}``."""

    def __init__(self, message: str, code: int = INVALID_REQUEST) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def payload(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message}


def hard_exit() -> None:
    """Die like a killed app-server: no goodbye, pending requests never answered."""
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def now_ms() -> int:
    return int(time.time() * 1000)


def now_s() -> int:
    return int(time.time())


def uuid7() -> str:
    """A UUIDv7 like Codex's ids: time-ordered, so sorted ids follow creation."""
    millis = now_ms() & ((1 << 48) - 1)
    rand = int.from_bytes(os.urandom(10), "big")
    value = (
        (millis << 80)
        | (0x7 << 76)
        | ((rand >> 62) & 0xFFF) << 64
        | (0b10 << 62)
        | (rand & ((1 << 62) - 1))
    )
    return str(uuid.UUID(int=value))


def check_thread_id(value: Any) -> str:
    """Reject a malformed id with real Codex's wording before any lookup."""
    if not isinstance(value, str):
        raise RpcError("Invalid request: missing field `threadId`")
    try:
        uuid.UUID(value)
    except ValueError:
        raise RpcError(f"invalid thread id: {value!r} is not a UUID") from None
    return value


def notification(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"method": method, "params": params, "emittedAtMs": now_ms()}

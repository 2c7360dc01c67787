"""One client connection: ordered writes, notification opt-outs, server requests."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from mmo_codex_standin.protocol import notification


class Connection:
    """Writes are synchronous so message order on the wire is the order of calls."""

    def __init__(self, write: Callable[[bytes], None], name: str) -> None:
        self._write = write
        self.name = name
        self.initialized = False
        self.experimental = False
        self.client_name: str | None = None
        self.opt_out: set[str] = set()
        self.closed = False
        self._next_id = 0
        self.waiting: dict[Any, asyncio.Future] = {}

    def send(self, message: dict[str, Any]) -> None:
        if self.closed:
            return
        try:
            self._write(json.dumps(message, separators=(",", ":")).encode("utf-8"))
        except (BrokenPipeError, ConnectionError, OSError):
            self.closed = True

    def notify(self, method: str, params: dict[str, Any]) -> None:
        if method not in self.opt_out:
            self.send(notification(method, params))

    def request(
        self, method: str, params: dict[str, Any], future: asyncio.Future, prefix: str | None = None
    ) -> Any:
        """Send a server-to-client request; its id counts from 0 on this connection."""
        number = self._next_id
        self._next_id += 1
        request_id: Any = f"{prefix}{number}" if prefix else number
        self.waiting[request_id] = future
        self.send({"id": request_id, "method": method, "params": params})
        return request_id

    def on_response(self, message: dict[str, Any]) -> None:
        future = self.waiting.pop(message.get("id"), None)
        if future is None or future.done():
            return
        if "error" in message:
            future.set_result({"__error__": message["error"]})
        else:
            future.set_result(message.get("result") or {})

"""Failures of the app-server transport, typed so hosts can tell them apart.

``AppServerError`` means the server answered and refused; ``TransportLost``
means it can no longer answer at all (its process died or closed stdout),
which is the host's cue to restart the app-server and resume the thread.
"""

from __future__ import annotations

from typing import Any


class AppServerError(RuntimeError):
    """A JSON-RPC error response from the app-server: ``{code, message, data?}``."""

    def __init__(self, method: str, code: int, message: str, data: Any = None) -> None:
        self.method = method
        self.code = code
        self.message = message
        self.data = data
        super().__init__(f"app-server refused {method} ({code}): {message}")


class TransportLost(RuntimeError):
    """The app-server process died or closed its stdout; pending requests never get answers."""

    def __init__(self, message: str, returncode: int | None = None) -> None:
        self.returncode = returncode
        super().__init__(message)


__all__ = ["AppServerError", "TransportLost"]

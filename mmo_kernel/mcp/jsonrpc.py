"""Strict newline-delimited JSON-RPC 2.0 framing for the mesh server.

Python's ``json`` module accepts ``NaN``/``Infinity``, keeps the last of two
duplicate keys and decodes ``"\\ud800"`` into a lone surrogate; spec 07 calls
all three parse errors, so the decoder here refuses them explicitly. Only the
stdlib is imported: this module is on the server's cold-start path.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
UNAUTHORIZED = -32001
"""Server-defined code for an identity (capability) failure."""


class ParseError(ValueError):
    """The line is not one strict JSON value."""


class InvalidRequest(ValueError):
    """The value is JSON but not a JSON-RPC 2.0 request or notification.

    ``request_id`` is the id to echo: the message's own id when that id is
    valid, else ``None``.
    """

    def __init__(self, message: str, request_id: str | int | None = None) -> None:
        super().__init__(message)
        self.request_id = request_id


@dataclass(frozen=True)
class Request:
    """A valid request (``is_notification`` false) or notification."""

    method: str
    params: dict[str, Any]
    request_id: str | int | None
    is_notification: bool


@dataclass(frozen=True)
class Response:
    """A client's response to a server request; the mesh sends none, so it is dropped."""

    request_id: str | int | None


def _reject_constant(name: str) -> Any:
    raise ParseError(f"{name} is not valid JSON")


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ParseError(f"duplicate key {key!r}")
        result[key] = value
    return result


_DECODER = json.JSONDecoder(object_pairs_hook=_unique_pairs, parse_constant=_reject_constant)


def _has_lone_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _check_strings(value: Any) -> None:
    """Walk the value iteratively (no recursion limit) looking for lone surrogates."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _has_lone_surrogate(item):
                raise ParseError("string contains a lone surrogate")
        elif isinstance(item, dict):
            for key, inner in item.items():
                if _has_lone_surrogate(key):
                    raise ParseError("object key contains a lone surrogate")
                stack.append(inner)
        elif isinstance(item, list):
            stack.extend(item)


def decode_line(raw: bytes) -> Any:
    """Decode one line into a JSON value, refusing everything spec 07 calls a parse error."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ParseError("line is not valid UTF-8") from exc
    try:
        value = _DECODER.decode(text)
    except ParseError:
        raise
    except (ValueError, RecursionError) as exc:
        raise ParseError(f"invalid JSON: {exc}") from exc
    _check_strings(value)
    return value


def valid_id(value: Any) -> bool:
    """A JSON-RPC id the mesh accepts: a string or an integer (a bool is neither)."""
    if isinstance(value, bool):
        return False
    return isinstance(value, (str, int))


def classify(value: Any) -> Request | Response:
    """A decoded value as a request, notification or response; else raise InvalidRequest."""
    if isinstance(value, list):
        raise InvalidRequest("batches are not supported")
    if not isinstance(value, dict):
        raise InvalidRequest("a JSON-RPC message must be an object")
    has_id = "id" in value
    raw_id = value.get("id")
    echo_id = raw_id if has_id and valid_id(raw_id) else None
    if value.get("jsonrpc") != "2.0":
        raise InvalidRequest('jsonrpc must be exactly "2.0"', echo_id)
    if has_id and not valid_id(raw_id):
        raise InvalidRequest("id must be a string or an integer", None)
    if "method" not in value:
        if has_id and ("result" in value or "error" in value):
            return Response(echo_id)
        raise InvalidRequest("method is required", echo_id)
    method = value["method"]
    if not isinstance(method, str):
        raise InvalidRequest("method must be a string", echo_id)
    params = value.get("params", {})
    if not isinstance(params, dict):
        raise InvalidRequest("params must be an object", echo_id)
    return Request(method=method, params=params, request_id=echo_id, is_notification=not has_id)


def success(request_id: str | int | None, result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def failure(
    request_id: str | int | None, code: int, message: str, data: Any = None
) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def _scrub(value: Any) -> Any:
    """Replace what JSON text cannot carry (lone surrogates, NaN) so a reply can always be sent."""
    if isinstance(value, str):
        return (
            value.encode("utf-8", "replace").decode("utf-8")
            if _has_lone_surrogate(value)
            else value
        )
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {_scrub(str(k)): _scrub(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_scrub(v) for v in value]
    return value


def _dumps(message: Any) -> str:
    return json.dumps(message, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def encode(message: dict[str, Any]) -> bytes:
    """One compact line of UTF-8 JSON; never fails for JSON-shaped input."""
    try:
        return (_dumps(message) + "\n").encode("utf-8")
    except (UnicodeEncodeError, ValueError):
        return (_dumps(_scrub(message)) + "\n").encode("utf-8")

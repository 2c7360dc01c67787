"""A Responses event stream read back into the answer to a ``stream: false`` request.

Route drivers always stream (the upstream hop streams too). A client that
asked for no stream (the Responses API's default, the ``openai`` SDK's plain
``responses.create``) gets the JSON ``response`` object of the stream's last
lifecycle event instead: what the OpenAI API answers. A stream that ended in
``response.failed`` becomes the HTTP error the API would have answered, with
the failure's ``code`` kept (Codex and the SDKs classify by it).
"""

from __future__ import annotations

import json
from typing import Any

from mmo_kernel.gateway.errors import GatewayError, error_body
from mmo_kernel.gateway.sse import SseDecoder

FINAL_EVENTS = frozenset({"response.completed", "response.incomplete", "response.failed"})
FAILED_STATUS = {"context_length_exceeded": 400, "invalid_prompt": 400,
                 "invalid_request_error": 400, "invalid_api_key": 401,
                 "insufficient_quota": 429, "rate_limit_exceeded": 429,
                 "usage_limit_reached": 429, "usage_not_included": 429}
"""HTTP status of a failed response by its error code; anything else is 500."""
ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 429: "rate_limit_error"}


def final_response(stream: bytes) -> tuple[str, dict[str, Any]] | None:
    """``(event type, response object)`` of the last lifecycle event in ``stream``, if any."""
    decoder = SseDecoder()
    for frame in reversed(decoder.feed(stream) + decoder.close()):
        if frame.event and frame.event not in FINAL_EVENTS:
            continue
        try:
            doc = json.loads(frame.data)
        except ValueError:
            continue
        if not isinstance(doc, dict) or doc.get("type") not in FINAL_EVENTS:
            continue
        response = doc.get("response")
        if isinstance(response, dict):
            return doc["type"], response
    return None


def collected_answer(stream: bytes) -> dict[str, Any]:
    """The JSON answer for a non-streamed request, or raise the ``GatewayError`` to send."""
    found = final_response(stream)
    if found is None:
        raise GatewayError(502, error_body(
            "the route's stream ended without response.completed", "server_error",
            "incomplete_stream"))
    kind, response = found
    if kind != "response.failed":
        return response
    error = response.get("error")
    error = error if isinstance(error, dict) else {}
    code = error.get("code")
    code = code if isinstance(code, str) and code else "server_error"
    message = error.get("message")
    message = message if isinstance(message, str) else "response failed"
    status = FAILED_STATUS.get(code, 500)
    kind = "insufficient_quota" if code == "insufficient_quota" else ERROR_TYPES.get(
        status, "server_error")
    raise GatewayError(status, error_body(message, kind, code))

"""``openai_responses``: pass the request through, stream the answer back unchanged.

Only ``model`` is rewritten (gateway id -> upstream id) and the credential
added; the upstream's bytes go to Codex as they arrive. The stream is
watched (not altered) for ``response.completed`` usage, for the log.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from mmo_kernel.gateway.notes import LogNote
from mmo_kernel.gateway.sse import SseDecoder


def responses_request(body: dict[str, Any], model: Any) -> dict[str, Any]:
    return {**body, "model": model.upstream_id, "stream": True}


def relay_responses_stream(chunks: Iterator[bytes]) -> Iterator[Any]:
    """Forward upstream chunks verbatim; end with a LogNote of usage and model."""
    decoder = SseDecoder()
    usage = upstream_model = None
    for chunk in chunks:
        yield chunk
        for frame in decoder.feed(chunk):
            if frame.event != "response.completed":
                continue
            try:
                response = json.loads(frame.data).get("response") or {}
            except (ValueError, AttributeError):
                continue
            usage = response.get("usage")
            upstream_model = response.get("model")
    yield LogNote(usage=usage, upstream_model=upstream_model)

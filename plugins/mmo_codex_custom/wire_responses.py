"""``openai_responses``: pass the request through, stream the answer back unchanged.

Only ``model`` is rewritten (gateway id -> upstream id) and the credential
added; the upstream's bytes go to Codex as they arrive. The stream is
watched (not altered) for ``response.completed`` usage, for the log.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from typing import Any

from mmo_kernel.gateway import LogNote, RequestBody, SseDecoder

COMPLETED = b"response.completed"


def responses_request(body: dict[str, Any], model: Any) -> dict[str, Any] | bytes:
    """The upstream body: Codex's own, with the upstream model id and streaming on.

    A large body the gateway parsed as a ``RequestBody`` is spliced (its other
    members sent verbatim) instead of serialised again.
    """
    replace = {"model": model.upstream_id, "stream": True}
    if isinstance(body, RequestBody):
        return body.spliced(replace)
    return {**body, **replace}


def _frame_end(chunk: bytes) -> int:
    """Offset just past the last blank line (an SSE frame boundary) in ``chunk``, or -1."""
    lf = chunk.rfind(b"\n\n")
    crlf = chunk.rfind(b"\n\r\n")
    return max(lf + 2 if lf >= 0 else -1, crlf + 3 if crlf >= 0 else -1)


class ResponsesWatcher:
    """Finds ``response.completed`` usage in a relayed stream without decoding every frame.

    Bytes are held back only up to the last frame boundary, and a run of whole
    frames is decoded only when it mentions ``response.completed`` (the one
    frame the log needs), so relaying stays a copy-free hand-over.
    """

    def __init__(self) -> None:
        self._pending: list[bytes] = []
        self.usage: Any = None
        self.upstream_model: Any = None

    def watch(self, chunk: bytes) -> None:
        cut = _frame_end(chunk)
        if cut < 0:
            self._pending.append(chunk)
            return
        whole = b"".join([*self._pending, chunk[:cut]]) if self._pending else chunk[:cut]
        self._pending = [chunk[cut:]] if cut < len(chunk) else []
        self._scan(whole)

    def note(self) -> LogNote:
        self._scan(b"".join(self._pending))
        return LogNote(usage=self.usage, upstream_model=self.upstream_model)

    def _scan(self, frames: bytes) -> None:
        """Decode ``frames`` (whole frames) from the first one mentioning completion on."""
        found = frames.find(COMPLETED)
        if found < 0:
            return
        start = _frame_end(frames[:found])
        decoder = SseDecoder()
        for frame in decoder.feed(frames[max(start, 0):]) + decoder.close():
            if frame.event != "response.completed":
                continue
            try:
                response = json.loads(frame.data).get("response") or {}
            except (ValueError, AttributeError):
                continue
            self.usage = response.get("usage")
            self.upstream_model = response.get("model")


def relay_responses_stream(chunks: Iterator[bytes]) -> Iterator[Any]:
    """Forward upstream chunks verbatim; end with a LogNote of usage and model."""
    watcher = ResponsesWatcher()
    for chunk in chunks:
        yield chunk
        watcher.watch(chunk)
    yield watcher.note()


async def relay_responses_stream_async(chunks: AsyncIterator[bytes]
                                       ) -> AsyncGenerator[Any, None]:
    """The same relay for the gateway's async path."""
    watcher = ResponsesWatcher()
    async for chunk in chunks:
        yield chunk
        watcher.watch(chunk)
    yield watcher.note()

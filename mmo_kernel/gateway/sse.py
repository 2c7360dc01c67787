"""Incremental Server-Sent Events decoder for upstream streams.

Upstreams split frames anywhere (mid-line, mid-UTF-8 sequence), so the
decoder buffers bytes and yields whole events only.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class SseFrame:
    """One dispatched event: its ``event`` name ("" when absent) and joined ``data``."""

    event: str
    data: str


class SseDecoder:
    """Feed raw bytes, get complete frames; comments and ids are dropped."""

    def __init__(self) -> None:
        self._buffer = b""
        self._event = ""
        self._data: list[str] = []

    def feed(self, chunk: bytes) -> list[SseFrame]:
        if self._buffer:
            chunk = self._buffer + chunk
        lines = chunk.split(b"\n")
        self._buffer = lines.pop()  # the unterminated rest (b"" after a newline)
        frames: list[SseFrame] = []
        for raw in lines:
            frame = self._line(raw.rstrip(b"\r").decode("utf-8", errors="replace"))
            if frame is not None:
                frames.append(frame)
        return frames

    def close(self) -> list[SseFrame]:
        """Flush a final frame that lacked its terminating blank line."""
        frames = self.feed(b"\n") if self._buffer else []
        frame = self._line("")
        return frames + ([frame] if frame is not None else [])

    def _line(self, line: str) -> SseFrame | None:
        if not line:
            if not self._data and not self._event:
                return None
            frame = SseFrame(self._event, "\n".join(self._data))
            self._event, self._data = "", []
            return frame
        if line.startswith(":"):
            return None
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "event":
            self._event = value
        elif field == "data":
            self._data.append(value)
        return None


def iter_frames(chunks: Iterable[bytes]) -> Iterator[SseFrame]:
    """Frames of a whole byte stream."""
    decoder = SseDecoder()
    for chunk in chunks:
        yield from decoder.feed(chunk)
    yield from decoder.close()

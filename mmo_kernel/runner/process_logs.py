"""Reading a process job's logs for a reply (spec 12 "Process execution", "Limits").

A job's stdout and stderr go straight to files in its job dir (the child writes
them itself, so a chatty child never blocks on a pipe the runner does not drain).
A reply carries the head 8 KiB and the tail 24 KiB with one ``[... N bytes omitted
...]`` line between, cut at line boundaries when there are any, so the last lines
always reach the host; ``observe_jobs`` reads the last lines within 32 KiB.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

HEAD_BYTES = 8 * 1024
TAIL_BYTES = 24 * 1024
OBSERVE_TAIL_BYTES = 32 * 1024


@dataclass(frozen=True)
class Excerpt:
    """What a reply says about one stream."""

    text: str
    total_bytes: int
    truncated: bool


def log_size(path: Path) -> int:
    """Bytes written so far (0 when the file does not exist yet)."""
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def _read_range(path: Path, start: int, length: int) -> bytes:
    try:
        with open(path, "rb") as handle:
            handle.seek(start)
            return handle.read(length)
    except OSError:
        return b""


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def head_and_tail(path: Path, head: int = HEAD_BYTES, tail: int = TAIL_BYTES) -> Excerpt:
    """The whole log when it fits in ``head + tail`` bytes, else head, marker line, tail.

    The head ends after its last newline and the tail starts at a line start (when the
    window holds a newline), and the marker counts exactly the bytes left out.
    """
    size = log_size(path)
    if size <= head + tail:
        return Excerpt(_decode(_read_range(path, 0, size)), size, False)
    first = _read_range(path, 0, head)
    cut = first.rfind(b"\n")
    if cut != -1:
        first = first[: cut + 1]
    start = size - tail
    last = _read_range(path, start, tail)
    if _read_range(path, start - 1, 1) != b"\n":
        newline = last.find(b"\n")
        if newline != -1 and newline < len(last) - 1:
            last = last[newline + 1:]
    omitted = size - len(first) - len(last)
    text = _decode(first)
    if text and not text.endswith("\n"):
        text += "\n"
    text += f"[... {omitted} bytes omitted ...]\n" + _decode(last)
    return Excerpt(text, size, True)


def tail_lines(path: Path, lines: int, limit: int = OBSERVE_TAIL_BYTES) -> str:
    """The last ``lines`` lines of the log, within the last ``limit`` bytes (a partial
    first line of that window is dropped when the window does not start the file)."""
    if lines <= 0:
        return ""
    size = log_size(path)
    start = max(size - limit, 0)
    data = _read_range(path, start, size - start)
    if start > 0 and _read_range(path, start - 1, 1) != b"\n":
        newline = data.find(b"\n")
        data = data[newline + 1:] if newline != -1 else b""
    kept = data.splitlines(keepends=True)[-lines:]
    return _decode(b"".join(kept))


def scrubber(replacements: list[tuple[Path | str, str]]):  # type: ignore[no-untyped-def]
    """A function replacing the runner's absolute paths in process output (spec 12: no
    absolute path of the runner's machine in any output): each ``(path, placeholder)``
    pair, longest path first; ``path/`` + rest becomes the rest (project-relative) when
    the placeholder is empty."""
    pairs = sorted(((str(p), r) for p, r in replacements if str(p) not in ("", "/")),
                   key=lambda pair: -len(pair[0]))
    if not pairs:
        return lambda text: text
    pattern = re.compile("|".join(
        re.escape(p) + r"(?:/|(?![\w.-]))" for p, _ in pairs))
    table = dict(pairs)

    def replace(match: re.Match[str]) -> str:
        found = match.group(0)
        path = found[:-1] if found.endswith("/") and found[:-1] in table else found
        placeholder = table[path]
        if found.endswith("/") and path != found:
            return placeholder + "/" if placeholder else ""
        return placeholder or "."

    return lambda text: pattern.sub(replace, text) if text else text

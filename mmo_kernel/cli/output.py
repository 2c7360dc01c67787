"""Human and machine output for the CLI: aligned tables, JSON, colour on a TTY."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Sequence
from typing import Any, TextIO


def use_colour(stream: TextIO) -> bool:
    return stream.isatty() and "NO_COLOR" not in os.environ and os.environ.get("TERM") != "dumb"


def bold(text: str, stream: TextIO = sys.stdout) -> str:
    return f"\033[1m{text}\033[0m" if use_colour(stream) else text


def print_json(data: Any, stream: TextIO = sys.stdout) -> None:
    stream.write(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], stream: TextIO = sys.stdout) -> None:
    """Left-aligned columns separated by two spaces; an empty table says so."""
    cells = [[("" if c is None else str(c)) for c in row] for row in rows]
    if not cells:
        stream.write("(none)\n")
        return
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    line = "  ".join(h.upper().ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()
    stream.write(bold(line, stream) + "\n")
    for row in cells:
        stream.write("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() + "\n")

"""Human and machine output for the CLI: aligned tables, JSON, colour on a TTY."""

from __future__ import annotations

import argparse
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


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]],
          stream: TextIO = sys.stdout) -> None:
    """Left-aligned columns separated by two spaces; an empty table says so.

    A row shorter than the headers ends in a note that spans the remaining
    columns (``unreadable: <reason>``) without widening them.
    """
    cells = [[("" if c is None else str(c)) for c in row] for row in rows]
    if not cells:
        stream.write("(none)\n")
        return
    measured = [r if len(r) >= len(headers) else r[:-1] for r in cells]  # notes span
    widths = [max([len(h), *(len(r[i]) for r in measured if i < len(r))])
              for i, h in enumerate(headers)]
    line = "  ".join(h.upper().ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()
    stream.write(bold(line, stream) + "\n")
    for row in cells:
        text = "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=False))
        stream.write(text.rstrip() + "\n")


def unreadable_note(row: dict[str, Any]) -> str:
    """The listing cell of a record that cannot be read: ``unreadable: <reason>``."""
    return f"unreadable: {row.get('error')}"


def ago(stamp: Any) -> str:
    """``12s ago``, ``5m ago``, ``3h ago``, ``2d ago`` for an ISO timestamp ("" when absent)."""
    from datetime import UTC, datetime

    if not isinstance(stamp, str):
        return ""
    try:
        seconds = (datetime.now(UTC) - datetime.fromisoformat(stamp)).total_seconds()
    except ValueError:
        return stamp
    return f"{duration(seconds)} ago"


def duration(seconds: float | None) -> str:
    """Compact elapsed time: ``8s``, ``4m12s``, ``3h05m``, ``2d04h``."""
    if seconds is None:
        return ""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def tokens(usage: Any) -> str:
    """``1.2k in / 340 out`` from a usage dict; "" when there is none."""
    if not isinstance(usage, dict):
        return ""
    given, taken = usage.get("input_tokens"), usage.get("output_tokens")
    if not isinstance(given, int) and not isinstance(taken, int):
        return ""
    return f"{_count(given)} in / {_count(taken)} out"


def _count(value: Any) -> str:
    if not isinstance(value, int):
        return "0"
    if value >= 1_000_000:
        return f"{value / 1_000_000:.1f}M"
    if value >= 10_000:
        return f"{value // 1000}k"
    if value >= 1000:
        return f"{value / 1000:.1f}k"
    return str(value)


def short(text: Any, width: int = 48) -> str:
    """One line of at most ``width`` characters, ellipsised."""
    flat = " ".join(str(text or "").split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def fields(pairs: Iterable[tuple[str, Any]], stream: TextIO = sys.stdout) -> None:
    """``key  value`` lines, keys aligned, empty values left out."""
    shown = [(k, v) for k, v in pairs if v not in (None, "", [], {})]
    width = max((len(k) for k, _ in shown), default=0)
    for key, value in shown:
        text = json.dumps(value, sort_keys=True) if isinstance(value, (dict, list)) else value
        stream.write(f"{key.ljust(width)}  {text}\n")


RAW = argparse.RawDescriptionHelpFormatter
"""Help formatter that keeps the examples in an epilog as written."""


def json_flag(parser: argparse.ArgumentParser, what: str = "machine-readable output") -> None:
    """``--json`` on a read command: the same data for scripts."""
    parser.add_argument("--json", action="store_true", help=what)

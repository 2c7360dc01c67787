"""Pages and time filters shared by ``mmo jobs`` and ``mmo sessions``.

A listing shows the newest ``DEFAULT_PAGE`` rows unless ``--limit N`` (any size)
or ``--all`` (everything) says otherwise; ``--since`` takes an ISO date or time
or an age such as ``30m``, ``12h``, ``7d``. Rows of unreadable records are
always shown, beyond the page.
"""

from __future__ import annotations

import argparse
import re
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

DEFAULT_PAGE = 50
_AGE = re.compile(r"^([0-9]+)([smhdw])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def since_value(text: str) -> str:
    """``--since``: an age (``30m``, ``12h``, ``7d``, ``2w``) or an ISO date or time."""
    age = _AGE.match(text.strip())
    if age:
        delta = timedelta(**{_UNITS[age.group(2)]: int(age.group(1))})
        return (datetime.now(UTC) - delta).isoformat(timespec="microseconds")
    try:
        datetime.fromisoformat(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be an age such as 30m, 12h, 7d or an ISO date or time such as "
            f"2026-01-31T12:00, got {text!r}") from None
    return text.strip()


def add_filters(parser: argparse.ArgumentParser, what: str, agent_help: str) -> None:
    parser.add_argument("--agent", metavar="AGENT", help=agent_help)
    parser.add_argument("--since", type=since_value, metavar="WHEN",
                        help=f"only {what} created since WHEN: an age (30m, 12h, 7d) or an "
                             "ISO date or time")
    parser.add_argument("--limit", type=positive_int, metavar="N",
                        help=f"show the newest N {what} (default {DEFAULT_PAGE}; --all: no "
                             "limit)")


def page_size(args: argparse.Namespace) -> int | None:
    """The rows to show: ``--limit``, else everything with ``--all``, else the default page."""
    if args.limit is not None:
        return int(args.limit)
    return None if args.all else DEFAULT_PAGE


def cut(rows: list[dict[str, Any]], size: int | None,
        unreadable: Any) -> tuple[list[dict[str, Any]], bool]:
    """``rows`` (fetched with one row more than ``size``) cut to the page; whether more
    rows exist. Rows of unreadable records are never cut."""
    if size is None:
        return rows, False
    readable = [r for r in rows if not unreadable(r)]
    if len(readable) <= size:
        return rows, False
    extra = {id(r) for r in readable[size:]}
    return [r for r in rows if id(r) not in extra], True


def more_note(what: str, size: int | None) -> None:
    print(f"(the newest {size} {what}; --limit N or --all shows more)", file=sys.stderr)


__all__ = ["DEFAULT_PAGE", "add_filters", "cut", "more_note", "page_size", "positive_int",
           "since_value"]

"""How a snapshot becomes text: handed in by ``mmo top`` so the live view and ``--once``
show the very same cells (and the CLI's one money format), without this package
importing the command line above it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from mmo_kernel.views.model import AgentView, SessionView, TeamSnapshot


@dataclass(frozen=True)
class TableFormat:
    """The ``mmo top`` table's pieces, each fitted to a width in characters."""

    headline: Callable[[TeamSnapshot, int], str]
    columns: Callable[[int], list[tuple[str, int]]]
    """``(column, width)`` pairs that fit a width; the last one takes what is left."""
    cells: Callable[[AgentView, float], dict[str, str]]
    """One agent's cells by column name, at a given time (epoch seconds)."""
    row: Callable[[dict[str, str], list[tuple[str, int]]], str]
    session_line: Callable[[SessionView, int], str]
    finished_line: Callable[[TeamSnapshot, int], str | None]
    route_lines: Callable[[TeamSnapshot, int], list[str]]
    """A header and one line per route (empty when the gateway had no requests)."""
    money: Callable[[float | None], str]
    count: Callable[[int | None], str]
    duration: Callable[[float | None], str]
    short: Callable[[object, int], str]

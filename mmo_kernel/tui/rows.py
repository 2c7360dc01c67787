"""The team table's rows: a session header, then its agent tree, then the finished count.

Pure text, fitted to a width: every row is one line that is cut (with ``…``),
never wrapped, so the tree keeps its shape at 80 columns as at 160.
"""

from __future__ import annotations

from dataclasses import dataclass

from mmo_kernel.tui.format import TableFormat
from mmo_kernel.views.model import AgentView, SessionView, TeamSnapshot

GUTTER = 2
"""The ``> `` cursor mark before each row (visible without colour)."""


@dataclass(frozen=True)
class Row:
    """One line of the table and what it stands for."""

    key: str
    """``session:<id>``, ``agent:<session id>:<agent key>`` or ``finished``."""
    text: str
    session: SessionView | None = None
    agent: AgentView | None = None
    status_span: tuple[int, int] | None = None
    """Where the status cell is in ``text``, to colour it."""

    @property
    def is_session(self) -> bool:
        return self.session is not None and self.agent is None


def _status_span(cols: list[tuple[str, int]]) -> tuple[int, int] | None:
    start = 0
    for name, width in cols:
        if name == "STATUS":
            return start, start + width
        start += width + 1
    return None


def header(fmt: TableFormat, width: int) -> str:
    cols = fmt.columns(width - GUTTER)
    return " " * GUTTER + fmt.row({c: c for c, _ in cols}, cols)


def build(snap: TeamSnapshot, fmt: TableFormat, width: int, now: float,
          showing_finished: bool = False) -> list[Row]:
    """Every shown session (header row, then its agents in tree order), then the count of
    the finished ones that are not shown."""
    inner = width - GUTTER
    cols = fmt.columns(inner)
    span = _status_span(cols)
    rows: list[Row] = []
    for view in snap.sessions:
        rows.append(Row(f"session:{view.session_id}", fmt.session_line(view, inner),
                        session=view))
        for agent in view.agents:
            rows.append(Row(f"agent:{view.session_id}:{agent.key}",
                            fmt.row(fmt.cells(agent, now), cols), session=view, agent=agent,
                            status_span=span))
    finished = fmt.finished_line(snap, inner)
    if finished:
        hint = " · f hides them" if showing_finished else " · f shows them"
        rows.append(Row("finished", fmt.short(finished + hint, inner)))
    return rows

"""The team table: the rows of ``tui.rows`` with a cursor, scrolled to keep it in view.

Drawn as plain lines (each already fitted to the width) so nothing wraps and the
cursor stays visible without colour: the selected row starts with ``>``.
"""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget

from mmo_kernel.tui.rows import Row

STATUS_STYLES = {
    "running": "green", "starting": "green", "waiting": "bold yellow", "detached": "cyan",
    "paused": "cyan", "pausing": "cyan", "completed": "blue", "failed": "bold red",
    "suspended": "bold red", "cancelled": "magenta", "cancelling": "magenta",
    "stopped": "magenta", "stopping": "magenta",
}


class TeamView(Widget, can_focus=True):
    """Every shown session and its agent tree; ``selected`` is the row under the cursor."""

    DEFAULT_CSS = "TeamView { height: 1fr; min-height: 3; text-wrap: nowrap; }"

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.header = ""
        self.rows: list[Row] = []
        self.cursor = 0
        self.top = 0

    @property
    def selected(self) -> Row | None:
        return self.rows[self.cursor] if 0 <= self.cursor < len(self.rows) else None

    def set_rows(self, header: str, rows: list[Row]) -> None:
        """New rows; the cursor stays on the same session or agent when it is still shown."""
        key = self.selected.key if self.selected else None
        self.header, self.rows = header, rows
        keys = [r.key for r in rows]
        if key in keys:
            self.cursor = keys.index(key)
        elif key is None or key == "finished":
            self.cursor = self._first_agent()
        self.cursor = max(0, min(self.cursor, len(rows) - 1))
        self.refresh()

    def _first_agent(self) -> int:
        return next((i for i, r in enumerate(self.rows) if r.agent is not None), 0)

    def move(self, delta: int) -> None:
        if self.rows:
            self.cursor = max(0, min(self.cursor + delta, len(self.rows) - 1))
            self.refresh()

    def move_to(self, index: int) -> None:
        if self.rows:
            self.cursor = max(0, min(index, len(self.rows) - 1))
            self.refresh()

    def on_resize(self) -> None:
        relayout = getattr(self.app, "relayout", None)
        if relayout is not None:
            self.app.call_later(relayout)

    @property
    def page(self) -> int:
        return max(1, self.size.height - 2)

    def render(self) -> Text:
        body = max(1, self.size.height - 1)
        if self.cursor < self.top:
            self.top = self.cursor
        elif self.cursor >= self.top + body:
            self.top = self.cursor - body + 1
        self.top = max(0, min(self.top, max(0, len(self.rows) - body)))
        out = Text(no_wrap=True, overflow="crop")
        out.append(self.header, style="bold")
        if not self.rows:
            out.append("\n  no session in this state dir yet (`mmo run` starts one)")
        for index in range(self.top, min(len(self.rows), self.top + body)):
            row = self.rows[index]
            chosen = index == self.cursor
            line = Text(("> " if chosen else "  ") + row.text,
                        style="bold" if row.is_session else ("dim" if row.key == "finished"
                                                             else ""))
            if row.status_span and row.agent is not None:
                start, end = row.status_span
                style = STATUS_STYLES.get(row.agent.status)
                if style:
                    line.stylize(style, start + 2, end + 2)
            if chosen:
                line.stylize("reverse")
            out.append("\n")
            out.append(line)
        return out

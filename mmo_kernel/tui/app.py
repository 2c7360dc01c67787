"""``mmo top`` on a terminal: the team table, the inspect panel and, when there is room,
the selected session's audit log and the gateway's routes, refreshed every
``interval`` seconds; keys act on the selected row through ``tui.actions``.

The collector refreshes in a worker thread (one at a time: a slow refresh skips a
tick instead of piling up), so keys stay responsive; reading writes nothing.
Actions run in worker threads too and report one line in the notice bar.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import Static

from mmo_kernel import api
from mmo_kernel.tui import panels, rows
from mmo_kernel.tui.actions import ACTIONS, Target, as_ui, perform, read_diff, read_whole_result
from mmo_kernel.tui.actions import refusal as refused
from mmo_kernel.tui.dialogs import AskScreen, TextScreen
from mmo_kernel.tui.format import TableFormat
from mmo_kernel.tui.widgets import TeamView
from mmo_kernel.views.collector import Collector
from mmo_kernel.views.model import TeamSnapshot

WIDE = 120
"""From this width the table has route/model, turn, in/out, cost and scope columns."""
PANES_WIDTH, PANES_HEIGHT = 140, 34
"""From this size the audit and routes panes are shown under the inspect panel."""
ROUTES_WIDTH = 95
FINISHED_SHOWN = 5
"""Finished sessions ``f`` shows when ``--finished`` gave none."""

KEYS = [
    ("↑↓", "move"), ("p", "pause"), ("c", "continue"), ("S", "stop"), ("x", "cancel"),
    ("s", "steer"), ("r", "read result"), ("d", "diff"), ("A", "accept"), ("R", "reject"),
    ("I", "integrate"), ("f", "finished"), ("i", "inspect"), ("?", "help"), ("q", "quit"),
]
NARROW_KEYS = "↑↓ move p pause c cont S stop x cancel s steer r read A acc R rej I integ ? q"


def key_line(width: int) -> str:
    """The key hints that fit ``width``: every key in words, else the main ones, short."""
    text = "  ".join(f"{key} {what}" for key, what in KEYS)
    if len(text) <= width:
        return text
    return NARROW_KEYS if len(NARROW_KEYS) <= width else NARROW_KEYS[: width - 1] + "…"


def help_text() -> str:
    lines = ["Keys act on the selected row: a session header or its root acts on the",
             "whole session, a worker row on that job. [asks first]: a confirmation.", "",
             "  ↑↓ jk    move · PgUp PgDn Home End: page",
             "  r        read: the worker's whole result (marks it read)",
             "  d        diff: the writer's captured patch"]
    for action in ACTIONS.values():
        lines.append(f"  {action.key:<8} {action.name}: {action.help}"
                     + (" [asks first]" if action.confirm else ""))
    lines += ["  f        show or hide the newest finished sessions",
              "  i        hide or show the inspect panel",
              "  g        refresh now · q quit · ? this help"]
    return "\n".join(lines)


class TopApp(App[None]):
    """The live view of every team of the state dir."""

    TITLE = "mmo top"
    ENABLE_COMMAND_PALETTE = False
    CSS = """
    Screen { layout: vertical; }
    #headline { height: 1; text-style: bold; }
    #headline, #inspect, #audit, #routes, #notice, #keys { text-wrap: nowrap;
        text-overflow: ellipsis; }
    #inspect { height: 8; border: round $accent; padding: 0 1; }
    .-wide #inspect { height: 13; }
    .-noinspect #inspect { display: none; }
    #lower { height: 9; display: none; }
    .-panes #lower { display: block; }
    #audit { width: 1fr; height: 100%; border: round $secondary; padding: 0 1; }
    #routes { width: 95; height: 100%; border: round $secondary; padding: 0 1; }
    #notice { height: 1; }
    #notice.-error { color: $error; }
    #keys { height: 1; color: $text-muted; }
    """
    BINDINGS = [
        Binding("q", "quit", "quit"),
        Binding("up,k", "move(-1)", "up", show=False),
        Binding("down,j", "move(1)", "down", show=False),
        Binding("pageup", "page(-1)", show=False), Binding("pagedown", "page(1)", show=False),
        Binding("home", "jump(0)", show=False), Binding("end", "jump(-1)", show=False),
        Binding("r", "read", "read"), Binding("d", "diff", "diff"),
        Binding("f", "finished", "finished"), Binding("i", "inspect", "inspect"),
        Binding("g", "refresh", "refresh"), Binding("question_mark", "help", "help"),
        *(Binding(a.key, f"act('{a.name}')", a.name) for a in ACTIONS.values()),
    ]

    def __init__(self, fmt: TableFormat, interval: float = 1.0, finished: int = 0) -> None:
        super().__init__()
        self.fmt, self.interval, self.finished = fmt, interval, finished
        self.showing_finished = finished > 0
        self.collector = Collector()
        self.snapshot: TeamSnapshot | None = None
        self.details: dict[str, dict[str, Any] | None] = {}
        self.refreshes = 0
        self.notices: list[str] = []
        self._busy = threading.Lock()

    # ------------------------------------------------------------ layout --

    def compose(self) -> ComposeResult:
        yield Static("mmo top — reading the state dir…", id="headline")
        yield TeamView(id="team")
        yield Static(id="inspect")
        with Horizontal(id="lower"):
            yield Static(id="audit")
            yield Static(id="routes")
        yield Static(id="notice")
        yield Static(id="keys")

    def on_mount(self) -> None:
        self.query_one(TeamView).focus()
        self._layout_classes()
        self.action_refresh()
        self.set_interval(self.interval, self.action_refresh)

    def relayout(self) -> None:
        """The terminal changed size: pick the layout for it and draw again."""
        self._layout_classes()
        self._draw()

    def _layout_classes(self) -> None:
        width, height = self.size
        self.set_class(width >= WIDE, "-wide")
        self.set_class(width >= PANES_WIDTH and height >= PANES_HEIGHT, "-panes")

    @property
    def team(self) -> TeamView:
        return self.query_one(TeamView)

    # ----------------------------------------------------------- refresh --

    def action_refresh(self) -> None:
        """Start a refresh unless one is under way (then this tick is skipped)."""
        if self._busy.acquire(blocking=False):
            selected = self.team.selected
            self.run_worker(lambda: self._collect(selected), thread=True, group="refresh",
                            exit_on_error=False)

    def _collect(self, selected: rows.Row | None) -> None:
        try:
            ok, snap = as_ui(lambda: self.collector.refresh(
                show_finished=self.finished if self.showing_finished else 0))
            detail = self._read_detail(selected) if ok else None
        finally:
            self._busy.release()
        if ok:
            self._from_thread(self._show, snap, selected, detail)
        else:
            self._from_thread(self.notice, f"refresh failed: {snap}", True)

    def _read_detail(self, row: rows.Row | None) -> dict[str, Any] | None:
        """The selected job's or session's record as a reconciling read would show it (its
        patch, its pending requests); a pure read, like the collector's."""
        if row is None or row.session is None:
            return None
        job_id, session_id = row.agent.job_id if row.agent else None, row.session.session_id
        if job_id:
            ok, record = as_ui(lambda: api.peek_job(job_id))
        else:
            ok, record = as_ui(lambda: api.peek_session(session_id))
        return record if ok else None

    def _from_thread(self, callback, *args) -> None:
        try:
            self.call_from_thread(callback, *args)
        except RuntimeError:  # the app closed meanwhile
            pass

    def _show(self, snap: TeamSnapshot, selected: rows.Row | None,
              detail: dict[str, Any] | None) -> None:
        self.snapshot = snap
        if selected is not None:
            self.details[selected.key] = detail
        self.refreshes += 1
        self._draw()

    # -------------------------------------------------------------- draw --

    def _draw(self) -> None:
        snap = self.snapshot
        if snap is None:
            return
        width, _ = self.size
        now = time.time()
        wide = width >= WIDE
        headline = self.fmt.headline(snap, width)
        if wide:
            headline += f" · every {self.interval:g} s · {snap.refresh_ms:.0f} ms"
        self.query_one("#headline", Static).update(Text(self.fmt.short(headline, width)))
        self.team.set_rows(rows.header(self.fmt, width),
                           rows.build(snap, self.fmt, width, now, self.showing_finished))
        self._draw_panels(now, width, wide)
        self.query_one("#keys", Static).update(Text(key_line(width)))

    def _draw_panels(self, now: float, width: int, wide: bool) -> None:
        row = self.team.selected
        view = row.session if row else None
        agent = row.agent if row else None
        inspect = self.query_one("#inspect", Static)
        inspect.border_title = self.fmt.short(panels.inspect_title(view, agent), width - 6)
        inner = width - 4
        detail = self.details.get(row.key) if row else None
        inspect.update(Text("\n".join(panels.inspect(view, agent, detail, self.fmt, inner, now,
                                                     11 if wide else 6)), no_wrap=True))
        if not self.has_class("-panes"):
            return
        audit = self.query_one("#audit", Static)
        audit.border_title = ("audit · session " + view.session_id[-6:]) if view else "audit"
        audit.update(Text("\n".join(panels.audit(view, self.fmt, width - ROUTES_WIDTH - 4, 7)),
                          no_wrap=True))
        routes = self.query_one("#routes", Static)
        routes.border_title = "routes · gateway requests, last 5 min"
        routes.update(Text("\n".join(panels.routes(self.snapshot, self.fmt, ROUTES_WIDTH - 4)),
                           no_wrap=True))

    def notice(self, line: str, error: bool = False) -> None:
        """One line in the notice bar (and kept in ``notices``, newest last)."""
        self.notices.append(line)
        bar = self.query_one("#notice", Static)
        bar.set_class(error, "-error")
        bar.update(Text(self.fmt.short(f"{time.strftime('%H:%M:%S')} {line}", self.size.width)))

    # ------------------------------------------------------------- moves --

    def _moved(self) -> None:
        row = self.team.selected
        self._draw_panels(time.time(), self.size.width, self.size.width >= WIDE)
        if row is not None and row.key not in self.details:
            self.run_worker(lambda: self._detail_loaded(row), thread=True, group="detail",
                            exit_on_error=False)

    def _detail_loaded(self, row: rows.Row) -> None:
        detail = self._read_detail(row)
        self._from_thread(self._store_detail, row.key, detail)

    def _store_detail(self, key: str, detail: dict[str, Any] | None) -> None:
        self.details[key] = detail
        self._draw_panels(time.time(), self.size.width, self.size.width >= WIDE)

    def action_move(self, delta: int) -> None:
        self.team.move(delta)
        self._moved()

    def action_page(self, direction: int) -> None:
        self.team.move(direction * self.team.page)
        self._moved()

    def action_jump(self, index: int) -> None:
        self.team.move_to(index if index >= 0 else len(self.team.rows) - 1)
        self._moved()

    def action_finished(self) -> None:
        self.showing_finished = not self.showing_finished
        if self.finished == 0:
            self.finished = FINISHED_SHOWN
        self.notice(f"showing the {self.finished} newest finished sessions"
                    if self.showing_finished else "finished sessions hidden (counted)")
        self.action_refresh()

    def action_inspect(self) -> None:
        self.toggle_class("-noinspect")

    def action_help(self) -> None:
        self.push_screen(TextScreen("mmo top · keys", help_text()))

    # ----------------------------------------------------------- actions --

    def _target(self) -> Target | None:
        row = self.team.selected
        if row is None or row.session is None:
            self.notice("select a session or an agent first (↑↓)")
            return None
        agent = row.agent
        if agent is None or agent.job_id is None:
            root = row.session.agents[0].agent if row.session.agents else "root"
            return Target(row.session.session_id, None, root)
        return Target(row.session.session_id, agent.job_id, agent.agent)

    def action_act(self, name: str) -> None:
        action = ACTIONS[name]
        target = self._target()
        if target is None:
            return
        why = refused(action, target)
        if why:
            self.notice(why, True)
            return
        need, label = action.text(target)
        if not action.confirm and need == "none":
            self._run(action, target, None)
            return
        title = f"{name.capitalize()} {target.name} ({target.agent})?"

        def answered(text: str | None) -> None:
            if text is None:
                self.notice(f"{name} {target.label}: not confirmed, nothing changed")
            else:
                self._run(action, target, text)

        self.push_screen(AskScreen(title, action.help, need, label, action.confirm), answered)

    def _run(self, action, target: Target, text: str | None) -> None:
        self.notice(f"{action.name} {target.label} …")

        def work() -> None:
            ok, line = perform(action, target, text)
            self._from_thread(self.notice, line, not ok)
            self._from_thread(self._after_action, target)

        self.run_worker(work, thread=True, group="actions", exit_on_error=False)

    def _after_action(self, target: Target) -> None:
        self.details.clear()
        self.action_refresh()

    def _reader(self, what: str, call) -> None:
        target = self._target()
        if target is None:
            return
        if not target.job_id:
            self.notice(f"{what} acts on a worker; the session's answer: "
                        f"`mmo session result {target.session_id}`", True)
            return

        def work() -> None:
            ok, out = as_ui(lambda: call(target))
            if not ok:
                self._from_thread(self.notice, f"{what} {target.label} failed: {out}", True)
                return
            content, note = out if isinstance(out, tuple) else (out, "")
            self._from_thread(self.push_screen,
                              TextScreen(f"{what} · {target.agent} · {target.job_id}",
                                         content, note))
            self._from_thread(self._after_action, target)

        self.run_worker(work, thread=True, group="actions", exit_on_error=False)

    def action_read(self) -> None:
        self._reader("result", read_whole_result)

    def action_diff(self) -> None:
        self._reader("diff", read_diff)

"""The modal screens: asking before an action (yes/no, a reason, steering input) and
showing a long text (a result, a diff, the keys)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from mmo_kernel.tui.actions import Need


class AskScreen(ModalScreen[str | None]):
    """Asks before an action; dismissed with the text given ('' when none is asked), or
    with None when the person declines (Escape, ``n``): then nothing is called."""

    DEFAULT_CSS = """
    AskScreen { align: center middle; }
    AskScreen > Vertical { width: 76; max-width: 100%; height: auto; border: thick $warning;
                           padding: 0 1; background: $surface; }
    AskScreen Static { text-wrap: wrap; }
    AskScreen #ask-error { color: $error; }
    """
    BINDINGS = [Binding("escape", "decline", "no", show=False)]

    def __init__(self, title: str, body: str, need: Need, label: str, confirm: bool) -> None:
        super().__init__()
        self.title_text, self.body, self.need, self.label = title, body, need, label
        self.confirm = confirm

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text(self.title_text, style="bold"), id="ask-title")
            yield Static(Text(self.body), id="ask-body")
            if self.need != "none":
                yield Input(placeholder=self.label + (" — required" if self.need == "required"
                                                      else " — optional"), id="ask-input")
                hint = "enter: " + ("yes, do it" if self.confirm else "send") + " · esc: cancel"
            else:
                hint = "y or enter: yes, do it · n or esc: no"
            yield Static(Text(hint, style="dim"), id="ask-hint")
            yield Static("", id="ask-error")

    def on_mount(self) -> None:
        if self.need != "none":
            self.query_one(Input).focus()

    def on_key(self, event) -> None:
        if self.need != "none":
            return
        if event.key in ("y", "enter"):
            event.stop()
            self.dismiss("")
        elif event.key == "n":
            event.stop()
            self.dismiss(None)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        value = event.value.strip()
        if self.need == "required" and not value:
            self.query_one("#ask-error", Static).update(f"{self.label.split(' (')[0]} is "
                                                        "required (esc cancels)")
            return
        self.dismiss(value)

    def action_decline(self) -> None:
        self.dismiss(None)


class TextScreen(ModalScreen[None]):
    """A long text to read (scrolls); Escape or ``q`` closes it."""

    DEFAULT_CSS = """
    TextScreen { align: center middle; }
    TextScreen > Vertical { width: 100%; height: 100%; border: round $accent; padding: 0 1;
                            background: $surface; }
    TextScreen VerticalScroll { height: 1fr; }
    TextScreen Static { text-wrap: wrap; }
    """
    BINDINGS = [Binding("escape", "close", "close", show=False),
                Binding("q", "close", "close", show=False)]

    def __init__(self, title: str, content: str, note: str = "") -> None:
        super().__init__()
        self.title_text, self.content, self.note = title, content, note

    def compose(self) -> ComposeResult:
        with Vertical() as box:
            box.border_title = self.title_text
            box.border_subtitle = (self.note + " · " if self.note else "") + "esc/q closes"
            with VerticalScroll():
                yield Static(Text(self.content))

    def action_close(self) -> None:
        self.dismiss(None)

"""``mmo start`` / ``mmo resume`` with the real Codex TUI in a real terminal (tmux).

The test types into the TUI with ``send-keys`` and reads what it shows with
``capture-pane``, as a user at the terminal would: start a session, ask
something, leave the TUI (the session is detached, its host alive), resume it
by id and by ``--last``, and see the same conversation continue.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mmo_kernel.hosts.codex_cli import thread_persisted
from mmo_kernel.lifecycle.controls import cancel_session, load_session
from mmo_kernel.sessions.records import iter_session_records

from .conftest import wait_until

pytestmark = [pytest.mark.real_codex,
              pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux (.ci/run "
                                 "installs it)")]
MMO = Path(sys.executable).with_name("mmo")
PROFILE = "access-efficient-escalation-lab"
READY = "Ask Codex to do anything"


class Terminal:
    """A private tmux server (its own socket) running one command at a time."""

    def __init__(self, folder: Path) -> None:
        self.socket = str(folder / "tmux.sock")
        self.folder = folder

    def tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-S", self.socket, *args], check=True, text=True,
                              capture_output=True).stdout

    def run(self, argv: list[str], cwd: Path) -> Path:
        """Start ``argv`` in a fresh window; its exit code lands in the returned file."""
        done = self.folder / f"exit-{time.monotonic_ns()}"
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in os.environ.items()
                       if k.startswith(("MMO_", "CODEX_", "XDG_", "HOME", "PATH")))
        line = (f"cd {shlex.quote(str(cwd))} && env {env} TERM=xterm-256color "
                f"{shlex.join(argv)}; echo $? > {shlex.quote(str(done))}")
        if self._alive():
            self.tmux("kill-server")
        self.tmux("new-session", "-d", "-x", "160", "-y", "45", "bash", "--norc", "-c", line)
        return done

    def _alive(self) -> bool:
        return subprocess.run(["tmux", "-S", self.socket, "has-session"],
                              capture_output=True).returncode == 0

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-S", "-200") if self._alive() else ""

    def wait_for(self, text: str, timeout: float = 90) -> str:
        return wait_until(lambda: text in self.screen() and self.screen(), timeout=timeout,
                          what=f"the TUI to show {text!r}")

    def ask(self, prompt: str) -> None:
        self.tmux("send-keys", "-t", "0", "-l", prompt)
        self.wait_for(prompt)  # typed, then Enter on its own (not taken as part of a paste)
        self.tmux("send-keys", "-t", "0", "Enter")

    def quit(self, done: Path) -> int:
        """Ctrl-C, and once more if the TUI only armed its quit, as a user leaves it.
        Never while ``mmo`` has the terminal back: it would interrupt the detach."""
        for _ in range(2):
            if self._alive() and not done.exists():
                subprocess.run(["tmux", "-S", self.socket, "send-keys", "-t", "0", "C-c"],
                               capture_output=True)  # the window may close meanwhile
            if _appears(done, seconds=3):
                break
        wait_until(lambda: done.exists() and done.read_text().strip(), timeout=30,
                   what="the TUI to exit")
        return int(done.read_text())

    def close(self) -> None:
        if self._alive():
            self.tmux("kill-server")


def _appears(path: Path, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.exists():
            return True
        time.sleep(0.1)
    return False


@pytest.fixture
def terminal(tmp_path):
    term = Terminal(tmp_path)
    yield term
    term.close()


def _session() -> dict:
    [record] = iter_session_records()
    return load_session(record["session_id"])


def test_start_detach_resume_and_resume_last_on_the_real_tui(terminal, workspace):
    done = terminal.run([str(MMO), "start", PROFILE, "--offline"], workspace)
    terminal.wait_for(READY)
    terminal.ask("Summarize the repo")
    terminal.wait_for("local_scripted reply to: Summarize the repo")
    assert terminal.quit(done) == 0

    detached = _session()
    sid, thread = detached["session_id"], detached["root_thread_id"]
    assert detached["status"] == "detached" and detached["session_kind"] == "interactive"
    home = Path(detached["homes"][detached["root_agent"]]["home"])
    assert thread_persisted(home, thread)  # the TUI's thread is the root thread, saved
    try:
        done = terminal.run([str(MMO), "resume", sid[:15]], workspace)
        terminal.wait_for("local_scripted reply to: Summarize the repo")  # the same history
        terminal.ask("Now list the files")
        terminal.wait_for("local_scripted reply to: Now list the files")
        assert terminal.quit(done) == 0
        assert _session()["root_thread_id"] == thread

        done = terminal.run([str(MMO), "resume", "--last"], workspace)
        screen = terminal.wait_for("local_scripted reply to: Now list the files")
        assert "Summarize the repo" in screen
        assert terminal.quit(done) == 0
        final = _session()
        assert (final["status"], final["root_thread_id"]) == ("detached", thread)
    finally:
        cancel_session(sid)

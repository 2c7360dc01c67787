"""The screenshots of `mmo top` and `mmo ui` in docs/live-view.md and docs/webui.md.

Runs the `mmo demo` team offline (``mmo_kernel.demo``: a writer fixes a failing test,
a reviewer reviews its patch, the patch is integrated) in a throw-away state dir under
``/tmp/mmo-docs``, leaves a second offline session of the same team working (a writer
and a reviewer in long shell commands, the root waiting for them), then captures:

- `mmo top` headless through Textual's pilot at 160x45 and 80x24 (SVG);
- `mmo ui` (the real command) in headless Chromium through Playwright: the sessions
  list, both sessions' pages and the demo writer's job page on its diff tab (PNG).

The images go to ``docs/images/live-view/`` under fixed names. The folder's paths are
short and fixed and the login name is set to ``docs``, so no random temp path or user
name shows; the UI token is used only in the first request, never shown. Every
process it started is stopped and the folder removed at the end.

Not part of CI (it needs the pinned Codex or the stand-in, and Chromium at
``/usr/bin/chromium``): run it by hand after a change to either view:
``.venv/bin/python tools/docs_screenshots.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import queue
import re
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "images" / "live-view"
BASE = Path("/tmp/mmo-docs")
MARKER_FILE = ".mmo-docs-screenshots"
"""Left in ``BASE`` so a later run knows the folder is its own to remove."""
MARKER_ENV = "MMO_DOCS_SCREENSHOTS"
"""Inherited by every process this run starts (detached hosts too): found and stopped at
the end by it."""
LOGIN = "docs"
MMO = str(Path(sys.executable).with_name("mmo"))
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
TOP_SIZES = ((160, 45), (80, 24))
VIEWPORT = {"width": 1280, "height": 800}
MAX_BYTES = 300_000
LIVE_SECONDS = 900
"""How long the live session's workers keep working: far longer than the capture."""
GIT_IDENTITY = {"GIT_AUTHOR_NAME": "MMO docs", "GIT_AUTHOR_EMAIL": "mmo-docs@localhost",
                "GIT_COMMITTER_NAME": "MMO docs", "GIT_COMMITTER_EMAIL": "mmo-docs@localhost"}
URL = re.compile(r"mmo ui: (http://127\.0\.0\.1:(\d+))/\?token=(\S+)")


def say(text: str) -> None:
    print(f"docs_screenshots: {text}", flush=True)


def wait_for(predicate: Callable[[], Any], what: str, timeout: float = 120) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.25)
    raise SystemExit(f"docs_screenshots: timed out waiting for {what}")


# ----------------------------------------------------------------- the teams --


def prepare() -> Path:
    """A fresh ``BASE`` with its state, config and Codex home (``mmo demo``'s own set-up)."""
    from mmo_kernel.demo.run import prepare_env

    if BASE.exists():
        if not (BASE / MARKER_FILE).is_file():
            raise SystemExit(f"docs_screenshots: {BASE} exists and is not this script's; "
                             "remove it or move it away")
        shutil.rmtree(BASE)
    BASE.mkdir(mode=0o700)
    (BASE / MARKER_FILE).write_text("made by tools/docs_screenshots.py\n", encoding="utf-8")
    for name in ("MMO_STATE_DIR", "MMO_CONFIG_DIR", "NO_COLOR"):  # never the user's state
        os.environ.pop(name, None)
    home = BASE / "home"
    home.mkdir(mode=0o700)
    os.environ.update({
        MARKER_ENV: uuid.uuid4().hex, "LOGNAME": LOGIN, "USER": LOGIN,
        # Codex's login shells source $HOME/.bashrc: the user's shell start-up (and what it
        # prints) stays out of the agents' output, as in the tests (mmo_kernel.testing)
        "HOME": str(home), "XDG_STATE_HOME": str(home / ".local/state"),
        "XDG_CONFIG_HOME": str(home / ".config"), **GIT_IDENTITY})
    return prepare_env(BASE, keep=False)


def run_demo_team(project: Path) -> tuple[str, str, bool]:
    """The demo's team on ``project``, as `mmo demo` runs it; ``(session id, writer job id,
    whether it ran on the real Codex)``."""
    from mmo_kernel import api
    from mmo_kernel.demo import run, scripts

    binary, mode = run.choose_codex(ROOT)
    os.environ["MMO_CODEX_BIN"] = str(binary)
    say(f"the demo team on {mode} ({binary.name})")
    view = run.LiveView(io.StringIO(), run.ROUTE, False)
    if mode == "real Codex":
        session, _ = run.run_real(project, view)
    else:
        session, _ = run.run_standin(project, view, io.StringIO())
    sid = session["session_id"]
    writer = next(j for j in api.list_jobs(sid) if j["agent"] == scripts.WRITER)
    if not (writer.get("patch") or {}).get("diff_file"):
        raise SystemExit(f"docs_screenshots: the demo's writer {writer['job_id']} has no patch")
    return sid, writer["job_id"], mode == "real Codex"


def live_prompt(real: bool) -> str:
    """The second session's root: start a writer and a reviewer that keep working, wait."""
    from mmo_kernel.demo import scripts

    if not real:  # the stand-in runs no script: its root just works on for a while
        return f"Add count_down(n) to calc. FAKE_SLEEP={LIVE_SECONDS}"
    writer = scripts.block(
        "Add count_down(n), the whole numbers from n down to 1, with tests.",
        "write calc/countdown.py <<EOF", '"""Counting down."""', "", "",
        "def count_down(n):", "    return list(range(n, 0, -1))", "EOF",
        f"shell python3 -B -m unittest -q 2>&1 | tail -1; sleep {LIVE_SECONDS}",
        "say count_down is written and tested.")
    reviewer = scripts.block(
        "Review calc's tests for missing edge cases (negative n, large n).",
        f"shell grep -rn 'def test_' tests; sleep {LIVE_SECONDS}",
        "say The tests cover n = 0 and n = 3 only.")
    fix = {"agent": scripts.WRITER, "task_kind": "implement", "mode": "workspace-write",
           "write_scopes": ["calc/"], "task": writer}
    review = {"agent": scripts.REVIEWER, "task_kind": "review", "task": reviewer}
    return scripts.block(
        "Add count_down(n) to calc, with tests, and have the test suite reviewed meanwhile.",
        f"fix: mcp mmo_mesh.agent_spawn {json.dumps(fix)}",
        f"review: mcp mmo_mesh.agent_spawn {json.dumps(review)}",
        'mcp mmo_mesh.agents_wait {"job_ids": ["{{fix.job_id}}", "{{review.job_id}}"], '
        f'"timeout_seconds": {LIVE_SECONDS}}}',
        "goal_complete",
        "say count_down is in; the review is on record.")


def start_live_team(project: Path, before: set[str],
                    real: bool) -> tuple[str, subprocess.Popen]:
    """`mmo run` of the second session, left running (its wall is longer than the capture)
    until its workers are in their long commands; ``(session id, the mmo run process)``."""
    from mmo_kernel import api
    from mmo_kernel.demo.run import PROFILE

    proc = subprocess.Popen([MMO, "run", PROFILE, live_prompt(real), "--offline", "--wall",
                             str(LIVE_SECONDS), "--cwd", str(project)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            stdin=subprocess.DEVNULL)
    try:
        sid = wait_for(lambda: next((s["session_id"] for s in api.peek_sessions()
                                     if s["session_id"] not in before), None),
                       "the live session")
        if real:
            wait_for(lambda: len(api.peek_jobs(sid, status="running")) == 2,
                     "the live session's two workers")
        else:
            wait_for(lambda: api.peek_session(sid).get("root_thread_id"), "the root's turn")
    except BaseException:
        proc.kill()
        raise
    time.sleep(12)  # the timeline bars get some length
    return sid, proc


# ----------------------------------------------------------------- mmo top --


def capture_top(live_sid: str, agent: str) -> list[Path]:
    """`mmo top` at each size, ``agent`` of the live session selected, the demo session
    shown finished."""
    from mmo_kernel.cli.top_cmd import table_format
    from mmo_kernel.tui.app import TopApp

    paths = []

    async def shoot(size: tuple[int, int]) -> None:
        app = TopApp(table_format(), interval=1.0, finished=1)
        async with app.run_test(size=size) as pilot:
            async def until(predicate: Callable[[], Any], what: str) -> None:
                for _ in range(600):
                    if predicate():
                        return
                    await pilot.pause(0.05)
                raise SystemExit(f"docs_screenshots: mmo top: timed out waiting for {what}")

            def agent_row() -> int | None:
                return next((i for i, row in enumerate(app.team.rows)
                             if row.agent is not None and row.agent.agent == agent
                             and row.session.session_id == live_sid), None)

            await until(lambda: agent_row() is not None, f"the live {agent}'s row")
            for _ in range(agent_row() - app.team.cursor):
                await pilot.press("down")
            key = app.team.selected.key
            await until(lambda: app.details.get(key) is not None, f"the {agent}'s record")
            refreshes = app.refreshes
            await until(lambda: app.refreshes > refreshes + 1, "two more refreshes")
            name = f"top-{size[0]}x{size[1]}.svg"
            app.save_screenshot(name, str(OUT))
            paths.append(OUT / name)

    for size in TOP_SIZES:
        asyncio.run(shoot(size))
    return paths


# ------------------------------------------------------------------ mmo ui --


class UIServer:
    """``mmo ui --no-browser --port 0`` (as tests/kernel/webui/harness.py starts it)."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([MMO, "ui", "--no-browser", "--port", "0"],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     stdin=subprocess.DEVNULL, text=True)
        lines: queue.Queue[str] = queue.Queue()
        self.stderr: list[str] = []
        threading.Thread(target=lambda: [lines.put(x) for x in self.proc.stdout],
                         daemon=True).start()
        threading.Thread(target=lambda: [self.stderr.append(x) for x in self.proc.stderr],
                         daemon=True).start()
        try:
            found = URL.search(lines.get(timeout=60))
        except queue.Empty:
            found = None
        if not found:
            self.stop()
            raise SystemExit("docs_screenshots: mmo ui printed no URL: " + "".join(self.stderr))
        self.origin, self.token = found.group(1), found.group(3)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(15)


def capture_ui(demo_sid: str, writer_job: str, live_sid: str) -> list[Path]:
    """The sessions list, both sessions' pages and the demo writer's diff tab, in Chromium."""
    from playwright.sync_api import sync_playwright

    shots = (("ui-sessions", "/"), ("ui-session", f"/session/{demo_sid}"),
             ("ui-session-live", f"/session/{live_sid}"),
             ("ui-job-diff", f"/job/{writer_job}?tab=diff"))
    server = UIServer()
    paths = []
    try:
        with sync_playwright() as driver:
            browser = driver.chromium.launch(executable_path=CHROMIUM, headless=True,
                                             args=CHROMIUM_ARGS, timeout=30_000)
            try:
                context = browser.new_context(viewport=VIEWPORT)
                context.set_default_timeout(30_000)
                page = context.new_page()
                # the token is traded for a cookie and the page comes back without it
                page.goto(f"{server.origin}/?token={server.token}")
                for name, path in shots:
                    page.goto(server.origin + path)
                    page.wait_for_selector("#conn.on")  # the live stream is open
                    page.wait_for_timeout(1500)  # one live update swapped in
                    if server.token in page.content():
                        raise SystemExit("docs_screenshots: the UI token is on a page")
                    target = OUT / f"{name}.png"
                    page.screenshot(path=str(target), clip=_clip(page))
                    paths.append(target)
            finally:
                browser.close()
    finally:
        server.stop()
    return paths


def _clip(page) -> dict[str, float]:
    """The viewport, cut short under the content of a page that does not fill it."""
    bottom = page.evaluate("Math.max(...[...document.body.children].map("
                           "e => e.getBoundingClientRect().bottom))")
    height = min(VIEWPORT["height"], max(200, int(bottom) + 16))
    return {"x": 0, "y": 0, "width": VIEWPORT["width"], "height": height}


# ---------------------------------------------------------------- clean-up --


def stop_everything(live: tuple[str, subprocess.Popen] | None) -> None:
    """Cancel the live session (its `mmo run` then returns), stop the gateway, then end
    any process still carrying this run's marker (a warm host, say)."""
    import psutil

    from mmo_kernel import api
    from mmo_kernel.gateway.process import stop_gateway
    from mmo_kernel.state.processes import kill_processes

    if live:
        sid, proc = live
        try:
            api.cancel_session(sid)
        except (RuntimeError, ValueError) as exc:
            say(f"cancelling the live session: {exc}")
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.terminate()
            proc.wait(15)
    stop_gateway()
    needle = f"{MARKER_ENV}={os.environ.get(MARKER_ENV, '')}".encode()
    left = []
    for proc in psutil.process_iter():
        if proc.pid == os.getpid():
            continue
        try:
            with open(f"/proc/{proc.pid}/environ", "rb") as handle:
                if needle in handle.read().split(b"\0"):
                    left.append(proc)
        except OSError:
            continue
    if left:
        say(f"ending {len(left)} leftover process(es): {[p.pid for p in left]}")
        kill_processes(left, wait_seconds=5)


def check(paths: list[Path], home: str) -> None:
    """Each image's size; an SVG's text is also searched for the user's home directory."""
    for path in paths:
        size = path.stat().st_size
        note = "" if size <= MAX_BYTES else f"  (over {MAX_BYTES // 1000} KB)"
        if path.suffix == ".svg" and home != "/" and home in path.read_text("utf-8"):
            note += f"  (shows {home})"
        say(f"{path.relative_to(ROOT)}: {size / 1000:.0f} KB{note}")


def main() -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    from mmo_kernel.api import load_session
    from mmo_kernel.demo.project import create_project
    from mmo_kernel.demo.scripts import WRITER

    home = str(Path.home())
    prepare()
    OUT.mkdir(parents=True, exist_ok=True)
    live = None
    try:
        project = create_project(BASE / "project")
        demo_sid, writer_job, real = run_demo_team(project)
        say(f"demo session {demo_sid} done; starting the live session")
        live = start_live_team(project, {demo_sid}, real)
        # the stand-in cannot spawn: its live session is its root alone
        paths = capture_top(live[0], WRITER if real else load_session(live[0])["root_agent"])
        paths += capture_ui(demo_sid, writer_job, live[0])
    finally:
        stop_everything(live)
        shutil.rmtree(BASE, ignore_errors=True)
    check(paths, home)


if __name__ == "__main__":
    main()

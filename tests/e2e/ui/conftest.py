"""The browser tests of `mmo ui`: one headless Chromium (the system's) per module, a real
`mmo ui` per test on its own state dir, teams on the deterministic Codex stand-in.

Screenshots are kept in ``tests/artifacts/ui/`` (gitignored) for a person to look at.
"""

from __future__ import annotations

from pathlib import Path

import psutil
import pytest
from kernel.webui.harness import start_ui

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts" / "ui"


@pytest.fixture(autouse=True)
def _e2e_env(mmo_env, mmo_standin, mmo_process_guard):
    """Replaces the real-Codex set-up of tests/e2e: these teams run on the stand-in."""
    yield mmo_env
    from mmo_kernel.gateway.process import stop_gateway

    stop_gateway()


TIMEOUT_MS = 20_000
"""Every Playwright action, wait and navigation gives up after this (Playwright's own
default is 30 s, and a few calls have none): a stuck page fails its test, never the run."""


class Browser:
    """The module's Chromium and its processes; each test gets a context of its own."""

    def __init__(self, chromium, drivers: set[int]) -> None:
        self.chromium, self.drivers = chromium, drivers

    def new_context(self):
        context = self.chromium.new_context(viewport={"width": 1400, "height": 1000})
        context.set_default_timeout(TIMEOUT_MS)
        context.set_default_navigation_timeout(TIMEOUT_MS)
        return context

    def pids(self) -> set[int]:
        """The Playwright driver and every Chromium process under it (renderers come and
        go with pages): the module's, not a test's, so no test's process guard counts them."""
        out = set(self.drivers)
        for pid in self.drivers:
            try:
                out |= {c.pid for c in psutil.Process(pid).children(recursive=True)}
            except psutil.Error:
                continue
        return out


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    before = {c.pid for c in psutil.Process().children()}
    with sync_playwright() as driver:
        drivers = {c.pid for c in psutil.Process().children()} - before
        chromium = driver.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS,
                                          timeout=TIMEOUT_MS)
        try:
            yield Browser(chromium, drivers)
        finally:
            chromium.close()


@pytest.fixture
def context(browser):
    """A fresh profile per test: no cookie, cache or open stream carries over, and closing
    it closes every page (and its live stream) the test opened."""
    made = browser.new_context()
    yield made
    made.close()


@pytest.fixture(autouse=True)
def _browser_is_the_modules(browser, mmo_process_guard):
    yield
    for pid in browser.pids():
        mmo_process_guard.allow(pid)


@pytest.fixture
def ui(_e2e_env):
    server = start_ui()
    yield server
    server.stop()


class Page:
    """A tab on the UI that records every request it makes."""

    def __init__(self, context, server) -> None:
        self.server = server
        self.page = context.new_page()
        self.requests: list[str] = []
        self.page.on("request", lambda request: self.requests.append(request.url))

    def open(self, path: str = "/") -> None:
        joiner = "&" if "?" in path else "?"
        answer = self.page.goto(f"{self.server.origin}{path}{joiner}token={self.server.token}")
        assert answer is not None and answer.status == 200, answer and answer.status
        self.page.wait_for_selector("#conn.on")  # the live stream is open

    def shot(self, name: str) -> Path:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        print(f"screenshot: {path}")
        return path

    def foreign(self) -> list[str]:
        """Requests to anywhere but the server's own origin."""
        origin = self.server.origin + "/"
        return [url for url in self.requests if not url.startswith(origin)]



@pytest.fixture
def tab(context, ui):
    return Page(context, ui)  # closed with its context

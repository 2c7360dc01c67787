"""Waiting helpers shared by the suites that drive live hosts."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any


def wait_until(predicate: Callable[[], Any], timeout: float = 30.0,
               what: str = "condition", poll: float = 0.05) -> Any:
    """Poll ``predicate`` every ``poll`` seconds until it returns something truthy; that
    value is returned."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(poll)
    raise AssertionError(f"timed out waiting for {what}")


def blocked_in(thread: threading.Thread, function: str,
               waiting_on: str | None = "threading.py") -> bool:
    """True while ``thread`` is inside a call of ``function`` and, unless ``waiting_on`` is
    None, its innermost frame is in that module (by default: waiting on a ``threading``
    primitive, as ``Event.wait`` does).

    Tells a test that a blocking call (e.g. ``wait_for_jobs``) is in its wait loop, so
    whatever the test does next happens *while* it waits: an event to synchronize on,
    instead of a sleep that hopes the call got there.
    """
    frame = sys._current_frames().get(thread.ident) if thread.ident is not None else None
    if frame is None or (waiting_on is not None
                         and not frame.f_code.co_filename.endswith(waiting_on)):
        return False
    while frame is not None:
        if frame.f_code.co_name == function:
            return True
        frame = frame.f_back
    return False


class Background:
    """Run a blocking call (e.g. ``run_root_exec``) in a thread while the test acts."""

    def __init__(self, target: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        self.result: Any = None
        self.error: BaseException | None = None

        def run() -> None:
            try:
                self.result = target(*args, **kwargs)
            except BaseException as exc:  # re-raised by join()
                self.error = exc

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def join(self, timeout: float = 90.0) -> Any:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the call did not return"
        if self.error is not None:
            raise self.error
        return self.result

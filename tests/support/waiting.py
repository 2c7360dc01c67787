"""Waiting helpers shared by the suites that drive live hosts."""

from __future__ import annotations

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

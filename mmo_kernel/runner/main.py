"""``mmo runner --config FILE``: the foreground process on the machine holding the projects.

It loads runner.toml, scans the project registry, dials out to the server
(``LinkClient``: reconnects forever with backoff) and executes each forwarded call
through ``dispatch``. It rescans the registry every 5 s and at each hello, sending a
``projects`` frame when the list changed; its external sessions are ``running`` while
the link is up and ``suspended`` while it is down. SIGINT/SIGTERM stop the link,
stop every process job (SIGTERM to its group, SIGKILL after 10 s) and exit 0. Logs go
to stderr and never contain the runner token.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from mmo_kernel.runner.config import ConfigError, check_team_profile, load_config
from mmo_kernel.runner.context import RunnerConfig
from mmo_kernel.runner.registry import RESCAN_SECONDS, Registry

LOG = logging.getLogger("mmo.runner")
POLL_SECONDS = 0.25
"""How often the main loop looks at the link state (connect/disconnect transitions)."""
EXIT_OK, EXIT_FAILURE = 0, 1


class _TokenFilter(logging.Filter):
    """Belt and braces: no log line may carry the runner token."""

    def __init__(self, token: str) -> None:
        super().__init__()
        self._token = token

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if self._token and self._token in message:
            record.msg = message.replace(self._token, "<runner token>")
            record.args = None
        return True


def _logging(token: str) -> logging.Handler:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s mmo runner %(levelname)s %(message)s"))
    handler.addFilter(_TokenFilter(token))
    root = logging.getLogger("mmo")
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    for noisy in ("websockets", "websockets.client"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    return handler


def runner_state_dir(config: RunnerConfig) -> Path:
    """``$MMO_STATE_DIR/runner/<client_id>`` (0700): process jobs and their logs."""
    from mmo_kernel.state.paths import ensure_private_dir, state_dir

    base = ensure_private_dir(state_dir())
    return ensure_private_dir(ensure_private_dir(base / "runner") / config.client_id)


class Runner:
    """One runner process: registry, process jobs, link, session host bookkeeping."""

    def __init__(self, config: RunnerConfig) -> None:
        from mmo_kernel.runner.link_client import LinkClient
        from mmo_kernel.runner.process_jobs import ProcessJobs
        from mmo_kernel.state.redaction import register_values

        register_values({"MMO_RUNNER_TOKEN": config.token})  # a job that prints it: redacted
        self.config = config
        self.state_dir = runner_state_dir(config)
        self.registry = Registry(config)
        self.registry.rescan()
        self.stopping = threading.Event()
        self.jobs = ProcessJobs(self.state_dir, config.policy, job_event=self._job_event)
        self.link = LinkClient(config.server_url, config.token, config.client_id, config.owner,
                               handle_call=self.handle_call, projects=self._hello_projects,
                               live_job_ids=self.jobs.live_job_ids,
                               allow_insecure_transport=config.allow_insecure_transport,
                               on_fatal=lambda exc: self.stopping.set())

    def _job_event(self, payload: dict[str, Any]) -> None:
        self.link.send_job_event(payload)

    def _hello_projects(self) -> list[dict[str, Any]]:
        """Asked at each hello: a reconnect rescans the registry first."""
        self.registry.rescan()
        return self.registry.wire()

    def handle_call(self, frame: dict[str, Any]) -> dict[str, Any]:
        from mmo_kernel.runner.dispatch import dispatch

        return dispatch(frame, config=self.config, projects=self.registry.projects(),
                        jobs=self.jobs, state_dir=self.state_dir)

    def _link_changed(self, up: bool, *, stopping: bool = False) -> None:
        from mmo_kernel.runner.sessions import attach_sessions, suspend_sessions

        if up:
            count = attach_sessions(self.config)
            if count:
                LOG.info("%d external session(s) running again", count)
            return
        reason = ("the mmo runner serving this session stopped" if stopping
                  else "the mmo runner is not connected to the server")
        count = suspend_sessions(self.config, reason)
        if count:
            LOG.info("%d external session(s) suspended (%s)", count,
                     "runner stopped" if stopping else "until the link is back")

    def serve(self) -> int:
        """Run until SIGINT/SIGTERM (0) or a refusal retrying cannot fix (1)."""
        LOG.info("runner %s (owner %s) starting; %d project(s): %s", self.config.client_id,
                 self.config.owner, len(self.registry.projects()),
                 ", ".join(sorted(self.registry.projects())) or "none")
        self._link_changed(False)  # sessions of a previous runner wait for this link
        from mmo_kernel.runner.link_client import LinkWatch

        watch = LinkWatch(self.link)
        self.link.start()
        next_scan = 0.0
        while not self.stopping.wait(POLL_SECONDS):
            for up in watch.changes():
                self._link_changed(up)
            now = time.monotonic()
            if now >= next_scan:
                next_scan = now + RESCAN_SECONDS
                if self.registry.rescan() and self.link.connected.is_set():
                    self.link.send_projects(self.registry.wire())
        return self.shutdown()

    def shutdown(self) -> int:
        LOG.info("runner stopping: closing the link and stopping process jobs")
        self.link.stop()
        self.jobs.stop_all()
        self._link_changed(False, stopping=True)
        fatal = self.link.fatal
        if fatal is not None and not self._signalled:
            LOG.error("runner stopped: %s", fatal)
            return EXIT_FAILURE
        LOG.info("runner stopped")
        return EXIT_OK

    _signalled = False

    def signal(self, signum: int, _frame: Any = None) -> None:
        self._signalled = True
        self.stopping.set()


def main(config_file: str) -> int:
    """The ``mmo runner`` process; returns its exit code."""
    try:
        config = load_config(config_file)
        check_team_profile(config, config_file)
    except ConfigError as exc:
        print(f"mmo runner: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    handler = _logging(config.token)
    try:
        try:
            runner = Runner(config)
        except (OSError, ValueError, RuntimeError) as exc:
            LOG.error("cannot start: %s", " ".join(str(exc).split()))
            return EXIT_FAILURE
        previous = {sig: signal.signal(sig, runner.signal)
                    for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            return runner.serve()
        finally:
            for sig, old in previous.items():
                signal.signal(sig, old)
    finally:
        logging.getLogger("mmo").removeHandler(handler)

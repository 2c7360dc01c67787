"""Running the shared gateway as a detached process: ensure, status, stop.

One gateway serves every session of a user. ``ensure_gateway`` starts it on
demand (a detached process leading its own process group), records it in
``<state>/gateway/gateway.json`` (pid, start token, host, port, url), reuses
it while it answers ``/health`` as that same process, and restarts it when it
is dead or lacks a plugin the caller has — on the same port when it can, so
agents configured with the old url keep working.
"""

from __future__ import annotations

import http.client
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from filelock import FileLock

from mmo_kernel import package_version
from mmo_kernel.gateway.plugin_set import installed_plugins, lacks_plugins
from mmo_kernel.gateway.request_log import gateway_dir
from mmo_kernel.gateway.sources import gateway_address
from mmo_kernel.state.files import MMO_SCHEMA_VERSION, atomic_write_json
from mmo_kernel.state.paths import ensure_private_dir, state_dir
from mmo_kernel.state.processes import (
    process_matches,
    reap_spawned,
    spawn_detached,
    terminate_process_groups,
)

RECORD_NAME = "gateway.json"
START_TIMEOUT_SECONDS = 15.0
STOP_GRACE_SECONDS = 3.0
DEFAULT_IDLE_EXIT_SECONDS = 600
LIFETIME_CHECK_SECONDS = 2.0
"""How often a running gateway checks that its record is still there (and, when quiet,
whether any session still needs it)."""
STARTING_GRACE_SECONDS = 120.0
"""A session this young that is still ``starting`` counts as live: its host is about to
be launched (``ensure_gateway`` ran just before)."""
SESSION_PROCESSES = (("root_pid", "root_start_token"),
                     ("root_app_server_pid", "root_app_server_start_token"),
                     ("root_client_pid", "root_client_start_token"))
JOB_PROCESSES = (("runner_pid", "runner_start_token"),
                 ("app_server_pid", "app_server_start_token"))
"""The recorded ``(pid, start token)`` fields of the processes that may call the gateway
(spec 03, 04); read raw here, the gateway sitting below the session and job packages."""


def record_path() -> Path:
    return gateway_dir() / RECORD_NAME


def read_record() -> dict[str, Any] | None:
    try:
        record = json.loads(record_path().read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def healthy(record: dict[str, Any], timeout: float = 2.0) -> bool:
    """The recorded process is alive *and* answers ``/health`` as itself (and has not
    begun to exit idle)."""
    if record.get("exited") or not process_matches(record.get("pid"), record.get("start_token")):
        return False
    try:
        conn = http.client.HTTPConnection(record["host"], int(record["port"]), timeout=timeout)
        conn.request("GET", "/health")
        response = conn.getresponse()
        body = json.loads(response.read() or b"{}")
        conn.close()
    except (OSError, ValueError, KeyError, http.client.HTTPException):
        return False
    return body.get("service") == "mmo-gateway" and body.get("pid") == record["pid"]


def _lock() -> FileLock:
    return FileLock(str(ensure_private_dir(gateway_dir()) / "gateway.lock"))


def ensure_gateway() -> dict[str, Any]:
    """The running gateway's record, starting (or restarting) it if needed.

    A healthy gateway that lacks one of this environment's plugins (installed
    or upgraded after it started) is restarted too, on the same port. Returns
    the record plus ``"reused": bool``. Raises ``RuntimeError`` with the
    gateway's own error output when it cannot start.
    """
    plugins = installed_plugins()
    with _lock():
        record = read_record()
        if record is not None and healthy(record) and not lacks_plugins(record, plugins):
            return {**record, "reused": True}
        if record is not None:
            _retire(record)  # dead, or started before one of the caller's plugins was installed
        return {**_start(previous_port=(record or {}).get("port")), "reused": False}


def _start(previous_port: int | None) -> dict[str, Any]:
    host, port = gateway_address()
    directory = ensure_private_dir(gateway_dir())
    record_path().unlink(missing_ok=True)
    argv = [sys.executable, "-m", "mmo_kernel.gateway", "--host", host, "--port", str(port)]
    if port == 0 and isinstance(previous_port, int) and previous_port > 0:
        argv += ["--prefer-port", str(previous_port)]
    log = directory / "gateway.log"
    pid, token = spawn_detached(argv, cwd=directory, env=os.environ, stdout=log, stderr=log)
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        record = read_record()
        if record is not None and record.get("pid") == pid and healthy(record):
            return record
        if not process_matches(pid, token):
            break
        time.sleep(0.02)
    reap_spawned()
    if process_matches(pid, token):
        terminate_process_groups([pid], STOP_GRACE_SECONDS)
    raise RuntimeError(f"the MMO gateway did not start on {host}:{port}: {_log_tail(log)}")


def _log_tail(log: Path) -> str:
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except OSError:
        return "(no gateway log)"
    return " | ".join(lines[-3:]) or "(empty gateway log)"


def _retire(record: dict[str, Any]) -> bool:
    """Stop the recorded gateway if it is still that process; forget the record."""
    stopped = False
    pid = record.get("pid")
    if isinstance(pid, int) and process_matches(pid, record.get("start_token")):
        terminate_process_groups([pid], STOP_GRACE_SECONDS)
        stopped = True
    reap_spawned()
    record_path().unlink(missing_ok=True)
    return stopped


def revive_gateway() -> dict[str, Any] | None:
    """Before a host is launched again (continue, resume, compact): start the gateway
    again if it exited idle or died, so the url the agents were configured with answers.

    Without a record (never started in this state dir, or stopped on purpose) nothing
    starts; a recorded gateway that is still its process is left alone (no request).
    """
    record = read_record()
    if record is None:
        return None
    if not record.get("exited") and process_matches(record.get("pid"), record.get("start_token")):
        return None
    return ensure_gateway()


def gateway_status() -> dict[str, Any]:
    """``{"running", "healthy", "pid", "url", ...}`` without starting anything."""
    record = read_record()
    if record is None:
        return {"running": False, "healthy": False, "pid": None, "url": None}
    alive = process_matches(record.get("pid"), record.get("start_token"))
    return {**record, "running": alive, "healthy": alive and healthy(record)}


def stop_gateway() -> dict[str, Any]:
    """Stop the shared gateway (its whole process group); ``{"stopped", "pid"}``."""
    with _lock():
        record = read_record()
        if record is None:
            return {"stopped": False, "pid": None}
        return {"stopped": _retire(record), "pid": record.get("pid")}


def new_record(pid: int, token: str, host: str, port: int,
               plugins: list[str] | None = None) -> dict[str, Any]:
    return {"schema_version": MMO_SCHEMA_VERSION, "pid": pid, "start_token": token,
            "host": host, "port": port, "url": f"http://{host}:{port}",
            "started_at": time.time(), "package_version": package_version(),
            "plugins": installed_plugins() if plugins is None else plugins}


# ------------------------------------------------------ the gateway's lifetime --


def idle_exit_seconds() -> int:
    """``gateway_idle_exit_seconds`` from settings.toml (0: never exit for idleness)."""
    from mmo_kernel.config.settings import load_settings

    try:
        return load_settings().gateway_idle_exit_seconds
    except (ValueError, OSError):  # a broken settings.toml is reported by the commands
        return DEFAULT_IDLE_EXIT_SECONDS


def orphaned(pid: int) -> str | None:
    """Why the gateway ``pid`` is no longer MMO's (its record is gone, or names another
    gateway), else ``None``. Nobody can find or stop such a gateway: it should exit."""
    if not state_dir().is_dir():
        return f"its state dir {state_dir()} is gone"
    try:
        record = json.loads(record_path().read_text(encoding="utf-8"))
    except FileNotFoundError:
        return f"its record {record_path()} is gone"
    except (OSError, ValueError):
        return None  # unreadable now: not proof that it is gone
    if isinstance(record, dict) and record.get("pid") not in (pid, None):
        return f"{record_path()} names another gateway (pid {record.get('pid')})"
    return None


def _raw_record(path: Path) -> dict[str, Any] | None:
    try:
        doc = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def _just_created(doc: dict[str, Any]) -> bool:
    stamp = doc.get("run_created_at") or doc.get("created_at")
    if doc.get("status") != "starting" or not isinstance(stamp, str):
        return False
    from datetime import UTC, datetime

    try:
        created = datetime.fromisoformat(stamp)
    except ValueError:
        return False
    created = created if created.tzinfo else created.replace(tzinfo=UTC)
    return (datetime.now(UTC) - created).total_seconds() < STARTING_GRACE_SECONDS


def live_work() -> bool:
    """Whether a session or job of this state dir may still call the gateway: one of its
    recorded host, app-server or client processes is alive (identity-checked), or it
    was created moments ago and is still starting."""
    root = state_dir()
    for folder, leaf, fields in (("sessions", "session.json", SESSION_PROCESSES),
                                 ("jobs", "metadata.json", JOB_PROCESSES)):
        try:
            entries = [e.path for e in os.scandir(root / folder) if e.is_dir()]
        except OSError:
            continue
        for entry in entries:
            doc = _raw_record(Path(entry) / leaf)
            if doc is None:
                continue
            if _just_created(doc) or any(process_matches(doc.get(p), doc.get(t))
                                         for p, t in fields):
                return True
    return False


def claim_idle_exit(pid: int, still_idle: Callable[[], bool],
                    stop_listening: Callable[[], None]) -> bool:
    """Under the starters' lock, and only if ``still_idle()`` holds there: stop listening,
    mark the record ``exited`` (kept, so the next start takes the same port) and return
    True.

    A starter that found this gateway healthy a moment ago called ``/health``, which
    counts as a request: ``still_idle`` is then false and the gateway stays. One that
    comes later finds the port closed and the record ``exited``, and starts a new one.
    """
    from filelock import Timeout

    if not gateway_dir().is_dir():
        return False  # orphaned, not idle: never re-create a deleted state dir
    lock = FileLock(str(gateway_dir() / "gateway.lock"))
    try:
        lock.acquire(timeout=0)
    except (Timeout, OSError):
        return False  # a starter is at work: look again later
    try:
        if not still_idle():
            return False
        stop_listening()
        record = read_record()
        if record is not None and record.get("pid") == pid:
            atomic_write_json(record_path(), {**record, "exited": "idle",
                                              "exited_at": time.time()})
        return True
    finally:
        lock.release()


def lifetime_checks(pid: int) -> dict[str, Any]:
    """The keyword arguments of ``GatewayServer.watch_lifetime`` for the gateway ``pid``."""
    idle = idle_exit_seconds()
    check = min(LIFETIME_CHECK_SECONDS, max(0.2, idle / 2)) if idle else LIFETIME_CHECK_SECONDS
    return {"orphaned": lambda: orphaned(pid), "live_work": live_work,
            "claim_idle": lambda still_idle, stop: claim_idle_exit(pid, still_idle, stop),
            "idle_seconds": float(idle), "check_seconds": check}

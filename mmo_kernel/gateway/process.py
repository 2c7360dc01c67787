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
from pathlib import Path
from typing import Any

from filelock import FileLock

from mmo_kernel import package_version
from mmo_kernel.gateway.plugin_set import installed_plugins, lacks_plugins
from mmo_kernel.gateway.request_log import gateway_dir
from mmo_kernel.gateway.sources import gateway_address
from mmo_kernel.state.files import MMO_SCHEMA_VERSION
from mmo_kernel.state.paths import ensure_private_dir
from mmo_kernel.state.processes import (
    process_matches,
    reap_spawned,
    spawn_detached,
    terminate_process_groups,
)

RECORD_NAME = "gateway.json"
START_TIMEOUT_SECONDS = 15.0
STOP_GRACE_SECONDS = 3.0


def record_path() -> Path:
    return gateway_dir() / RECORD_NAME


def read_record() -> dict[str, Any] | None:
    try:
        record = json.loads(record_path().read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def healthy(record: dict[str, Any], timeout: float = 2.0) -> bool:
    """The recorded process is alive *and* answers ``/health`` as itself."""
    if not process_matches(record.get("pid"), record.get("start_token")):
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

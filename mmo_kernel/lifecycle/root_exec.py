"""``run_root_exec``: a non-interactive root run, from session creation to an outcome (spec 03).

The caller creates the session, starts the root host (a detached process
that outlives the caller) and watches the session record. It returns at a
terminal state, at detach (wall limit, pending operator input, or completion
deferred while workers run) or at suspension; pauses and compactions in
between are not an end.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from mmo_kernel.hosts.evidence import write_partial
from mmo_kernel.plugin.manager import execution_host
from mmo_kernel.profiles.snapshots import snapshot_profile
from mmo_kernel.sessions.create import create_session
from mmo_kernel.sessions.records import (
    TERMINAL_SESSION_STATUSES,
    read_session_record,
    session_file,
    utc_now,
)
from mmo_kernel.sessions.state import transition, update_session
from mmo_kernel.state.files import atomic_write_text

POLL_SECONDS = 0.1
EXIT_OK, EXIT_FAILURE, EXIT_DETACHED = 0, 1, 124
WALL_EXPIRED = "external harness wall expired"
COMPLETION_DEFERRED = "root_completion_deferred"
SANDBOX_MODES = ("read-only", "workspace-write")

Progress = Callable[[dict[str, Any]], None]


def _read_only_violation(session_id: str, agent: str) -> PermissionError:
    transition(session_id, "failed",
               error=f"root agent {agent} is permanently read-only; a write sandbox was requested")
    error = PermissionError(
        f"root agent {agent} is permanently read-only and can never run with a "
        "workspace-write sandbox")
    error.mmo_session_id = session_id  # type: ignore[attr-defined]
    error.mmo_session_status = "failed"  # type: ignore[attr-defined]
    return error


def start_root(session: dict[str, Any], prompt: str, images: Sequence[str | os.PathLike[str]],
               sandbox_mode: str | None, wall_timeout_seconds: float) -> dict[str, Any]:
    """Store the root's input and launch its host; returns the updated record."""
    sid = session["session_id"]
    profile = snapshot_profile(session["snapshot_hash"])
    spec = profile.agents[profile.root_agent]
    if sandbox_mode is not None and sandbox_mode not in SANDBOX_MODES:
        raise ValueError(f"sandbox_mode must be one of {', '.join(SANDBOX_MODES)}")
    if spec.permissions == "read-only" and sandbox_mode == "workspace-write":
        raise _read_only_violation(sid, profile.root_agent)
    image_paths = [str(Path(i).resolve()) for i in images]
    for image in image_paths:
        if not Path(image).is_file():
            raise ValueError(f"image {image} does not exist")
    atomic_write_text(session_file(sid, "root-prompt.txt"), prompt)
    update_session(sid, sandbox_mode=sandbox_mode or spec.permissions, root_images=image_paths,
                   wall_timeout_seconds=float(wall_timeout_seconds))
    host = execution_host(spec.host)
    pid, token = host.launch_root(sid, session_file(sid, "root-host.log"), dict(os.environ))
    fields: dict[str, Any] = {"root_pid": pid, "root_pgid": pid, "root_start_token": token}
    if not session.get("started_at"):
        fields["started_at"] = utc_now()
    return update_session(sid, **fields)


def _result_text(record: dict[str, Any]) -> str | None:
    path = record.get("result_path")
    if path and Path(path).is_file():
        return Path(path).read_text(encoding="utf-8")
    return None


def _outcome(record: dict[str, Any], started: float, root_status: str | None = None
             ) -> dict[str, Any]:
    status = record["status"]
    if status == "completed":
        code = EXIT_OK
    elif status == "detached":
        code = EXIT_DETACHED
    else:
        code = EXIT_FAILURE
    return {
        "status": status,
        "session": record,
        "exit_code": code,
        "elapsed_seconds": round(time.monotonic() - started, 3),
        "events_path": str(session_file(record["session_id"], "root-events.jsonl")),
        "result": _result_text(record),
        "pending_requests": record.get("pending_requests") or [],
        "root_status": root_status or status,
    }


def _detach_at_wall(session_id: str) -> dict[str, Any]:
    partial = session_file(session_id, "root-partial-result.md")
    write_partial(partial, session_file(session_id, "root-events.jsonl"), WALL_EXPIRED)
    return update_session(session_id, status="detached", partial_result_path=str(partial),
                          result_kind="partial", result_path=str(partial))


def _wait_host_gone(record: dict[str, Any], seconds: float = 10.0) -> None:
    """A finished host still retires its app-server; return once it has exited."""
    from mmo_kernel.state.processes import process_matches

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not process_matches(record.get("root_pid"), record.get("root_start_token")):
            return
        time.sleep(POLL_SECONDS / 2)


def wait_for_root(session_id: str, wall_timeout_seconds: float, started: float,
                  on_progress: Progress | None = None) -> dict[str, Any]:
    """Watch the record until the root ends, detaches or suspends, or the wall expires.

    A root whose completion is deferred for running workers is detached: the
    caller gets it at once, and the session completes when the workers finish.
    """
    from mmo_kernel.sessions.state import reconcile

    deadline = started + wall_timeout_seconds
    while True:
        record = reconcile(read_session_record(session_id))
        if on_progress is not None:
            on_progress(record)
        status = record["status"]
        if status == "cancelled" and not record.get("root_thread_id"):
            raise RuntimeError(f"session {session_id} was cancelled during bootstrap")
        if status in TERMINAL_SESSION_STATUSES or status == "suspended":
            _wait_host_gone(record)
            return _outcome(read_session_record(session_id), started)
        if status == "detached" and record.get("pending_requests"):
            return _outcome(record, started, "pending_operator_input")
        if status == "detached" and record.get("root_completion_deferred"):
            return _outcome(record, started, COMPLETION_DEFERRED)  # completes by itself later
        if time.monotonic() >= deadline:
            return _outcome(_detach_at_wall(session_id), started, "harness_wall_detached")
        time.sleep(POLL_SECONDS)


def run_root_exec(profile: Any, cwd: str | os.PathLike[str], prompt: str,
                  wall_timeout_seconds: float, images: Sequence[str | os.PathLike[str]] = (),
                  sandbox_mode: str | None = None, bindings: Mapping[str, str] | None = None,
                  route_faults: Mapping[str, str] | None = None,
                  on_progress: Progress | None = None) -> dict[str, Any]:
    """Create a non-interactive session, run its root and return the outcome."""
    if not isinstance(prompt, str) or not prompt.strip():
        raise ValueError("prompt must be a non-empty string")
    if not wall_timeout_seconds or wall_timeout_seconds <= 0:
        raise ValueError("wall_timeout_seconds must be positive")
    started = time.monotonic()
    session = create_session(profile, cwd=cwd, bindings=bindings, route_faults=route_faults,
                             check_writers_workspace=True)
    start_root(session, prompt, images, sandbox_mode, wall_timeout_seconds)
    return wait_for_root(session["session_id"], wall_timeout_seconds, started, on_progress)

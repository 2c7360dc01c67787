"""Interactive sessions: the Codex TUI attached to a session's root app-server (spec 03).

The root host runs the app-server in listen mode on a private unix socket
(``root_app_server_socket_path``); the TUI (``<codex> --remote unix://SOCK resume
THREAD``, or without ``resume`` before the thread's first turn: see ``tui_argv``)
runs as a child of the caller with the root's environment. The
host outlives the TUI: when it exits the session is ``detached``, and a
later resume re-attaches the same session, run, home, snapshot and thread.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mmo_kernel.hosts.codex_cli import thread_persisted
from mmo_kernel.hosts.root_socket import root_app_server_socket_path
from mmo_kernel.lifecycle.admission import admit_resume, seed_goal
from mmo_kernel.lifecycle.controls import detach_session, load_session
from mmo_kernel.sessions.create import create_session
from mmo_kernel.sessions.records import (
    TERMINAL_SESSION_STATUSES,
    read_session_record,
    session_dir,
    session_file,
)
from mmo_kernel.sessions.state import REMOVE, mark_session_running, relaunch_clears, update_session
from mmo_kernel.state.audit import append_audit
from mmo_kernel.state.files import lifecycle_lock
from mmo_kernel.state.processes import process_matches

BIND_TIMEOUT_SECONDS = 60.0
_POLL = 0.05


def _launch_host(record: dict[str, Any]) -> dict[str, Any]:
    """Start the root host (detached); it adopts a live app-server the record still names."""
    from mmo_kernel.gateway.process import revive_gateway
    from mmo_kernel.plugin.manager import execution_host
    from mmo_kernel.profiles.snapshots import snapshot_profile
    from mmo_kernel.sessions.records import utc_now

    sid = record["session_id"]
    spec = snapshot_profile(record["snapshot_hash"]).agents[record["root_agent"]]
    host = execution_host(spec.host)
    revive_gateway()  # a resume after the idle gateway exited: the agents' url must answer
    pid, token = host.launch_root(sid, session_file(sid, "root-host.log"), dict(os.environ))
    fields: dict[str, Any] = {"root_pid": pid, "root_pgid": pid, "root_start_token": token}
    if not record.get("started_at"):
        fields["started_at"] = utc_now()
    return update_session(sid, **fields)


def _wait_bound(session_id: str, timeout: float = BIND_TIMEOUT_SECONDS) -> dict[str, Any]:
    """Wait until the host has bound the root thread and serves its control socket."""
    deadline = time.monotonic() + timeout
    while True:
        record = read_session_record(session_id)
        alive = process_matches(record.get("root_pid"), record.get("root_start_token"))
        if record.get("root_thread_id") and record.get("root_control_socket_ready") and alive:
            return record
        if record["status"] in TERMINAL_SESSION_STATUSES or record["status"] == "cancelling":
            raise RuntimeError(f"session {session_id} became {record['status']} before its "
                               "root thread was bound")
        if not alive:
            error = record.get("error") or "the root host exited"
            raise RuntimeError(f"root host of session {session_id} did not bind the root "
                               f"thread: {error}")
        if time.monotonic() >= deadline:
            raise TimeoutError(f"root host of session {session_id} did not bind the root "
                               f"thread within {timeout:g} s")
        time.sleep(_POLL)


def tui_argv(record: dict[str, Any]) -> list[str]:
    """``<codex> --remote unix://SOCK resume THREAD``: the TUI on the host's app-server.

    Codex saves a thread only with its first turn and cannot resume one it never
    saved, so before the first turn the TUI starts the thread itself
    (``<codex> --remote unix://SOCK``) and the root host adopts it.
    """
    endpoint = f"unix://{root_app_server_socket_path(record['session_id'])}"
    argv = [record["codex_binary"], "--remote", endpoint]
    thread = record.get("root_thread_id")
    home = Path(record["homes"][record["root_agent"]]["home"])  # the root's CODEX_HOME
    if thread and thread_persisted(home, thread):
        argv += ["resume", thread]
    return argv


def _run_tui(record: dict[str, Any]) -> int:
    """Run the TUI in the foreground; the session is detached whatever happens."""
    from mmo_kernel.sessions.env import root_environment

    sid = record["session_id"]
    try:
        env = root_environment(record)
        proc = subprocess.Popen(tui_argv(record), cwd=record["cwd"], env=env)  # noqa: S603
        try:
            return proc.wait()
        except KeyboardInterrupt:  # the TUI got the same SIGINT; let it finish
            return proc.wait()
    finally:
        _release(sid)


def _release(session_id: str) -> None:
    """Detach the client; a session that ended meanwhile keeps its terminal status."""
    try:
        detach_session(session_id)
    except RuntimeError:
        if read_session_record(session_id)["status"] not in TERMINAL_SESSION_STATUSES:
            raise


def launch_interactive(profile: Any, cwd: str | os.PathLike[str] | None = None,
                       bindings: Mapping[str, str] | None = None) -> int:
    """Create an interactive session, bind its root thread and run the TUI on it.

    Returns the TUI's exit code; the session is left ``detached`` with its host.
    """
    record = create_session(profile, cwd=cwd, bindings=bindings, session_kind="interactive",
                            check_writers_workspace=True)
    sid = record["session_id"]
    with lifecycle_lock(session_dir(sid)):
        seed_goal(record)
        _launch_host(read_session_record(sid))
        _wait_bound(sid)
        record = mark_session_running(sid, os.getpid())
    return _run_tui(record)


def _relaunch(record: dict[str, Any]) -> dict[str, Any]:
    """A new host on the same thread; the app-server's identity is kept only while it lives."""
    sid = record["session_id"]
    update_session(sid, cold_pause_pending=REMOVE, root_continue_input=REMOVE,
                   **relaunch_clears(record))
    _launch_host(read_session_record(sid))
    return _wait_bound(sid)


def begin_resume_run(session_id: str, allow_tainted: bool = False) -> dict[str, Any]:
    """Admit a resume and attach the caller as the client: the record, now ``running``.

    Re-validates the homes, relaunches the host when it is gone and records
    ``run_resumed``; ``detach_session`` releases the client again.
    """
    with lifecycle_lock(session_dir(session_id)):
        record = load_session(session_id)
        record = admit_resume(record, allow_tainted)
        relaunched = not process_matches(record.get("root_pid"), record.get("root_start_token"))
        if relaunched:
            record = _relaunch(record)
        update_session(session_id, failure=REMOVE, resume_error=REMOVE, error=REMOVE)
        record = mark_session_running(session_id, os.getpid())
        append_audit(session_file(session_id, "audit.jsonl"), "run_resumed",
                     record["current_run_id"], allow_tainted=bool(allow_tainted),
                     tainted=bool(record.get("tainted")), host_relaunched=relaunched,
                     root_thread_id=record["root_thread_id"])
        return record


ATTACHABLE_RUN_STATUSES = ("suspended", "detached")
"""A non-interactive root the TUI may join: its controller died or its caller let go."""


def resume_interactive(session_id: str, allow_tainted: bool = False) -> int:
    """Re-attach the TUI to the same session, run, home, snapshot and thread.

    A non-interactive root that is suspended (its controller died) or detached (its
    wall limit expired) is joined too: the TUI attaches to its live app-server and
    thread, and a host that is gone is relaunched on them (it adopts the app-server).
    """
    record = load_session(session_id)
    if (record.get("session_kind") != "interactive"
            and record["status"] not in ATTACHABLE_RUN_STATUSES):
        raise RuntimeError(f"session {session_id} is a non-interactive session in status "
                           f"{record['status']}; the TUI can join one only when it is "
                           "suspended or detached")
    return _run_tui(begin_resume_run(session_id, allow_tainted=allow_tainted))


from mmo_kernel.sessions.resolve import resolve_resume_session  # noqa: E402  (re-exported)

__all__ = ["begin_resume_run", "launch_interactive", "resolve_resume_session",
           "resume_interactive", "tui_argv"]

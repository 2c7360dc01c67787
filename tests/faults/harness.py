"""One kill trial: a real ``mmo run --offline`` on the stand-in, held at a phase, one SIGKILL.

The root (job-lab's ``lead``) delegates through the real ``mmo_mesh`` server
with ``FAKE_MCP_CALL`` lines: it spawns one ``writer`` whose turn holds on a
gate file (``FAKE_HOLD_UNTIL``) and writes ``out/greeting.txt`` in its
worktree, waits, reads, accepts and integrates the patch. A phase is reached
by waiting on records and event logs while something holds the work still:

- the root app-server's ``initialize`` (``FAKE_CODEX_APP_SERVER_INITIALIZE_DELAY``),
- the state dir's runtime lock (every record write waits on it),
- the worker's gate file,
- the job's ``control.lock`` (integration takes it first).

Nothing here fakes MMO: every process is the real one, every hold is a
lock or a file the real code already waits on (or the stand-in's marker).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
from support.waiting import wait_until

from mmo_kernel.jobs.records import read_job_record
from mmo_kernel.sessions.records import (
    CREATING_MARKER,
    TERMINAL_SESSION_STATUSES,
    read_session_record,
    session_file,
)
from mmo_kernel.state.audit import read_jsonl
from mmo_kernel.state.processes import process_matches

PROJECT_ROOT = Path(__file__).resolve().parents[2]
JOB_LAB = PROJECT_ROOT / "tests" / "fixtures" / "profiles" / "job-lab"
MMO = Path(sys.executable).parent / "mmo"
WAIT_SECONDS = 20
"""``agents_wait`` timeout in the root's script: a wait that reaches it missed a change."""
GREETING = "hello from the writer"
OUT_FILE = "out/greeting.txt"
INIT_DELAY_SECONDS = "2"
"""How long the root app-server's ``initialize`` takes in the root-starting phase."""
PHASE_TIMEOUT = 60.0
SETTLE_TIMEOUT = 120.0
CONTINUE_INPUT = f"Carry on with the file.\nFAKE_WRITE {OUT_FILE}::{GREETING}"
CONTINUABLE = ("suspended", "paused", "detached")


# ------------------------------------------------------------- scripts --


def mesh(tool: str, arguments: dict[str, Any]) -> str:
    """One ``FAKE_MCP_CALL`` line. Markers meant for the worker travel JSON-escaped
    (``FAKE\\u005f...``) so the root's own turn never acts on them."""
    return f"FAKE_MCP_CALL mmo_mesh.{tool} " + json.dumps(arguments).replace("FAKE_", "FAKE\\u005f")


def worker_task(gate: Path) -> str:
    return f"Write the greeting file.\nFAKE_HOLD_UNTIL={gate}\nFAKE_WRITE {OUT_FILE}::{GREETING}"


def root_prompt(script: str, gate: Path) -> str:
    """``plain``: spawn, wait, read, accept, integrate. ``recovering`` adds what a root does
    about a suspended worker: status, ``agent_continue`` on the same thread, wait again
    (both refused harmlessly when the job already finished). ``deferred``: spawn only,
    so the root's completion waits for the worker (spec 03)."""
    job = "{{1.job_id}}"
    spawn = mesh("agent_spawn", {"agent": "writer", "mode": "workspace-write",
                                 "write_scopes": ["out"], "task": worker_task(gate)})
    wait = mesh("agents_wait", {"job_ids": [job], "timeout_seconds": WAIT_SECONDS})
    steps = ["Delegate the greeting file to a writer, then integrate its patch.", spawn]
    if script == "deferred":
        return "\n".join(steps)
    steps.append(wait)
    if script == "recovering":
        steps += [mesh("agent_status", {"job_ids": [job]}),
                  mesh("agent_continue", {"job_id": job,
                                          "expected_revision": "{{3.jobs.0.control_revision}}",
                                          "input": CONTINUE_INPUT}),
                  wait]
    steps += [mesh("agent_result", {"job_id": job}),
              mesh("agent_result_accept", {"job_id": job, "reason": "the file is right"}),
              mesh("agent_patch_integrate", {"job_id": job, "reason": "accepted"})]
    return "\n".join(steps)


# -------------------------------------------------------------- events --


def answered(rows: list[dict[str, Any]], method: str) -> list[dict[str, Any]]:
    """``[{"params", "result"|"error"}]`` for each ``method`` request answered in ``rows``.

    Request ids restart with every client, so a request is paired with the first
    response carrying its id after it.
    """
    open_requests: dict[Any, dict[str, Any]] = {}
    pairs = []
    for row in rows:
        message = row.get("message") or {}
        if row.get("direction") == "sent" and "method" in message and "id" in message:
            open_requests[message["id"]] = message
        elif row.get("direction") == "received" and "method" not in message:
            request = open_requests.pop(message.get("id"), None)
            if request is not None and request["method"] == method:
                pairs.append({"params": request.get("params") or {},
                              **{k: message[k] for k in ("result", "error") if k in message}})
    return pairs


def mcp_items(rows: list[dict[str, Any]], tool: str, stage: str = "completed"
              ) -> list[dict[str, Any]]:
    """The root's ``mcpToolCall`` items for ``mmo_mesh.<tool>`` (``item/started|completed``)."""
    found = []
    for row in rows:
        message = row.get("message") or {}
        item = (message.get("params") or {}).get("item") or {}
        if (row.get("direction") == "received" and message.get("method") == f"item/{stage}"
                and item.get("type") == "mcpToolCall" and item.get("tool") == tool):
            found.append(item)
    return found


def received(rows: list[dict[str, Any]], method: str) -> list[dict[str, Any]]:
    return [r["message"].get("params") or {} for r in rows
            if r.get("direction") == "received" and r["message"].get("method") == method]


# --------------------------------------------------------------- holds --


@contextmanager
def held_file_lock(path: Path) -> Iterator[None]:
    """Hold the ``flock`` MMO's own filelock takes on ``path``."""
    from filelock import UnixFileLock

    lock = UnixFileLock(str(path), timeout=30, mode=0o600, is_singleton=False)
    lock.acquire()
    try:
        yield
    finally:
        lock.release()


class Hold:
    """Locks a phase holds until the kill has happened; ``release`` drops those still held."""

    def __init__(self) -> None:
        self._held: list[Any] = []

    def enter(self, manager: Any) -> Callable[[], None]:
        """Enter ``manager`` now; returns a function that leaves it early."""
        manager.__enter__()
        self._held.append(manager)

        def leave() -> None:
            if manager in self._held:
                self._held.remove(manager)
                manager.__exit__(None, None, None)

        return leave

    def release(self) -> None:
        while self._held:
            self._held.pop().__exit__(None, None, None)


# --------------------------------------------------------------- trial --


@dataclass
class Victim:
    """What was killed: the process and the group the signal went to."""

    name: str
    pid: int
    pgid: int
    cmdline: str


@dataclass
class Trial:
    """One session under test: its ``mmo run``, its records and what the test did to it."""

    state_dir: Path
    workspace: Path
    tmp: Path
    script: str
    run: subprocess.Popen[bytes] | None = None
    sid: str = ""
    continued: list[subprocess.CompletedProcess[str]] = field(default_factory=list)
    statuses: list[str] = field(default_factory=list)
    """Session statuses seen by the settle loops, in order (first one after the kill)."""
    settled: list[str] = field(default_factory=list)
    """The status each settle loop ended at."""
    controls: list[subprocess.CompletedProcess[str]] = field(default_factory=list)
    unpublished_host: psutil.Process | None = None

    @property
    def gate(self) -> Path:
        return self.tmp / "worker-gate"

    @property
    def prompt(self) -> str:
        return root_prompt(self.script, self.gate)

    # -- running -----------------------------------------------------------

    def start(self, **extra_env: str) -> None:
        """``mmo run`` as the user would, leading its own process group."""
        env = {**os.environ, **extra_env}
        argv = [str(MMO), "run", str(JOB_LAB), self.prompt, "--cwd", str(self.workspace),
                "--offline", "--wall", "600", "--json"]
        with open(self.tmp / "mmo-run.out", "wb") as out, \
                open(self.tmp / "mmo-run.err", "wb") as err:
            self.run = subprocess.Popen(argv, env=env, stdout=out, stderr=err,
                                        stdin=subprocess.DEVNULL, start_new_session=True)
        self.sid = wait_until(self._session_id, PHASE_TIMEOUT, "the session to be created")

    def _session_id(self) -> str | None:
        root = self.state_dir / "sessions"
        if not root.is_dir():
            return None
        for entry in root.iterdir():
            if (not entry.name.startswith(".") and (entry / "session.json").is_file()
                    and not (entry / CREATING_MARKER).exists()):
                return entry.name
        return None

    def open_gate(self) -> None:
        self.gate.touch()

    def session(self) -> dict[str, Any]:
        return read_session_record(self.sid)

    def root_events(self) -> list[dict[str, Any]]:
        return read_jsonl(session_file(self.sid, "root-events.jsonl"))

    def job_ids(self) -> list[str]:
        jobs = self.state_dir / "jobs"
        if not jobs.is_dir():
            return []
        return sorted(d.name for d in jobs.iterdir() if (d / "metadata.json").is_file())

    def job(self) -> dict[str, Any] | None:
        ids = self.job_ids()
        return read_job_record(ids[0]) if ids else None

    def loaded_job(self) -> dict[str, Any] | None:
        """The job as any MMO read sees it: reconciled with what really exists."""
        from mmo_kernel.jobs.listing import load_job

        ids = self.job_ids()
        return load_job(ids[0]) if ids else None

    def job_events(self) -> list[dict[str, Any]]:
        job = self.job()
        return read_jsonl(self.state_dir / "jobs" / job["job_id"] / "events.jsonl") if job else []

    def root_rollout_turns(self) -> list[dict[str, Any]]:
        from faults.evidence import rollout_turns

        thread = self.session().get("root_thread_id")
        return rollout_turns(self.state_dir, thread) if thread else []

    # -- killing -----------------------------------------------------------

    def victim(self, component: str) -> Victim:
        """The live process (and its group) that ``component`` names right now."""
        session, job = self.session(), self.job()
        if component == "mmo_run":
            assert self.run is not None
            return _victim(component, psutil.Process(self.run.pid))
        if component == "mmo_mcp":
            return _victim(component, self._mesh_server())
        if component == "root_host" and self.unpublished_host is not None:
            return _victim(component, self.unpublished_host)
        keys = {"root_host": (session, "root_pid", "root_start_token"),
                "root_app_server": (session, "root_app_server_pid",
                                    "root_app_server_start_token"),
                "job_host": (job, "runner_pid", "runner_start_token"),
                "job_app_server": (job, "app_server_pid", "app_server_start_token")}
        record, pid_key, token_key = keys[component]
        assert record is not None, f"no record names the {component}"
        pid, token = record.get(pid_key), record.get(token_key)
        assert process_matches(pid, token), f"the recorded {component} ({pid}) is not alive"
        return _victim(component, psutil.Process(pid))

    def _mesh_server(self) -> psutil.Process:
        """The root's ``mmo mcp``: the child its app-server started for ``mmo_mesh``."""
        app = self.session().get("root_app_server_pid")
        assert isinstance(app, int), "the root app-server is not recorded"
        for child in psutil.Process(app).children(recursive=True):
            try:
                argv = child.cmdline()
                if argv[-1:] == ["mcp"] and any(part.endswith("/mmo") for part in argv):
                    return child
            except psutil.Error:
                continue
        raise AssertionError("the root app-server runs no mmo mcp process")

    def kill(self, component: str) -> Victim:
        """SIGKILL the component's whole process group; returns once it is dead."""
        victim = self.victim(component)
        os.killpg(victim.pgid, signal.SIGKILL)
        if component == "mmo_run":
            assert self.run is not None
            self.run.wait(timeout=30)
        wait_until(lambda: not _alive(victim.pid), 30, f"the killed {component} to die")
        return victim

    # -- after the kill ------------------------------------------------------

    def settle(self, timeout: float = SETTLE_TIMEOUT) -> dict[str, Any]:
        """Wait until the session is terminal, or continuable with no live root host.

        Reads go through ``load_session`` — what every MMO read does — so a session
        whose host died must be reconciled by it (spec 03, issue 13 item 4).
        """
        from mmo_kernel.lifecycle.controls import load_session
        from mmo_kernel.sessions.state import host_alive

        def settled() -> dict[str, Any] | None:
            record = load_session(self.sid)
            if not self.statuses or self.statuses[-1] != record["status"]:
                self.statuses.append(record["status"])
            if record["status"] in TERMINAL_SESSION_STATUSES:
                return record
            if record["status"] in CONTINUABLE and not host_alive(record):
                return record
            return None

        record = wait_until(settled, timeout,
                            f"session {self.sid} to end or become continuable "
                            f"(statuses seen: {self.statuses})", poll=0.1)
        self.settled.append(record["status"])
        return record

    def control(self, action: str, *options: str) -> subprocess.CompletedProcess[str]:
        """``mmo <action> SESSION`` (continue, stop, cancel) from the command line."""
        done = subprocess.run([str(MMO), action, self.sid, *options, "--json"],
                              capture_output=True, text=True, timeout=120,
                              stdin=subprocess.DEVNULL)
        (self.continued if action == "continue" else self.controls).append(done)
        return done

    def continue_session(self) -> subprocess.CompletedProcess[str]:
        return self.control("continue")

    def wait_rebound(self, mark: int) -> None:
        """After a continue: the new root host resumed the thread and looked at its turn."""
        def rebound() -> bool:
            rows = self.root_events()[mark:]
            return bool(answered(rows, "thread/resume")) and bool(
                answered(rows, "thread/read") or answered(rows, "turn/start"))

        wait_until(rebound, PHASE_TIMEOUT, "the continued root host to resume its thread",
                   poll=0.1)

    def wait_root_turn_done(self) -> None:
        """The root's turn went on without a host: wait until the thread holds it terminal."""
        wait_until(lambda: (self.root_rollout_turns() or [{}])[-1].get("status")
                   in ("completed", "failed"), PHASE_TIMEOUT, "the root's turn to end")

    def finish_run(self) -> int | None:
        """Reap ``mmo run`` (it returns at a terminal state, suspension or detach)."""
        if self.run is None:
            return None
        try:
            return self.run.wait(timeout=SETTLE_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(self.run.pid, signal.SIGKILL)
            self.run.wait(timeout=30)
            raise AssertionError("mmo run did not return") from None

    def cleanup(self) -> None:
        """Whatever happened, leave nothing running: open the gate, cancel, reap."""
        from mmo_kernel.lifecycle.controls import cancel_session

        self.open_gate()
        if self.sid:
            try:
                if self.session()["status"] not in TERMINAL_SESSION_STATUSES:
                    cancel_session(self.sid)
            except Exception:  # noqa: BLE001 - best effort; the process guard reports the rest
                pass
        if self.run is not None and self.run.poll() is None:
            try:
                self.run.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.run.pid, signal.SIGKILL)
                self.run.wait(timeout=30)


def _victim(name: str, proc: psutil.Process) -> Victim:
    return Victim(name, proc.pid, os.getpgid(proc.pid), " ".join(proc.cmdline())[:200])


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


# -------------------------------------------------------------- phases --
# Each takes the trial and the Hold it registers its locks on (released by the caller
# after the kill, or on failure).


def root_starting(trial: Trial, hold: Hold) -> None:
    """The host is up and recorded, its app-server spawned and still in ``initialize``
    (the trial starts ``mmo run`` with ``FAKE_CODEX_APP_SERVER_INITIALIZE_DELAY``):
    no root thread exists yet."""
    def reached() -> bool:
        s = trial.session()
        return (bool(s.get("root_host_package_version"))
                and process_matches(s.get("root_app_server_pid"),
                                    s.get("root_app_server_start_token"))
                and not s.get("root_thread_id"))

    wait_until(reached, PHASE_TIMEOUT, "the root app-server to be initializing", poll=0.02)


def root_starting_unpublished(trial: Trial, hold: Hold) -> None:
    """The host process exists but has not published itself: the session is still
    ``starting``. Holding the runtime lock from the moment ``mmo run`` launches it keeps
    the host from writing anything (and ``mmo run`` from recording its pid)."""
    wait_until(lambda: trial.session().get("sandbox_mode"), PHASE_TIMEOUT,
               "mmo run to launch the root host", poll=0.01)
    hold.enter(held_file_lock(trial.state_dir / "runtime.lock"))
    record = trial.session()
    assert record["status"] == "starting" and not record.get("root_host_package_version"), (
        f"phase missed: the root host published before the hold ({record['status']})")

    def host() -> psutil.Process | None:
        for proc in psutil.process_iter():
            try:
                if "mmo_app_server.root_host" in proc.cmdline() and trial.sid in proc.cmdline():
                    return proc
            except psutil.Error:
                continue
        return None

    trial.unpublished_host = wait_until(host, PHASE_TIMEOUT, "the root host process")


def worker_running(trial: Trial, hold: Hold) -> None:
    """The writer's turn has started and holds on its gate; the root waits in
    ``agents_wait`` through its ``mmo mcp``."""
    def reached() -> bool:
        job = trial.job()
        if not (job and job.get("active_turn_id") and job.get("control_socket_ready")):
            return False
        started = [p["turn"]["id"] for p in received(trial.job_events(), "turn/started")]
        return (job["active_turn_id"] in started
                and bool(mcp_items(trial.root_events(), "agents_wait", "started")))

    wait_until(reached, PHASE_TIMEOUT, "the worker's turn to run", poll=0.1)
    trial._mesh_server()  # the mesh server is there too


def worker_running_deferred(trial: Trial, hold: Hold) -> None:
    """The worker runs and the root's turn has ended: the session is ``detached`` with its
    completion deferred until the worker finishes (spec 03)."""
    wait_until(lambda: trial.session().get("root_completion_deferred"), PHASE_TIMEOUT,
               "the root's completion to be deferred")
    job = trial.job()
    assert job is not None and job["status"] == "running", job


def worker_finishing(trial: Trial, hold: Hold) -> None:
    """The writer's turn is terminal and persisted (the app-server sent ``turn/completed``)
    but its host has not recorded it: the runtime lock holds the host's next write."""
    worker_running(trial, hold)
    hold.enter(held_file_lock(trial.state_dir / "runtime.lock"))
    turn = trial.job()["active_turn_id"]
    trial.open_gate()
    wait_until(lambda: any(p["turn"]["id"] == turn and p["turn"]["status"] == "completed"
                           for p in received(trial.job_events(), "turn/completed")),
               PHASE_TIMEOUT, "the worker's turn to complete")


def _integrate_waiting(trial: Trial, hold: Hold) -> Callable[[], None]:
    """Hold the job's control lock — ``integrate_patch`` takes it before it changes
    anything, no earlier step of the plain script takes it — and let the root call
    ``agent_patch_integrate``. (filelock polls a busy lock, so the waiting call leaves
    no trace in ``/proc/locks``; until the lock is released nothing can be applied.)"""
    job_dir = wait_until(lambda: (trial.job_ids() or [None])[0], PHASE_TIMEOUT, "the job")
    lock = trial.state_dir / "jobs" / job_dir / "control.lock"
    release = hold.enter(held_file_lock(lock))
    trial.open_gate()
    wait_until(lambda: mcp_items(trial.root_events(), "agent_patch_integrate", "started"),
               PHASE_TIMEOUT, "the root to call agent_patch_integrate")
    return release


def integration(trial: Trial, hold: Hold) -> None:
    """The root's ``agent_patch_integrate`` is in flight; the job's control lock keeps
    ``integrate_patch`` from applying anything yet."""
    _integrate_waiting(trial, hold)


def integration_applied(trial: Trial, hold: Hold) -> None:
    """Mid-transaction: the patch is applied to the user's workspace and ``integrated`` is
    not persisted yet (the runtime lock holds that record write)."""
    release_control = _integrate_waiting(trial, hold)
    hold.enter(held_file_lock(trial.state_dir / "runtime.lock"))
    release_control()
    wait_until(lambda: (trial.workspace / OUT_FILE).is_file(), PHASE_TIMEOUT,
               "the patch to be applied")


PHASES: dict[str, Callable[[Trial, Hold], None]] = {
    "root_starting": root_starting,
    "root_starting_unpublished": root_starting_unpublished,
    "worker_running": worker_running,
    "worker_running_deferred": worker_running_deferred,
    "worker_finishing": worker_finishing,
    "integration": integration,
    "integration_applied": integration_applied,
}

"""Process jobs on the runner (spec 12 "Process execution").

``run_script`` / ``run_process`` start a **process job** ``mmo_pjob_<hex>``: one child in
its own process group (the job *is* that group: when the leader exits, what it left
behind in the group is killed), cwd in the project, the runner's environment minus MMO
secrets, stdout/stderr on pipes that a pump thread each copies, redacted, into log files
in the job dir (``process_logs.LogPump``: no credential value in a log, and a chatty
child never blocks). ``stdout_bytes`` / ``stderr_bytes`` count the bytes the child
wrote. The manager, not the link, owns the jobs: they keep running while the link is
down and are re-announced through ``live_job_ids``.

Job records live under ``<runner state>/process-jobs/<job_id>/job.json`` so a
restarted runner still answers for them: a job that was running under a previous
runner process is ``lost`` (its process group is killed if it survived the crash, as
nobody could observe it any more). Logs are kept 24 h, or the last 200 jobs of a
session.
"""

from __future__ import annotations

import hashlib
import logging
import os
import queue
import re
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from mmo_kernel.project_tools.catalog import (
    ObserveJobsArgs,
    RunProcessArgs,
    RunScriptArgs,
    WaitForJobReadinessArgs,
    WriteJobInputArgs,
    validate_arguments,
)
from mmo_kernel.project_tools.envelope import ToolFailure, suggested
from mmo_kernel.project_tools.paths import resolve_in_project
from mmo_kernel.runner import process_logs
from mmo_kernel.state import redaction
from mmo_kernel.state.files import atomic_write_json, atomic_write_text, read_json
from mmo_kernel.state.processes import process_matches, process_start_token

LOG = logging.getLogger("mmo.runner.jobs")

JOB_PREFIX = "mmo_pjob_"
JOBS_DIR = "process-jobs"
MAX_WAIT_SECS = 30.0
INPUT_LIMIT = 1024 * 1024
QUEUE_LIMIT = 4 * 1024 * 1024
RETENTION_SECS = 24 * 3600.0
KEEP_PER_SESSION = 200
STOP_GRACE_SECS = 10.0
WRITE_SETTLE_SECS = 0.25
"""How long ``write_job_input`` lets the writer thread try before answering ``pending``."""
_POLL = 0.05
TERMINAL = frozenset({"completed", "failed", "timeout", "cancelled", "lost"})
DROPPED_NAMES = ("MMO_CONFIG_DIR",)
DROPPED_PREFIXES = ("MMO_CALLER", "MMO_NATIVE_CALLER", "MMO_RUNNER")
LOST_ERROR = "the runner restarted while this job ran; its process is gone"

JobEvent = Callable[[dict[str, Any]], None]


def _homes() -> set[str]:
    """The runner user's home directory, as given and resolved (none if it is unknown)."""
    try:
        home = str(Path.home())
    except (RuntimeError, OSError):
        return set()
    return {home, os.path.realpath(home)}


def _now_ms() -> int:
    return int(time.time() * 1000)


# ---------------------------------------------------------------- environment --


def _known_secret_names() -> set[str]:
    """Credential names MMO knows beyond the name heuristic (never raising)."""
    names: set[str] = set()
    try:
        from mmo_kernel.config.credentials import credential_file_names

        names |= credential_file_names()
    except Exception:  # noqa: BLE001 - a broken credentials file must not stop a job
        pass
    try:
        from mmo_kernel.sessions.agent_env import catalog_credential_names

        names |= catalog_credential_names()
    except Exception:  # noqa: BLE001 - a broken catalog must not stop a job
        pass
    return names


def job_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The runner's environment minus MMO secrets (spec 12: process jobs never see the
    runner token): credential-like names (the kernel's agent rules), every credential
    MMO knows by name or value, ``MMO_CONFIG_DIR`` (``credentials.env`` and runner.toml
    live there), MMO's capability variables and any ``MMO_RUNNER*`` variable."""
    from mmo_kernel.sessions.agent_env import filtered_environment

    base = dict(os.environ if environ is None else environ)
    env = filtered_environment(base, _known_secret_names(), ())
    secret_values = redaction.known_secrets(base)
    return {name: value for name, value in env.items()
            if name not in DROPPED_NAMES and not name.startswith(DROPPED_PREFIXES)
            and value not in secret_values}


# ----------------------------------------------------------------------- jobs --


@dataclass
class _Input:
    digest: str
    receipt: dict[str, Any]
    close: bool = False
    settled: threading.Event = field(default_factory=threading.Event)


@dataclass
class Job:
    """One process job, in memory (``record()`` is what ``job.json`` holds)."""

    job_id: str
    session_id: str | None
    user: str
    project_id: str | None
    root: Path
    directory: Path
    kind: str
    interactive: bool
    purpose: str | None = None
    timeout_secs: float = 60.0
    status: str = "running"
    exit_code: int | None = None
    signal_name: str | None = None
    started_at_unix_ms: int = 0
    finished_at_unix_ms: int | None = None
    duration_ms: int | None = None
    stdin_closed: bool = True
    close_requested: bool = True
    pid: int | None = None
    start_token: str | None = None
    runner_instance: str = ""
    runner_pid: int | None = None
    runner_token: str | None = None
    script_name: str | None = None
    inputs: dict[str, _Input] = field(default_factory=dict)
    queued_bytes: int = 0
    popen: subprocess.Popen[bytes] | None = None
    stdin_queue: queue.Queue[Any] | None = None
    started_mono: float = 0.0
    exited: bool = False
    timed_out: bool = False
    cancelling: bool = False
    timer: threading.Timer | None = None
    pumps: dict[str, process_logs.LogPump] = field(default_factory=dict)
    written: dict[str, int] = field(default_factory=dict)
    """Bytes written per stream, as recorded by a runner that saw the job end."""
    done: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    @property
    def stdout_path(self) -> Path:
        return self.directory / "stdout.log"

    @property
    def stderr_path(self) -> Path:
        return self.directory / "stderr.log"

    def log_path(self, stream: str) -> Path:
        return self.stdout_path if stream == "stdout" else self.stderr_path

    def bytes_written(self, stream: str) -> int:
        """What the child wrote to ``stream`` ("stdout" / "stderr") so far: the pump's
        count, else the recorded one, else the log's size (a job of a crashed runner)."""
        pump = self.pumps.get(stream)
        if pump is not None:
            return pump.bytes_read
        if stream in self.written:
            return self.written[stream]
        return process_logs.log_size(self.log_path(stream))

    def scrub(self, text: str) -> str:
        """Process output without the runner's absolute paths (job dir, project root, and
        the runner user's home as ``~``: tracebacks name packages installed under it)."""
        pairs: list[tuple[Path | str, str]] = [*((h, "~") for h in _homes()),
                                               (self.directory, "<job>"), (self.root, "")]
        if self.script_name:
            pairs.insert(0, (self.directory / self.script_name, self.script_name))
        return process_logs.scrubber(pairs)(text)

    def record(self) -> dict[str, Any]:
        return {
            "schema_version": 1, "job_id": self.job_id, "session_id": self.session_id,
            "user": self.user, "project_id": self.project_id, "project_root": str(self.root),
            "kind": self.kind, "interactive": self.interactive, "purpose": self.purpose,
            "timeout_secs": self.timeout_secs, "status": self.status,
            "exit_code": self.exit_code, "signal": self.signal_name,
            "started_at_unix_ms": self.started_at_unix_ms,
            "finished_at_unix_ms": self.finished_at_unix_ms, "duration_ms": self.duration_ms,
            "stdin_closed": self.stdin_closed, "close_requested": self.close_requested,
            "pid": self.pid, "start_token": self.start_token,
            "runner_instance": self.runner_instance, "runner_pid": self.runner_pid,
            "runner_token": self.runner_token, "script_name": self.script_name,
            "stdout_bytes": self.bytes_written("stdout"),
            "stderr_bytes": self.bytes_written("stderr"),
            "inputs": {key: {"digest": value.digest, "close": value.close,
                             "receipt": value.receipt}
                       for key, value in self.inputs.items()},
        }

    @classmethod
    def from_record(cls, data: dict[str, Any], directory: Path) -> Job:
        job = cls(job_id=str(data["job_id"]), session_id=data.get("session_id"),
                  user=str(data.get("user") or ""), project_id=data.get("project_id"),
                  root=Path(str(data.get("project_root") or "/nonexistent")),
                  directory=directory, kind=str(data.get("kind") or "process"),
                  interactive=bool(data.get("interactive")), purpose=data.get("purpose"),
                  timeout_secs=float(data.get("timeout_secs") or 0),
                  status=str(data.get("status") or "lost"), exit_code=data.get("exit_code"),
                  signal_name=data.get("signal"),
                  started_at_unix_ms=int(data.get("started_at_unix_ms") or 0),
                  finished_at_unix_ms=data.get("finished_at_unix_ms"),
                  duration_ms=data.get("duration_ms"),
                  stdin_closed=bool(data.get("stdin_closed", True)),
                  close_requested=bool(data.get("close_requested", True)),
                  pid=data.get("pid"), start_token=data.get("start_token"),
                  runner_instance=str(data.get("runner_instance") or ""),
                  runner_pid=data.get("runner_pid"), runner_token=data.get("runner_token"),
                  script_name=data.get("script_name"))
        for key, value in (data.get("inputs") or {}).items():
            entry = _Input(digest=str(value["digest"]), receipt=dict(value["receipt"]),
                           close=bool(value.get("close")))
            entry.settled.set()
            job.inputs[key] = entry
        if job.terminal:  # a running job's counts were still growing when saved
            job.written = {stream: int(data[f"{stream}_bytes"]) for stream in ("stdout", "stderr")
                           if isinstance(data.get(f"{stream}_bytes"), int)}
            job.done.set()
        return job


def _digest(data: bytes | None, close: bool) -> str:
    h = hashlib.sha256(b"close" if close else b"open")
    h.update(b"\0" if data is None else b"\1" + data)
    return h.hexdigest()


class ProcessJobs:
    """Every process job of one runner process.

    ``job_event(payload)`` is called on every status change with ``{"job_id",
    "status", "terminal", "exit_code", "session_id", "user", "project"}`` (the runner
    wraps it into a ``job_event`` frame); it must not block, and its errors are logged.
    """

    def __init__(self, state_dir: Path, policy: Any, job_event: JobEvent | None = None, *,
                 stop_grace_secs: float = STOP_GRACE_SECS,
                 retention_secs: float = RETENTION_SECS,
                 keep_per_session: int = KEEP_PER_SESSION) -> None:
        self.policy = policy
        self.root = Path(state_dir) / JOBS_DIR
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.job_event = job_event
        self.stop_grace_secs = stop_grace_secs
        self.retention_secs = retention_secs
        self.keep_per_session = keep_per_session
        self.instance = uuid.uuid4().hex
        self.runner_token = process_start_token(os.getpid())
        self._jobs: dict[str, Job] = {}
        self._starting = 0
        self._stopped = False
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._load()
        self._prune()

    # ------------------------------------------------------------- records --

    def _load(self) -> None:
        """Read every job record; a job left running by a previous runner is ``lost``."""
        for directory in sorted(self.root.glob(f"{JOB_PREFIX}*")):
            try:
                job = Job.from_record(read_json(directory / "job.json"), directory)
            except (OSError, ValueError, KeyError, TypeError) as exc:
                LOG.warning("skipping unreadable process job record %s: %s", directory.name, exc)
                continue
            if not job.terminal and self._other_runner_alive(job):
                LOG.warning("process job %s belongs to another live runner process using "
                            "this state dir; leaving it alone", job.job_id)
                continue
            self._adopt_record(job)

    def _adopt_record(self, job: Job) -> None:
        """Keep a job read from disk; one left running by a gone runner is ``lost``."""
        if not job.terminal:
            self._retire_orphan(job)
            job.status = "lost"
            job.stdin_closed = True
            job.finished_at_unix_ms = job.finished_at_unix_ms or _now_ms()
            job.done.set()
            self._save(job)
        self._jobs[job.job_id] = job

    def _adopt_late(self, job_id: str) -> Job | None:
        """A job skipped at start because another live runner on this state dir owned it
        (the runner this one replaced): once that runner is gone its record is ours, so
        observe_jobs reports the job asked for (``cancelled``, ``lost``...), never
        ``job_not_found``."""
        if not re.fullmatch(JOB_PREFIX + r"[0-9a-f]{1,64}", job_id):
            return None
        directory = self.root / job_id
        try:
            job = Job.from_record(read_json(directory / "job.json"), directory)
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if not job.terminal and self._other_runner_alive(job):
            return None
        self._adopt_record(job)
        return job

    @staticmethod
    def _other_runner_alive(job: Job) -> bool:
        """Two runner processes on one state dir must not retire each other's jobs."""
        return (job.runner_pid not in (None, os.getpid())
                and process_matches(job.runner_pid, job.runner_token))

    @staticmethod
    def _retire_orphan(job: Job) -> None:
        """Kill the group of a job that outlived its runner (only if it is still that
        very process: pid and start token match)."""
        if job.pid and process_matches(job.pid, job.start_token):
            try:
                os.killpg(job.pid, signal.SIGKILL)
            except OSError:
                pass

    def _save(self, job: Job) -> None:
        try:
            atomic_write_json(job.directory / "job.json", job.record())
        except Exception as exc:  # noqa: BLE001 - a full disk must not kill the waiter thread
            LOG.warning("cannot write process job record %s: %s", job.job_id, exc)

    def _prune(self) -> None:
        """Drop finished jobs older than the retention, and all but the newest
        ``keep_per_session`` jobs of each session (running jobs are never dropped)."""
        cutoff = _now_ms() - int(self.retention_secs * 1000)
        with self._lock:
            by_session: dict[str | None, list[Job]] = {}
            for job in self._jobs.values():
                by_session.setdefault(job.session_id, []).append(job)
            doomed = []
            for jobs in by_session.values():
                jobs.sort(key=lambda j: j.started_at_unix_ms, reverse=True)
                for rank, job in enumerate(jobs):
                    if not job.terminal:
                        continue
                    finished = job.finished_at_unix_ms or job.started_at_unix_ms
                    if rank >= self.keep_per_session or finished < cutoff:
                        doomed.append(job)
            for job in doomed:
                del self._jobs[job.job_id]
        for job in doomed:
            shutil.rmtree(job.directory, ignore_errors=True)

    def _emit(self, job: Job) -> None:
        if self.job_event is None:
            return
        payload = {"job_id": job.job_id, "status": job.status, "terminal": job.terminal,
                   "exit_code": job.exit_code, "session_id": job.session_id,
                   "user": job.user, "project": job.project_id}
        try:
            self.job_event(payload)
        except Exception:  # noqa: BLE001 - a broken link must not break the job
            LOG.exception("job_event callback failed for %s", job.job_id)

    # --------------------------------------------------------------- queries --

    def get(self, job_id: str) -> Job | None:
        with self._lock:
            return self._jobs.get(job_id) or self._adopt_late(job_id)

    def live_job_ids(self) -> list[str]:
        """Running jobs (for the link's ``hello``)."""
        with self._lock:
            return sorted(j.job_id for j in self._jobs.values() if not j.terminal)

    def running_jobs(self, session_id: str) -> list[str]:
        """The session's running jobs (``jobs_still_running``)."""
        with self._lock:
            return sorted(j.job_id for j in self._jobs.values()
                          if j.session_id == session_id and not j.terminal)

    def latest_validation(self, session_id: str) -> str:
        """``passed`` / ``failed`` for the session's most recently started validation
        run, ``not_run`` when there is none or it is still running."""
        with self._lock:
            runs = [j for j in self._jobs.values()
                    if j.session_id == session_id and j.purpose == "validation"]
        if not runs:
            return "not_run"
        latest = max(runs, key=lambda j: (j.started_at_unix_ms, j.started_mono))
        if not latest.terminal:
            return "not_run"
        return "passed" if latest.status == "completed" else "failed"

    # ----------------------------------------------------------------- start --

    def start(self, argv: list[str], *, cwd: Path, root: Path, session_id: str | None,
              user: str, project_id: str | None, kind: str, interactive: bool,
              stdin: bytes | None, timeout_secs: float, purpose: str | None = None,
              script: tuple[str, str] | None = None,
              env_extra: Mapping[str, str] | None = None) -> Job:
        """Start one job (``script`` = (file name, text) written to the job dir first and
        appended to ``argv``). Raises ``ToolFailure`` ``job_limit_reached`` at the limit."""
        limit = int(getattr(self.policy, "max_concurrent_jobs", 8) or 8)
        with self._lock:
            if self._stopped:
                raise ToolFailure("runner_unavailable", "the runner is shutting down")
            running = sum(1 for j in self._jobs.values() if not j.terminal) + self._starting
            if running >= limit:
                raise ToolFailure("job_limit_reached",
                                  f"the runner already runs {running} process jobs "
                                  f"(max_concurrent_jobs = {limit}); wait for one to finish")
            self._starting += 1
        try:
            job = self._spawn(argv, cwd=cwd, root=root, session_id=session_id, user=user,
                              project_id=project_id, kind=kind, interactive=interactive,
                              stdin=stdin, timeout_secs=timeout_secs, purpose=purpose,
                              script=script, env_extra=env_extra)
        finally:
            with self._lock:
                self._starting -= 1
        self._emit(job)
        self._prune()
        return job

    def _spawn(self, argv: list[str], *, cwd: Path, root: Path, session_id: str | None,
               user: str, project_id: str | None, kind: str, interactive: bool,
               stdin: bytes | None, timeout_secs: float, purpose: str | None,
               script: tuple[str, str] | None, env_extra: Mapping[str, str] | None) -> Job:
        job_id = JOB_PREFIX + secrets.token_hex(8)
        directory = self.root / job_id
        directory.mkdir(mode=0o700)
        job = Job(job_id=job_id, session_id=session_id, user=user, project_id=project_id,
                  root=root, directory=directory, kind=kind, interactive=interactive,
                  purpose=purpose, timeout_secs=timeout_secs,
                  started_at_unix_ms=_now_ms(), runner_instance=self.instance,
                  runner_pid=os.getpid(), runner_token=self.runner_token)
        if script is not None:
            job.script_name, text = script
            atomic_write_text(directory / job.script_name, text, mode=0o600, redact=False)
            argv = [*argv, str(directory / job.script_name)]
        piped = interactive or stdin is not None
        job.stdin_closed = job.close_requested = not piped
        env = {**job_environment(), **(env_extra or {})}
        out_read, out_write = process_logs.child_pipe()
        err_read, err_write = process_logs.child_pipe()
        try:
            job.started_mono = time.monotonic()
            job.popen = subprocess.Popen(
                argv, cwd=cwd, env=env,
                stdin=subprocess.PIPE if piped else subprocess.DEVNULL,
                stdout=out_write, stderr=err_write, start_new_session=True, close_fds=True)
        except OSError as exc:
            os.close(out_read)
            os.close(err_read)
            shutil.rmtree(directory, ignore_errors=True)
            kind_ = ("file_not_found" if isinstance(exc, FileNotFoundError) else
                     "permission_denied" if isinstance(exc, PermissionError)
                     else "invalid_arguments")
            raise ToolFailure(kind_, f"cannot start the process: {exc.strerror or exc}") from None
        finally:
            os.close(out_write)
            os.close(err_write)
        for stream, read_fd in (("stdout", out_read), ("stderr", err_read)):
            job.pumps[stream] = process_logs.LogPump(read_fd, job.log_path(stream),
                                                     name=f"{stream}-{job_id}")
        job.pid = job.popen.pid
        job.start_token = process_start_token(job.pid)
        with self._lock:
            self._jobs[job_id] = job
        self._save(job)
        if piped:
            assert job.popen.stdin is not None
            job.stdin_queue = queue.Queue()
            threading.Thread(target=self._writer, args=(job, job.popen.stdin),
                             name=f"stdin-{job_id}", daemon=True).start()
            if stdin is not None:
                job.queued_bytes = len(stdin)
                job.stdin_queue.put((None, stdin, not interactive))
                job.close_requested = not interactive
        job.timer = threading.Timer(timeout_secs, self._on_timeout, args=(job,))
        job.timer.daemon = True
        job.timer.start()
        threading.Thread(target=self._waiter, args=(job,), name=f"wait-{job_id}",
                         daemon=True).start()
        return job

    # ------------------------------------------------------------ lifetime --

    def _on_timeout(self, job: Job) -> None:
        with job.lock:
            if job.exited:
                return
            job.timed_out = True
            _kill_group(job.pid)

    def _waiter(self, job: Job) -> None:
        """Wait for the leader's exit without reaping it (so its pgid stays reserved),
        kill what it left in the group, then reap and finish the job."""
        assert job.popen is not None and job.pid is not None
        while True:
            try:
                os.waitid(os.P_PID, job.pid, os.WEXITED | os.WNOWAIT)
                break
            except ChildProcessError:
                break
            except InterruptedError:
                continue
        with job.lock:
            job.exited = True
            if job.timer is not None:
                job.timer.cancel()
            _kill_group(job.pid)
            code = job.popen.wait()
        for pump in job.pumps.values():  # the result must hold everything the job wrote
            pump.settle()
        self._finish(job, code)

    def _finish(self, job: Job, code: int) -> None:
        elapsed = time.monotonic() - job.started_mono
        with self._lock:
            if job.cancelling:
                job.status, job.exit_code = "cancelled", None
            elif job.timed_out:
                job.status, job.exit_code = "timeout", None
            elif code == 0:
                job.status, job.exit_code = "completed", 0
            elif code > 0:
                job.status, job.exit_code = "failed", code
            else:
                job.status, job.exit_code = "failed", None
                job.signal_name = _signal_name(-code)
            if job.cancelling and code < 0:
                job.signal_name = _signal_name(-code)
            job.duration_ms = int(elapsed * 1000)
            job.finished_at_unix_ms = _now_ms()
            job.stdin_closed = job.close_requested = True
            self._save(job)
            job.done.set()
            self._changed.notify_all()
        if job.stdin_queue is not None:
            job.stdin_queue.put(None)
        self._emit(job)

    def _writer(self, job: Job, stream: Any) -> None:
        """Feed queued input to the child's stdin; only this thread ever blocks on it."""
        assert job.stdin_queue is not None
        fd = stream.fileno()
        try:
            while True:
                item = job.stdin_queue.get()
                if item is None:
                    return
                input_id, data, close = item
                try:
                    view = memoryview(data or b"")
                    while view:
                        view = view[os.write(fd, view):]
                except OSError:
                    return
                with self._lock:
                    job.queued_bytes -= len(data or b"")
                    entry = job.inputs.get(input_id) if input_id else None
                    if close:
                        stream.close()
                        job.stdin_closed = True
                        if entry is not None:
                            entry.receipt.update(state="closed", stdin_closed=True)
                        self._save(job)
                    elif entry is not None:
                        entry.receipt["state"] = "written"
                    if entry is not None:
                        entry.settled.set()
                    self._changed.notify_all()
                if close:
                    return
        finally:
            try:
                stream.close()
            except OSError:
                pass

    def stop_all(self, grace_secs: float | None = None) -> None:
        """Runner shutdown: SIGTERM every job's group, SIGKILL after the grace; the jobs
        end ``cancelled``. Returns once every job's record is final."""
        grace = self.stop_grace_secs if grace_secs is None else grace_secs
        with self._lock:
            self._stopped = True
            live = [j for j in self._jobs.values() if not j.terminal and j.popen is not None]
        for job in live:
            with job.lock:
                if job.exited:
                    continue
                job.cancelling = True
                _signal_group(job.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for job in live:
            job.done.wait(max(deadline - time.monotonic(), 0))
        for job in live:
            with job.lock:
                if not job.exited:
                    _kill_group(job.pid)
        for job in live:
            job.done.wait(10)

    # ----------------------------------------------------------------- input --

    def write_input(self, job: Job, input_id: str, data: bytes | None,
                    close: bool) -> dict[str, Any]:
        """One ``write_job_input`` receipt (see the module of the spec for the rules)."""
        digest = _digest(data, close)
        with self._lock:
            known = job.inputs.get(input_id)
            if known is not None:
                if known.digest != digest:
                    raise ToolFailure("job_input_conflict",
                                      f"input_id {input_id} was already used with another "
                                      "payload; use a new input_id")
                return {**known.receipt, "state_changed": False}  # a replay
            closed = f"stdin of job {job.job_id} is closed"
            if any(entry.close for entry in job.inputs.values()):
                raise ToolFailure("job_stdin_closed", closed + " (an earlier input closed it)")
            if job.terminal:
                raise ToolFailure("job_not_running",
                                  f"job {job.job_id} is {job.status}; it takes no input")
            if job.close_requested or job.stdin_queue is None:
                raise ToolFailure("job_stdin_closed", closed)
            if data is None and not close:
                raise ToolFailure("invalid_arguments",
                                  "write_job_input needs data or close = true")
            size = len(data or b"")
            if size > INPUT_LIMIT:
                raise ToolFailure("invalid_arguments", "data exceeds 1 MiB per input")
            if job.queued_bytes + size > QUEUE_LIMIT:
                raise ToolFailure("job_limit_reached",
                                  f"job {job.job_id} already has {job.queued_bytes} bytes of "
                                  "stdin queued (4 MiB at most); wait for it to read",
                                  reason="stdin_queue_full")
            entry = _Input(digest=digest, close=close, receipt={
                "job_id": job.job_id, "input_id": input_id, "state": "pending",
                "stdin_closed": False, "bytes_accepted": size})
            job.inputs[input_id] = entry
            job.queued_bytes += size
            if close:
                job.close_requested = True
            job.stdin_queue.put((input_id, data, close))
            self._save(job)
        entry.settled.wait(WRITE_SETTLE_SECS)
        with self._lock:
            return {**entry.receipt, "state_changed": True}

    # ----------------------------------------------------------- observation --

    def observation(self, job: Job, tail_lines: int) -> dict[str, Any]:
        """One ``observe_jobs`` item."""
        with self._lock:
            item: dict[str, Any] = {
                "job_id": job.job_id, "status": job.status, "terminal": job.terminal,
                "exit_code": job.exit_code, "interactive": job.interactive,
                "stdin_closed": job.stdin_closed or job.terminal,
            }
        item["stdout_tail"] = job.scrub(process_logs.tail_lines(job.stdout_path, tail_lines))
        item["stderr_tail"] = job.scrub(process_logs.tail_lines(job.stderr_path, tail_lines))
        item["stdout_bytes"] = job.bytes_written("stdout")
        item["stderr_bytes"] = job.bytes_written("stderr")
        if job.signal_name:
            item["signal"] = job.signal_name
        if job.status == "lost":
            item["error"] = LOST_ERROR
        item["observation_token"] = self.token(job)
        return item

    def token(self, job: Job) -> str:
        """Changes exactly when something ``observe_jobs`` reports changes."""
        state = (job.status, job.exit_code, job.stdin_closed,
                 job.bytes_written("stdout"), job.bytes_written("stderr"),
                 process_logs.log_size(job.stdout_path), process_logs.log_size(job.stderr_path))
        return "obs_" + hashlib.sha256(repr(state).encode()).hexdigest()[:20]

    def wait_changed(self, watched: list[tuple[Job, str]], wait_secs: float) -> None:
        """Until one watched job's token differs from the one given, every watched job is
        terminal and unchanged (nothing more can happen), or ``wait_secs`` pass."""
        deadline = time.monotonic() + min(wait_secs, MAX_WAIT_SECS)
        while watched:
            if any(self.token(job) != token for job, token in watched):
                return
            if all(job.terminal for job, _ in watched):
                return
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            with self._changed:
                self._changed.wait(min(remaining, _POLL))

    def wait_ready(self, jobs: list[Job], mode: str, wait_secs: float) -> bool:
        """Wait for all / any of ``jobs`` to be terminal; True when that happened."""
        deadline = time.monotonic() + min(wait_secs, MAX_WAIT_SECS)

        def ready() -> bool:
            done = [j.terminal for j in jobs]
            return all(done) if mode == "all" else any(done)

        with self._changed:
            while not ready():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._changed.wait(remaining)
            return True


def _signal_group(pgid: int | None, sig: signal.Signals) -> None:
    if not pgid or pgid <= 1 or pgid == os.getpgrp():
        return
    try:
        os.killpg(pgid, sig)
    except OSError:
        pass


def _kill_group(pgid: int | None) -> None:
    _signal_group(pgid, signal.SIGKILL)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


# ------------------------------------------------------------------ executors --


def _jobs(ctx: Any) -> ProcessJobs:
    jobs = getattr(ctx, "jobs", None)
    if not isinstance(jobs, ProcessJobs):
        raise ToolFailure("runner_unavailable", "this runner has no process-job manager")
    return jobs


def _project(ctx: Any) -> Any:
    project = getattr(ctx, "project", None)
    if project is None:
        raise ToolFailure("project_not_found", "no such project on this runner")
    return project


def _python(policy: Any) -> str:
    return str(getattr(policy, "python", None) or sys.executable)


def _shell() -> str:
    return shutil.which("bash") or "/bin/sh"


def _script_env(root: Path, name: str) -> dict[str, str]:
    """A python script runs as if it sat in the project root: the root leads
    ``PYTHONPATH`` so ``import calc`` finds the project's ``calc.py``."""
    if not name.endswith(".py"):
        return {}
    rest = job_environment().get("PYTHONPATH")
    return {"PYTHONPATH": str(root) + (os.pathsep + rest if rest else "")}


def _resolve_cwd(root: Path, rel: str | None) -> Path:
    if rel is None:
        return root
    path = resolve_in_project(root, rel, must_exist=True, regular=False)
    if not path.is_dir():
        raise ToolFailure("not_a_regular_file", f"cwd {rel} is not a directory")
    return path


def _executable(name: str, policy: Any, root: Path, cwd: str | None) -> str:
    """The absolute executable ``run_process`` may start, or ``policy_denied``: an
    absolute path, a name looked up on ``PATH``, or a path relative to ``cwd`` inside the
    project (under the path rules); then it must be listed unless raw shell is on."""
    raw_shell = bool(getattr(policy, "allow_raw_shell", False))
    if os.path.isabs(name):
        path = os.path.normpath(name)
    elif "/" in name:
        rel = f"{cwd}/{name}" if cwd else name
        path = os.path.normpath(resolve_in_project(root, rel, must_exist=True, regular=True))
    else:
        found = shutil.which(name, path=job_environment().get("PATH", os.defpath))
        if found is None:
            raise ToolFailure("file_not_found", f"executable not found on PATH: {name}")
        path = os.path.normpath(found)
    if raw_shell:
        return path
    allowed = {os.path.normpath(str(p)) for p in getattr(policy, "allowed_executables", ())}
    if path not in allowed:
        raise ToolFailure("policy_denied",
                          "executable is not in the runner's allowed_executables and "
                          "allow_raw_shell is off", reason="executable_not_allowed")
    return path


def _pending(job: Job) -> dict[str, Any]:
    return {
        "execution_state": "pending", "job_id": job.job_id, "interactive": job.interactive,
        "status": "running", "state_changed": True,
        "suggested_call": suggested(
            "wait_for_job_readiness",
            {"job_ids": [job.job_id], "mode": "all", "wait_secs": MAX_WAIT_SECS}, True,
            "the job is still running; wait for it, then observe_jobs for its output"),
    }


def _finished(job: Job) -> dict[str, Any]:
    """The inline result of a finished job; a failure unless it exited 0."""
    out = process_logs.head_and_tail(job.stdout_path)
    err = process_logs.head_and_tail(job.stderr_path)
    output: dict[str, Any] = {
        "execution_state": "completed", "job_id": job.job_id, "status": job.status,
        "exit_code": job.exit_code,
        "stdout": redaction.redact_text(job.scrub(out.text)),
        "stderr": redaction.redact_text(job.scrub(err.text)),
        "stdout_bytes": job.bytes_written("stdout"), "stderr_bytes": job.bytes_written("stderr"),
        "stdout_truncated": out.truncated, "stderr_truncated": err.truncated,
        "duration_ms": job.duration_ms,
    }
    if job.signal_name:
        output["signal"] = job.signal_name
    if job.status == "completed":
        return {**output, "state_changed": True}
    if job.status == "timeout":
        raise ToolFailure("timeout", f"the process timed out after {job.timeout_secs:g} s; "
                          "its process group was killed", state_changed=True, **output)
    if job.exit_code is not None:
        message = f"the process exited with code {job.exit_code}"
    else:
        message = f"the process ended by {job.signal_name or 'a signal'} ({job.status})"
    raise ToolFailure("nonzero_exit", message, state_changed=True, **output)


def _inline(job: Job, wait_secs: float) -> dict[str, Any]:
    if job.interactive:
        return _pending(job)
    job.done.wait(min(max(wait_secs, 0.0), MAX_WAIT_SECS))
    if not job.done.is_set():
        return _pending(job)
    return _finished(job)


def run_script(arguments: dict[str, Any], ctx: Any) -> dict[str, Any]:
    """Run a python (or, with ``allow_raw_shell``, shell) script as a process job."""
    args = cast(RunScriptArgs, validate_arguments("run_script", arguments))
    jobs = _jobs(ctx)
    project = _project(ctx)
    if args.language == "shell":
        if not bool(getattr(jobs.policy, "allow_raw_shell", False)):
            raise ToolFailure("policy_denied", "shell scripts need allow_raw_shell = true in "
                              "the runner's [policy]; use language = \"python\"",
                              reason="raw_shell_disabled")
        argv, name = [_shell()], "script.sh"
    else:
        argv, name = [_python(jobs.policy), "-u"], "script.py"
    job = jobs.start(argv, cwd=project.root, root=project.root, session_id=ctx.session_id,
                     user=ctx.user, project_id=project.id, kind="script", interactive=False,
                     stdin=None, timeout_secs=args.timeout_secs, purpose=args.purpose,
                     script=(name, args.script), env_extra=_script_env(project.root, name))
    return _inline(job, args.wait_secs)


def run_process(arguments: dict[str, Any], ctx: Any) -> dict[str, Any]:
    """Start an allowed executable (any, with ``allow_raw_shell``) as a process job."""
    args = cast(RunProcessArgs, validate_arguments("run_process", arguments))
    jobs = _jobs(ctx)
    project = _project(ctx)
    cwd = _resolve_cwd(project.root, args.cwd)
    executable = _executable(args.executable, jobs.policy, project.root, args.cwd)
    stdin = args.stdin.encode("utf-8") if args.stdin is not None else None
    job = jobs.start([executable, *args.args], cwd=cwd, root=project.root,
                     session_id=ctx.session_id, user=ctx.user, project_id=project.id,
                     kind="process", interactive=args.interactive, stdin=stdin,
                     timeout_secs=args.timeout_secs)
    return _inline(job, args.wait_secs)


def _known(jobs: ProcessJobs, job_ids: Iterable[str]) -> list[Job]:
    found = []
    for job_id in job_ids:
        job = jobs.get(job_id)
        if job is None:
            raise ToolFailure("job_not_found", f"no such process job: {job_id}")
        found.append(job)
    return found


def observe_jobs(arguments: dict[str, Any], ctx: Any) -> dict[str, Any]:
    """Status and log tails of exactly the jobs asked for; with tokens, wait for a change."""
    args = cast(ObserveJobsArgs, validate_arguments("observe_jobs", arguments))
    jobs = _jobs(ctx)
    watched = []
    for item in args.items:
        job = jobs.get(item.job_id)
        if job is not None and item.after_observation_token is not None:
            watched.append((job, item.after_observation_token))
    if watched and args.wait_secs > 0:
        jobs.wait_changed(watched, args.wait_secs)
    items = []
    for item in args.items:
        job = jobs.get(item.job_id)
        if job is None:
            items.append({"job_id": item.job_id, "error_kind": "job_not_found",
                          "error": f"no such process job: {item.job_id}"})
            continue
        items.append(jobs.observation(job, args.tail_lines))
    for entry in items:
        for key in ("stdout_tail", "stderr_tail"):
            if key in entry:
                entry[key] = redaction.redact_text(entry[key])
    return {"items": items}


def wait_for_job_readiness(arguments: dict[str, Any], ctx: Any) -> dict[str, Any]:
    """One join: wait until all (or any) of the jobs are terminal, up to ``wait_secs``."""
    args = cast(WaitForJobReadinessArgs, validate_arguments("wait_for_job_readiness", arguments))
    jobs = _jobs(ctx)
    wanted = _known(jobs, dict.fromkeys(args.job_ids))
    met = jobs.wait_ready(wanted, args.mode, args.wait_secs)
    return {"ready_job_ids": [j.job_id for j in wanted if j.terminal],
            "pending_job_ids": [j.job_id for j in wanted if not j.terminal],
            "timed_out": not met}


def write_job_input(arguments: dict[str, Any], ctx: Any) -> dict[str, Any]:
    """Queue input for an interactive job's stdin (never blocks on the child)."""
    args = cast(WriteJobInputArgs, validate_arguments("write_job_input", arguments))
    jobs = _jobs(ctx)
    job = jobs.get(args.job_id)
    project = getattr(ctx, "project", None)
    if job is None or (project is not None and job.project_id != project.id):
        raise ToolFailure("job_not_found", f"no such process job: {args.job_id}")
    data = args.data.encode("utf-8") if args.data is not None else None
    receipt = jobs.write_input(job, args.input_id, data, args.close)
    return receipt


EXECUTORS: dict[str, Callable[[dict[str, Any], Any], dict[str, Any]]] = {
    "run_script": run_script, "run_process": run_process, "observe_jobs": observe_jobs,
    "wait_for_job_readiness": wait_for_job_readiness, "write_job_input": write_job_input,
}

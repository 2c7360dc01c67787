"""Process identity and process-group lifetime (spec 03, "Process identity").

A process is identified by ``(pid, start token)``: pids are recycled, start
times are not, so MMO only ever signals a process whose recorded token still
matches. Hosts lead their own process group so retiring one kills every
child a tool left behind.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import IO

import psutil

from mmo_kernel.state.redaction import REDACTED_MAIN

Output = Path | int | IO[bytes] | None
"""Where a detached child's stdout/stderr go: a file path (appended, ``0600``),
a descriptor or file object, or ``None`` for ``/dev/null``."""

_POLL_SECONDS = 0.02
_KILL_WAIT_SECONDS = 2.0

_spawned: dict[int, subprocess.Popen[bytes]] = {}
_spawned_lock = threading.Lock()


_PROC = "/proc"
_FAST = sys.platform.startswith("linux") and os.path.exists(f"{_PROC}/self/stat")
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if _FAST else 100
_boot_seconds: int | None = None
"""The kernel's boot time as last read from ``/proc/stat`` (see ``_boot_time``)."""


def _token_of(proc: psutil.Process) -> str:
    return f"{proc.create_time():.6f}"


def _read_boot_time() -> int:
    fd = os.open(f"{_PROC}/stat", os.O_RDONLY | os.O_CLOEXEC)
    try:
        data = os.read(fd, 1 << 20)
    finally:
        os.close(fd)
    at = data.index(b"\nbtime ") + 7
    return int(data[at:data.index(b"\n", at)])


def _boot_time() -> int:
    """``btime`` of ``/proc/stat``, which psutil adds to a process's start ticks.

    The kernel prints the whole seconds of (wall clock - boot clock), so the value read
    last still holds while that difference, bracketed by reading the boot clock before
    and after the wall clock, lies within the same second; a wall clock step (or a
    kernel whose clocks do not add up) makes it be read again, as psutil reads it on
    every call. Why: reading ``/proc/stat`` costs more than the process's own stat.
    """
    global _boot_seconds
    before = time.clock_gettime_ns(time.CLOCK_BOOTTIME)
    wall = time.time_ns()
    after = time.clock_gettime_ns(time.CLOCK_BOOTTIME)
    kept = _boot_seconds
    if kept is not None and kept * 10**9 <= wall - after and wall - before < (kept + 1) * 10**9:
        return kept
    _boot_seconds = _read_boot_time()
    return _boot_seconds


def _proc_start_token(pid: int) -> str | None:
    """``process_start_token`` from one read of ``/proc/<pid>/stat``: the same token psutil
    computes (start ticks / clock ticks + boot time), ``None`` for a zombie or no process.

    Raises ``ValueError`` or ``OSError`` when the file is not what is expected, for the
    caller to ask psutil instead.
    """
    try:
        fd = os.open(f"{_PROC}/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None  # what psutil reports as NoSuchProcess / AccessDenied
    try:
        data = os.read(fd, 4096)
    except (FileNotFoundError, ProcessLookupError):
        return None  # exited between open and read
    finally:
        os.close(fd)
    fields = data[data.rindex(b")") + 2:].split()  # the name may hold spaces and ")"
    if fields[0] == b"Z":
        return None
    return f"{float(fields[19]) / _CLOCK_TICKS + float(_boot_time()):.6f}"


def _psutil_start_token(pid: int) -> str | None:
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        return _token_of(proc)
    except (psutil.NoSuchProcess, psutil.AccessDenied, ValueError):
        return None


def process_start_token(pid: int) -> str | None:
    """The start token of a live process, or ``None`` if there is none (or it is a zombie).

    On Linux one read of ``/proc/<pid>/stat`` (a viewer checks every live agent's host
    each second; psutil reads that file three times and ``/proc/stat`` twice); psutil
    answers anywhere else, and whenever that file is not what is expected.
    """
    if _FAST and type(pid) is int and pid > 0:
        try:
            return _proc_start_token(pid)
        except (OSError, ValueError, IndexError):
            pass
    return _psutil_start_token(pid)


def process_matches(pid: int | None, token: str | None) -> bool:
    """True when ``pid`` is alive, not a zombie and still the process ``token`` names."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0 or not token:
        return False
    return process_start_token(pid) == token


def process_alive(pid: int) -> bool:
    """True when ``pid`` exists and is not a zombie."""
    return process_start_token(pid) is not None


def _group_members(pgid: int) -> list[psutil.Process]:
    """Live (non-zombie) processes whose process group is ``pgid``."""
    members = []
    for proc in psutil.process_iter():
        try:
            if os.getpgid(proc.pid) != pgid or proc.status() == psutil.STATUS_ZOMBIE:
                continue
        except (ProcessLookupError, psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        members.append(proc)
    return members


def process_group_alive(pgid: int) -> bool:
    """True when any non-zombie process is still in group ``pgid``."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # the group exists but belongs to someone else; look closer
    return bool(_group_members(pgid))


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def _reap() -> None:
    """Collect exit statuses of children ``spawn_detached`` started.

    Only MMO's own children are reaped: a caller's ``Popen`` keeps its exit
    status. Zombies are never counted as alive, so reaping is hygiene only.
    """
    with _spawned_lock:
        for pid, popen in list(_spawned.items()):
            if popen.poll() is not None:
                del _spawned[pid]


def _wait_groups(pgids: list[int], seconds: float) -> list[int]:
    """Wait until every group is gone or ``seconds`` pass; return the survivors."""
    deadline = time.monotonic() + max(seconds, 0.0)
    while True:
        _reap()
        alive = [g for g in pgids if process_group_alive(g)]
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(_POLL_SECONDS)


def _check_pgids(pgids: Iterable[int]) -> list[int]:
    own = os.getpgrp()
    checked = []
    for pgid in pgids:
        if not isinstance(pgid, int) or isinstance(pgid, bool) or pgid <= 1:
            raise ValueError(f"process group id must be an int greater than 1, got {pgid!r}")
        if pgid == own:
            raise ValueError(f"refusing to terminate process group {pgid}: it is MMO's own group")
        checked.append(pgid)
    return sorted(set(checked))


def terminate_process_groups(pgids: Iterable[int], grace_seconds: float) -> list[int]:
    """Retire whole process groups: SIGTERM, wait ``grace_seconds``, SIGKILL survivors.

    Returns the groups that had live members. Raises ``RuntimeError``
    (``process groups did not terminate: [...]``) if any survive SIGKILL.
    """
    groups = _check_pgids(pgids)
    live = [g for g in groups if process_group_alive(g)]
    for pgid in live:
        _signal_group(pgid, signal.SIGTERM)
    survivors = _wait_groups(live, grace_seconds)
    for pgid in survivors:
        _signal_group(pgid, signal.SIGKILL)
    lingering = _wait_groups(survivors, _KILL_WAIT_SECONDS) if survivors else []
    if lingering:
        raise RuntimeError(f"process groups did not terminate: {lingering}")
    return live


def _open_output(target: Output) -> tuple[int | IO[bytes], bool]:
    """A value for Popen's stdout/stderr and whether we must close it."""
    if target is None:
        return subprocess.DEVNULL, False
    if isinstance(target, Path):
        fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        return fd, True
    return target, False


def process_running(proc: psutil.Process) -> bool:
    """Alive and not a zombie (``is_running`` also notices a recycled pid)."""
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def kill_processes(procs: Iterable[psutil.Process], wait_seconds: float = 2.0) -> None:
    """SIGKILL processes MMO found behind (a tool's escaped child, a test's leftover).

    A process that leads its own group takes its group with it (never the
    caller's own group); then wait until each is gone or the wait runs out.
    """
    procs = list(procs)
    own_group = os.getpgrp()
    for proc in procs:
        try:
            if not process_running(proc):
                continue
            pgid = os.getpgid(proc.pid)
            if pgid == proc.pid and pgid != own_group:
                os.killpg(pgid, signal.SIGKILL)
            else:
                proc.kill()
        except (ProcessLookupError, psutil.Error):
            continue
    deadline = time.monotonic() + wait_seconds
    while any(process_running(proc) for proc in procs) and time.monotonic() < deadline:
        time.sleep(0.02)


def spawn_detached(argv: list[str], *, cwd: Path | str, env: Mapping[str, str],
                   stdout: Output = None, stderr: Output = None) -> tuple[int, str]:
    """Start ``argv`` as the leader of a new session and process group (``pgid == pid``).

    stdin is ``/dev/null``; the child is not tied to the caller's terminal,
    so Ctrl-C in the caller does not reach it. Returns ``(pid, start_token)``.
    A Python module (``[sys.executable, "-m", module, ...]``) whose output goes
    to a log file runs with its standard streams redacted (same process, see
    ``mmo_kernel.state.redaction``), so its log never holds a credential value.
    """
    if not argv or not all(isinstance(a, str) for a in argv):
        raise ValueError("argv must be a non-empty list of strings")
    if isinstance(stdout, Path) or isinstance(stderr, Path):
        argv = _redacted_python(argv)
    out, close_out = _open_output(stdout)
    err, close_err = _open_output(stderr)
    try:
        popen = subprocess.Popen(  # noqa: S603 - argv comes from MMO, never a shell
            argv, cwd=cwd, env=dict(env), stdin=subprocess.DEVNULL,
            stdout=out, stderr=err, start_new_session=True, close_fds=True,
        )
    finally:
        for value, owned in ((out, close_out), (err, close_err)):
            if owned and isinstance(value, int):
                os.close(value)
    with _spawned_lock:
        _spawned[popen.pid] = popen
    return popen.pid, _token_of(psutil.Process(popen.pid))


def _redacted_python(argv: list[str]) -> list[str]:
    """``python -m M args`` -> ``python -m <redacting runner> M args``; other argv unchanged."""
    if len(argv) >= 3 and argv[0] == sys.executable and argv[1] == "-m" \
            and argv[2] != REDACTED_MAIN:
        return [argv[0], "-m", REDACTED_MAIN, *argv[2:]]
    return argv


def reap_spawned() -> None:
    """Collect exited children started by ``spawn_detached`` (no zombies left behind)."""
    _reap()

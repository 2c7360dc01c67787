"""The one-read liveness check (``/proc/<pid>/stat``) gives psutil's answer, token for token."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import psutil
from support.waiting import wait_until

from mmo_kernel.state import processes
from mmo_kernel.state.processes import process_matches, process_start_token


def _psutil_token(pid: int) -> str | None:
    """What the check answered before: psutil's process, its status and create time."""
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        return f"{proc.create_time():.6f}"
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


def test_every_process_on_the_machine_gets_psutils_token():
    pids = psutil.pids()
    answers = {pid: (process_start_token(pid), _psutil_token(pid)) for pid in pids}
    still_there = {pid: pair for pid, pair in answers.items() if psutil.pid_exists(pid)}
    assert len(still_there) > 1
    assert all(ours == theirs for ours, theirs in still_there.values()), \
        {pid: pair for pid, pair in still_there.items() if pair[0] != pair[1]}
    assert process_start_token(os.getpid()) == _psutil_token(os.getpid()) is not None


def test_a_zombie_is_not_alive_and_a_gone_process_matches_no_token():
    child = subprocess.Popen([sys.executable, "-c", "pass"])  # not waited for: a zombie
    try:
        wait_until(lambda: psutil.Process(child.pid).status() == psutil.STATUS_ZOMBIE,
                   timeout=30)
        assert process_start_token(child.pid) is None and _psutil_token(child.pid) is None
        assert not processes.process_alive(child.pid)
    finally:
        child.wait()
    assert process_start_token(child.pid) == _psutil_token(child.pid)  # gone (or reused)


def test_a_live_process_matches_its_token_and_a_reused_pid_does_not():
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        token = process_start_token(sleeper.pid)
        assert token is not None and token == _psutil_token(sleeper.pid)
        assert process_matches(sleeper.pid, token)
        # a pid taken by a later process has a later start time: the recorded token fails
        assert not process_matches(sleeper.pid, f"{float(token) - 0.01:.6f}")
        assert not process_matches(sleeper.pid, None) and not process_matches(True, token)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert not process_matches(sleeper.pid, token)


def test_the_boot_time_is_read_again_when_the_wall_clock_steps(monkeypatch):
    reads = []
    real = processes._read_boot_time

    def counted() -> int:
        reads.append(1)
        return real()

    monkeypatch.setattr(processes, "_read_boot_time", counted)
    monkeypatch.setattr(processes, "_boot_seconds", None)
    me = os.getpid()
    first = process_start_token(me)
    assert process_start_token(me) == first and len(reads) == 1  # kept while clocks agree
    # a real clock step would change the machine's clock for everyone: shift what we read
    stepped = time.time_ns() + 3 * 10**9
    monkeypatch.setattr(processes.time, "time_ns", lambda: stepped)
    assert process_start_token(me) == first  # /proc/stat still says the same boot time
    assert len(reads) == 2

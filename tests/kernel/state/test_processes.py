"""Process identity and whole-group retirement with real processes."""

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from mmo_kernel.state import processes
from mmo_kernel.state.processes import (
    process_alive,
    process_group_alive,
    process_matches,
    process_start_token,
    spawn_detached,
    terminate_process_groups,
)

SLEEP = [sys.executable, "-c", "import time; time.sleep(60)"]
IGNORE_TERM = [sys.executable, "-c",
               "import signal, sys, time\n"
               "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
               "print('ready', flush=True); time.sleep(60)"]
# Leaves a grandchild in the same process group, then exits: an orphan.
ORPHANER = [sys.executable, "-c",
            "import subprocess, sys\n"
            "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
            "print(child.pid, flush=True)"]


def wait_for(predicate, seconds=10.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


def zombie_child():
    proc = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    assert wait_for(lambda: psutil.Process(proc.pid).status() == psutil.STATUS_ZOMBIE)
    return proc


def test_start_token_is_the_formatted_create_time():
    me = os.getpid()
    token = process_start_token(me)
    assert token == f"{psutil.Process(me).create_time():.6f}"
    assert process_matches(me, token)
    assert process_alive(me)


def test_a_different_token_is_a_different_process():
    me = os.getpid()
    other = f"{float(process_start_token(me)) - 1:.6f}"
    assert not process_matches(me, other)
    assert not process_matches(me, None)
    assert not process_matches(None, process_start_token(me))
    assert not process_matches(True, process_start_token(me))


def test_a_finished_pid_has_no_token():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    token = process_start_token(proc.pid)
    proc.wait()
    assert process_start_token(proc.pid) is None
    assert not process_matches(proc.pid, token)
    assert not process_alive(proc.pid)


def test_a_zombie_never_matches_and_its_group_is_not_alive():
    proc = zombie_child()
    try:
        token = f"{psutil.Process(proc.pid).create_time():.6f}"
        assert not process_matches(proc.pid, token)
        assert not process_alive(proc.pid)
        assert process_start_token(proc.pid) is None
        assert not process_group_alive(proc.pid)
    finally:
        proc.wait()


def test_spawn_detached_leads_its_own_group_with_no_stdin(tmp_path):
    out = tmp_path / "out.log"
    script = ("import os, sys\n"
              "print(os.readlink('/proc/self/fd/0'), os.getcwd(), os.environ['PROBE'])\n"
              "print('to stderr', file=sys.stderr)\n"
              "import time; time.sleep(60)")
    pid, token = spawn_detached([sys.executable, "-c", script], cwd=tmp_path,
                                env={**os.environ, "PROBE": "hello"}, stdout=out, stderr=out)
    try:
        assert os.getpgid(pid) == pid
        assert os.getsid(pid) == pid
        assert process_matches(pid, token)
        assert wait_for(lambda: "to stderr" in out.read_text(encoding="utf-8"))
        assert out.read_text(encoding="utf-8").splitlines() == [
            f"/dev/null {tmp_path} hello", "to stderr"]
        assert oct(out.stat().st_mode & 0o777) == oct(0o600)
    finally:
        assert terminate_process_groups([pid], grace_seconds=5) == [pid]
    assert not process_alive(pid)


def test_spawn_detached_rejects_bad_argv(tmp_path):
    with pytest.raises(ValueError, match="argv must be a non-empty list"):
        spawn_detached([], cwd=tmp_path, env={})
    with pytest.raises(FileNotFoundError):
        spawn_detached([str(tmp_path / "no-such-program")], cwd=tmp_path, env={})


def test_terminating_a_group_kills_an_orphaned_grandchild(tmp_path):
    out = tmp_path / "orphaner.log"
    pid, _ = spawn_detached(ORPHANER, cwd=tmp_path, env=dict(os.environ), stdout=out)
    assert wait_for(lambda: out.read_text(encoding="utf-8").strip() != "")
    grandchild = int(out.read_text(encoding="utf-8"))
    assert wait_for(lambda: not process_alive(pid))
    assert os.getpgid(grandchild) == pid
    assert process_group_alive(pid)
    assert terminate_process_groups([pid], grace_seconds=5) == [pid]
    assert not process_alive(grandchild)
    assert not process_group_alive(pid)


def test_a_group_that_ignores_sigterm_is_killed_after_the_grace_period(tmp_path):
    proc = subprocess.Popen(IGNORE_TERM, stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        started = time.monotonic()
        terminate_process_groups([proc.pid], grace_seconds=0.4)
        assert time.monotonic() - started >= 0.4
        assert proc.wait(timeout=5) == -signal.SIGKILL
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()


def test_a_polite_group_ends_with_sigterm():
    proc = subprocess.Popen(SLEEP, start_new_session=True)
    terminate_process_groups([proc.pid], grace_seconds=5)
    assert proc.wait(timeout=5) == -signal.SIGTERM


def test_groups_that_are_already_gone_are_fine():
    proc = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    proc.wait()
    assert terminate_process_groups([proc.pid], grace_seconds=1) == []


@pytest.mark.parametrize("bad", [0, 1, -5, True, "12"])
def test_nonsense_group_ids_are_refused(bad):
    with pytest.raises(ValueError, match="process group id must be an int greater than 1"):
        terminate_process_groups([bad], grace_seconds=0)


def test_mmo_never_terminates_its_own_group():
    with pytest.raises(ValueError, match="MMO's own group"):
        terminate_process_groups([os.getpgrp()], grace_seconds=0)
    assert process_alive(os.getpid())


def test_a_group_surviving_sigkill_is_reported(monkeypatch):
    # SIGKILL cannot be resisted by a real process, so this fault is injected.
    proc = subprocess.Popen(IGNORE_TERM, stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    real_signal = processes._signal_group

    def drop_sigkill(pgid, sig):
        if sig != signal.SIGKILL:
            real_signal(pgid, sig)

    monkeypatch.setattr(processes, "_signal_group", drop_sigkill)
    monkeypatch.setattr(processes, "_KILL_WAIT_SECONDS", 0.2)
    try:
        assert proc.stdout.readline().strip() == "ready"
        expected = rf"process groups did not terminate: \[{proc.pid}\]"
        with pytest.raises(RuntimeError, match=expected):
            terminate_process_groups([proc.pid], grace_seconds=0.1)
        assert process_alive(proc.pid)
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()

"""runtime.lock and lifecycle.lock: real flocks, re-entrant in a thread, symlink-safe."""

import os
import queue
import stat
import subprocess
import sys
import threading

import pytest

from mmo_kernel.errors import StateError
from mmo_kernel.state.files import LockBusy, lifecycle_lock, runtime_lock

# A separate process probing the lock with a non-blocking flock on the exact file.
PROBE = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
try:
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
except BlockingIOError:
    sys.exit(3)
sys.exit(0)
"""


def probe(path):
    return subprocess.run([sys.executable, "-c", PROBE, str(path)], timeout=30).returncode


def session_dir(mmo_env, name="s1"):
    path = mmo_env.state_dir / "sessions" / name
    path.mkdir(parents=True)
    return path


def test_lifecycle_lock_is_created_on_first_use_and_excludes_other_processes(mmo_env):
    directory = session_dir(mmo_env)
    lock_path = directory / "lifecycle.lock"
    assert not lock_path.exists()
    with lifecycle_lock(directory) as held:
        assert held == lock_path and lock_path.is_file()
        assert probe(lock_path) == 3
    assert lock_path.is_file()
    assert stat.S_IMODE(lock_path.stat().st_mode) == 0o600
    assert probe(lock_path) == 0


def test_lifecycle_lock_is_reentrant_within_a_thread(mmo_env):
    directory = session_dir(mmo_env)
    with lifecycle_lock(directory), lifecycle_lock(directory):
        assert probe(directory / "lifecycle.lock") == 3
    assert probe(directory / "lifecycle.lock") == 0


def test_lifecycle_lock_makes_another_thread_wait(mmo_env):
    """The contender is refused while the holder holds (proven, not assumed after a sleep),
    then gets the lock once it is released, and only then."""
    directory = session_dir(mmo_env)
    order: list[str] = []
    first_try: queue.Queue[str] = queue.Queue()

    def contender():
        try:
            with lifecycle_lock(directory, timeout=0):  # a single try
                first_try.put("acquired while held")
                return
        except LockBusy:
            first_try.put("busy")
        with lifecycle_lock(directory, timeout=60):
            order.append("contender")

    with lifecycle_lock(directory):
        worker = threading.Thread(target=contender)
        worker.start()
        assert first_try.get(timeout=30) == "busy"
        order.append("holder")  # still held: the contender cannot be in its block yet
    worker.join(timeout=60)
    assert not worker.is_alive()
    assert order == ["holder", "contender"]


# The real lock in another process: HOLDER takes it, says so, and keeps it until told to
# release; just before releasing (still holding) it leaves a marker. CONTENDER tries once,
# says whether it was refused, then waits for the lock and says whether the marker was
# already there when it got it (it cannot be, unless the lock let it in early).
HOLDER = """
import sys
from pathlib import Path
from mmo_kernel.state.files import lifecycle_lock
directory, marker = Path(sys.argv[1]), Path(sys.argv[2])
with lifecycle_lock(directory):
    print("held", flush=True)
    sys.stdin.readline()
    marker.write_text("released")
"""
CONTENDER = """
import sys
from pathlib import Path
from mmo_kernel.state.files import LockBusy, lifecycle_lock
directory, marker = Path(sys.argv[1]), Path(sys.argv[2])
try:
    with lifecycle_lock(directory, timeout=0):
        print("acquired while held", flush=True)
        sys.exit(0)
except LockBusy:
    print("busy", flush=True)
with lifecycle_lock(directory, timeout=60):
    print("acquired after release" if marker.exists() else "acquired while held", flush=True)
"""


def _python(code, *args):
    return subprocess.Popen([sys.executable, "-c", code, *map(str, args)], text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=dict(os.environ))


def test_lifecycle_lock_makes_another_process_wait_until_it_is_released(mmo_env, tmp_path):
    directory = session_dir(mmo_env)
    marker = tmp_path / "released"
    holder = _python(HOLDER, directory, marker)
    contender = None
    try:
        assert holder.stdout.readline().strip() == "held"
        contender = _python(CONTENDER, directory, marker)
        assert contender.stdout.readline().strip() == "busy"
        holder.stdin.write("release\n")
        holder.stdin.flush()
        assert contender.stdout.readline().strip() == "acquired after release"
        assert holder.wait(timeout=60) == 0 and contender.wait(timeout=60) == 0
    finally:
        for proc in (holder, contender):
            if proc is not None:
                proc.kill()
                proc.wait()
                proc.stdin.close()
                proc.stdout.close()


def test_lifecycle_lock_times_out_with_a_clear_error(mmo_env):
    directory = session_dir(mmo_env)
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import fcntl, os, sys, time\n"
         "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)\n"
         "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(30)",
         str(directory / "lifecycle.lock")],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(StateError, match="lifecycle lock .* is held by another process"):
            with lifecycle_lock(directory, timeout=0.2):
                pass
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()


def test_symlinked_lifecycle_lock_is_refused_and_nothing_changes(mmo_env, tmp_path):
    directory = session_dir(mmo_env)
    target = tmp_path / "victim"
    (directory / "lifecycle.lock").symlink_to(target)
    with pytest.raises(RuntimeError, match="lifecycle lock cannot traverse symlink"):
        with lifecycle_lock(directory):
            pass
    assert not target.exists()
    assert (directory / "lifecycle.lock").is_symlink()


def test_symlinked_session_dir_is_refused(mmo_env, tmp_path):
    real = tmp_path / "real-session"
    real.mkdir()
    (mmo_env.state_dir / "sessions").mkdir()
    (mmo_env.state_dir / "sessions" / "s2").symlink_to(real)
    with pytest.raises(RuntimeError, match="lifecycle lock cannot traverse symlink .*s2"):
        with lifecycle_lock(mmo_env.state_dir / "sessions" / "s2"):
            pass
    assert list(real.iterdir()) == []


def test_lifecycle_lock_needs_an_existing_session_dir(mmo_env):
    with pytest.raises(FileNotFoundError, match="session directory"):
        with lifecycle_lock(mmo_env.state_dir / "sessions" / "missing"):
            pass
    assert not (mmo_env.state_dir / "sessions" / "missing").exists()


def test_runtime_lock_lives_in_the_state_dir_and_is_reentrant(mmo_env):
    with runtime_lock() as path:
        assert path == mmo_env.state_dir / "runtime.lock"
        with runtime_lock():
            assert probe(path) == 3
        assert probe(path) == 3
    assert probe(path) == 0


def test_runtime_lock_refuses_a_symlink(mmo_env, tmp_path):
    (mmo_env.state_dir / "runtime.lock").symlink_to(tmp_path / "victim")
    with pytest.raises(StateError, match="runtime lock cannot traverse symlink"):
        with runtime_lock():
            pass
    assert not (tmp_path / "victim").exists()

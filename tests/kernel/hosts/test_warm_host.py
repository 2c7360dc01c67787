"""The warm host forks hosts that are exactly what a fresh interpreter would have been.

A probe module (on ``PYTHONPATH``) stands in for a host: it writes what it sees (pid,
session, group, cwd, stdin, its environment) to a file named in its arguments, prints
a secret to its log, and waits for a release file.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import psutil
import pytest
from support.waiting import wait_until

from mmo_kernel.hosts import warm_host

PROBE = '''
import json, os, sys, time
from pathlib import Path

if __name__ == "__main__":
    out, release = Path(sys.argv[1]), Path(sys.argv[2])
    print("probe says", os.environ.get("PROBE_API_KEY", "-"), flush=True)
    seen = {"pid": os.getpid(), "sid": os.getsid(0), "pgid": os.getpgid(0),
            "cwd": os.getcwd(), "stdin": os.readlink("/proc/self/fd/0"),
            "env": dict(os.environ), "argv": sys.argv[1:]}
    out.write_text(json.dumps(seen))
    while not release.exists():
        time.sleep(0.02)
    sys.exit(int(os.environ.get("PROBE_EXIT", "0")))
'''


@pytest.fixture
def probe(mmo_env, tmp_path, monkeypatch):
    code = tmp_path / "code"
    code.mkdir()
    (code / "warm_probe.py").write_text(PROBE, encoding="utf-8")
    monkeypatch.setenv("PYTHONPATH", str(code))
    yield tmp_path
    warm_host.stop()


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, **extra}


def _start(tmp_path: Path, name: str, **extra: str) -> tuple[int, str, Path, Path, Path]:
    out, release, log = (tmp_path / f"{name}.json", tmp_path / f"{name}.release",
                         tmp_path / f"{name}.log")
    pid, token = warm_host.spawn_module("warm_probe", [str(out), str(release)],
                                        env=_env(**extra), log_path=log)
    wait_until(out.exists, what=f"{name} to report")
    return pid, token, out, release, log


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _warm_host_pid() -> int:
    pids = [p.pid for p in psutil.process_iter(["name"])
            if p.info["name"] == warm_host.SERVER_NAME and _same_state(p)]
    assert len(pids) == 1, pids
    return pids[0]


def _same_state(proc: psutil.Process) -> bool:
    try:
        return f"MMO_STATE_DIR={os.environ['MMO_STATE_DIR']}" in \
            Path(f"/proc/{proc.pid}/environ").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return False


def test_a_forked_host_leads_its_own_session_with_the_callers_environment(probe):
    pid, token, out, release, log = _start(probe, "one", PROBE_API_KEY="sk-probe-1234567890")
    seen = json.loads(out.read_text())
    assert seen["pid"] == pid == seen["sid"] == seen["pgid"]
    assert seen["cwd"] == "/" and seen["stdin"] == "/dev/null"
    assert seen["env"]["PROBE_API_KEY"] == "sk-probe-1234567890"
    assert seen["argv"] == [str(out), str(release)]
    assert token == f"{psutil.Process(pid).create_time():.6f}"
    server = _warm_host_pid()
    assert psutil.Process(pid).ppid() == server  # forked, not a fresh interpreter
    # it shows the command line a fresh interpreter would have had
    assert psutil.Process(pid).cmdline() == [sys.executable, "-m", "warm_probe", str(out),
                                             str(release)]
    # the warm host's own environment never holds what a caller passed
    assert b"sk-probe-1234567890" not in Path(f"/proc/{server}/environ").read_bytes()
    release.write_text("go")
    wait_until(lambda: _gone(pid), what="the probe to exit")
    assert "probe says" in log.read_text() and "sk-probe-1234567890" not in log.read_text()


def test_hosts_outlive_the_warm_host_and_each_other(probe):
    first, _, _, release1, _ = _start(probe, "first")
    second, _, _, release2, _ = _start(probe, "second")
    warm = _warm_host_pid()
    os.kill(warm, signal.SIGKILL)
    os.kill(first, signal.SIGKILL)
    wait_until(lambda: _gone(first) and _gone(warm), what="first and the warm host to die")
    assert psutil.Process(second).status() != psutil.STATUS_ZOMBIE
    # the next request starts a new warm host
    third, _, _, release3, _ = _start(probe, "third")
    assert psutil.Process(third).ppid() == _warm_host_pid()
    for release in (release1, release2, release3):
        release.write_text("go")
    for pid in (second, third):
        wait_until(lambda p=pid: _gone(p), what="the probes to exit")


def test_switched_off_every_host_is_a_fresh_interpreter(probe, monkeypatch):
    monkeypatch.setenv(warm_host.SWITCH_ENV, "0")
    pid, _, _, release, _ = _start(probe, "fresh")
    assert psutil.Process(pid).ppid() == os.getpid()
    assert not [p for p in psutil.process_iter(["name"])
                if p.info["name"] == warm_host.SERVER_NAME and _same_state(p)]
    release.write_text("go")
    psutil.Process(pid).wait(timeout=30)


def test_changed_code_retires_the_warm_host_and_the_host_starts_fresh(probe):
    pid, _, _, release, _ = _start(probe, "before")
    server = _warm_host_pid()
    module = probe / "code" / "warm_probe.py"
    module.write_text(PROBE + "\n# changed\n", encoding="utf-8")
    os.utime(module, ns=(1, 1))
    release.write_text("go")
    after, _, _, release2, _ = _start(probe, "after")
    assert psutil.Process(after).ppid() == os.getpid()  # not forked from older code
    wait_until(lambda: _gone(server), what="the stale warm host to exit")
    release2.write_text("go")
    psutil.Process(after).wait(timeout=30)
    wait_until(lambda: _gone(pid), what="the first probe")


def test_the_warm_host_exits_when_its_state_dir_is_gone(probe, mmo_env):
    pid, _, _, release, _ = _start(probe, "last")
    server = psutil.Process(_warm_host_pid())
    release.write_text("go")
    wait_until(lambda: _gone(pid), what="the probe to exit")
    import shutil

    shutil.rmtree(mmo_env.state_dir)
    server.wait(timeout=30)


def test_a_call_the_warm_host_ends_unanswered_starts_exactly_one_fresh_host(probe):
    """A warm host killed mid-call (here: a listener that hangs up at once) forked nothing,
    so the caller starts the host itself, once."""
    import socket
    import threading

    path = warm_host.socket_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(8)
    calls: list[int] = []

    def hang_up() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            calls.append(1)
            conn.close()

    threading.Thread(target=hang_up, daemon=True).start()
    try:
        pid, _, out, release, _ = _start(probe, "lone")
    finally:
        listener.close()
    assert calls  # it did ask the (dying) warm host first
    assert psutil.Process(pid).ppid() == os.getpid()
    running = [p for p in psutil.process_iter(["cmdline"])
               if str(out) in (p.info["cmdline"] or [])]
    assert [p.pid for p in running] == [pid]
    release.write_text("go")
    psutil.Process(pid).wait(timeout=30)

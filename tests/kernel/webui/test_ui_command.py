"""`mmo ui` as a command: loopback only, and one line naming the extra when it is missing."""

from __future__ import annotations

import os
import subprocess

from .harness import MMO

BLOCKER = '''
import sys

class _NoSSE:
    """Pretend the ui extra is not installed: sse_starlette cannot be imported."""

    def find_spec(self, name, path=None, target=None):
        if name == "sse_starlette" or name.startswith("sse_starlette."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, _NoSSE())
'''


def _mmo(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([MMO, *args], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL, env=env or dict(os.environ))


def test_without_the_extra_it_says_in_one_line_how_to_get_it(mmo_env, tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(BLOCKER)
    env = {**os.environ, "PYTHONPATH": str(site)}
    done = _mmo("ui", "--no-browser", "--port", "0", env=env)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "pip install 'mmo[ui]'" in done.stderr
    assert done.stdout == ""
    probe = subprocess.run([str(MMO).replace("/mmo", "/python"), "-c", "import sse_starlette"],
                           env=env, capture_output=True, text=True)
    assert probe.returncode != 0  # the blocker works: the extra really looked missing


def test_any_host_but_loopback_is_refused_in_one_line(mmo_env):
    for host in ("0.0.0.0", "192.168.1.10", "localhost", "::"):
        done = _mmo("ui", "--no-browser", "--host", host)
        assert done.returncode == 2, host
        assert done.stderr.count("\n") == 1 and "127.0.0.1" in done.stderr, done.stderr


def test_a_taken_port_is_one_clear_error(mmo_env):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = _mmo("ui", "--no-browser", "--port", str(port))
    assert done.returncode == 1
    assert done.stderr == f"mmo: error: port {port} on 127.0.0.1 is taken; pick another with " \
                          "--port N (0: any free port)\n"

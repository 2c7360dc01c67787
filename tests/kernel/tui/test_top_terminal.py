"""``mmo top`` on a real terminal (a pty): the live view starts, ``q`` quits, NO_COLOR
leaves only greys; without Textual it says in one line how to get it and exits 2,
while ``--once`` and ``--json`` keep working."""

from __future__ import annotations

import fcntl
import os
import re
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

MMO = str(Path(sys.executable).with_name("mmo"))
SGR = re.compile(rb"\x1b\[([0-9;]*)m")


def _colours(output: bytes) -> set[tuple[int, ...]]:
    """Every truecolour foreground and background the program set (``38;2;R;G;B``, ``48;2``)."""
    found = set()
    for params in SGR.findall(output):
        codes = params.split(b";")
        for i, code in enumerate(codes[:-4]):
            if code in (b"38", b"48") and codes[i + 1] == b"2":
                found.add(tuple(int(c) for c in codes[i + 2:i + 5]))
    return found
BLOCK_TEXTUAL = '''
import sys


class _NoTextual:
    """An environment without the ui extra: importing textual fails as if absent."""

    def find_spec(self, name, path=None, target=None):
        if name == "textual" or name.startswith("textual."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, _NoTextual())
'''


def _terminal(args: list[str], env: dict[str, str]) -> tuple[subprocess.Popen, int]:
    """``mmo ARGS`` with stdin, stdout and stderr on a new 80x24 pty; returns the master."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    proc = subprocess.Popen([MMO, *args], stdin=slave, stdout=slave, stderr=slave, env=env,
                            start_new_session=True)
    os.close(slave)
    return proc, master


def _read(master: int, until, timeout: float = 30) -> bytes:
    """What the program wrote, read until ``until(bytes)`` holds or it closed the pty."""
    data = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not until(data):
        ready, _, _ = select.select([master], [], [], 0.1)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the program ended and closed its side
                break
            if not chunk:
                break
            data += chunk
    return data


def _env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "TERM": "xterm-256color", "COLORTERM": "truecolor", **extra}
    env.pop("NO_COLOR", None)
    env.update(extra)
    return env


def _view(env: dict[str, str]) -> bytes:
    """Start the live view on a pty, wait for its table, quit with ``q``: its output."""
    proc, master = _terminal(["top", "--interval", "0.5"], env)
    try:
        shown = _read(master, lambda out: b"AGENT" in out and b"I integ" in out)
        assert b"AGENT" in shown, shown[-2000:]
        os.write(master, b"q")
        rest = _read(master, lambda out: False, timeout=15)
        assert proc.wait(timeout=30) == 0, (shown + rest)[-2000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    return shown + rest


def test_on_a_terminal_top_runs_the_live_view_and_no_color_leaves_only_greys():
    coloured = _colours(_view(_env()))
    assert any(len(set(c)) > 1 for c in coloured), coloured  # e.g. the borders' accent
    plain = _colours(_view(_env(NO_COLOR="1")))
    assert plain and all(len(set(c)) == 1 for c in plain), sorted(plain)


def test_without_textual_top_on_a_terminal_says_how_to_get_it_and_once_still_works(tmp_path):
    (tmp_path / "sitecustomize.py").write_text(BLOCK_TEXTUAL, encoding="utf-8")
    env = _env(PYTHONPATH=str(tmp_path))
    probe = subprocess.run([sys.executable, "-c", "import textual"], env=env,
                           capture_output=True, text=True)
    assert probe.returncode == 1 and "No module named 'textual'" in probe.stderr

    proc, master = _terminal(["top"], env)
    try:
        out = _read(master, lambda _: False, timeout=30)  # until it exits
        code = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    lines = out.decode().strip().splitlines()
    assert code == 2 and len(lines) == 1, out
    assert lines[0] == ("mmo top: the live terminal view needs the ui extra: pip install "
                        "'mmo[ui]' (mmo top --once works without it)")

    once = subprocess.run([MMO, "top", "--once"], env=env, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=60)
    assert once.returncode == 0 and once.stdout.startswith("mmo top"), once.stderr
    as_json = subprocess.run([MMO, "top", "--json"], env=env, capture_output=True, text=True,
                             stdin=subprocess.DEVNULL, timeout=60)
    assert as_json.returncode == 0 and '"sessions_total": 0' in as_json.stdout, as_json.stderr

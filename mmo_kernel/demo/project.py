"""The throw-away project `mmo demo` fixes: a stdlib-only package with an off-by-one bug.

`count_up(n)` should return ``1..n`` but stops at ``n - 1``; the project's
unittest suite fails until a worker's patch is integrated.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

BUGGY_LINE = "    return list(range(1, n))"
FIXED_LINE = "    return list(range(1, n + 1))"
MODULE = "calc/ranges.py"
FILES = {
    "README.md": "# calc\n\nA tiny demo project. Run the tests with `python -m unittest`.\n",
    "calc/__init__.py": '"""Small number helpers."""\n',
    MODULE: (
        '"""Number ranges."""\n\n\n'
        "def count_up(n):\n"
        '    """The whole numbers from 1 to n, both included."""\n'
        f"{BUGGY_LINE}\n"
    ),
    "tests/__init__.py": "",
    "tests/test_ranges.py": (
        "import unittest\n\n"
        "from calc.ranges import count_up\n\n\n"
        "class CountUpTest(unittest.TestCase):\n"
        "    def test_includes_n(self):\n"
        "        self.assertEqual(count_up(3), [1, 2, 3])\n\n"
        "    def test_zero_is_empty(self):\n"
        "        self.assertEqual(count_up(0), [])\n\n\n"
        'if __name__ == "__main__":\n'
        "    unittest.main()\n"
    ),
}
TEST_ARGV = ("-B", "-m", "unittest", "-q")  # -B: no __pycache__ in the diff
GIT_IDENTITY = ("-c", "user.name=MMO demo", "-c", "user.email=mmo-demo@localhost")


def test_command() -> str:
    """The project's test command as agents type it (plain `python3`, stdlib only)."""
    return "python3 " + " ".join(TEST_ARGV)


def fix_patch() -> str:
    """The writer's `apply_patch` text (Codex's own patch format)."""
    return "\n".join(["*** Begin Patch", f"*** Update File: {MODULE}", "@@",
                      f"-{BUGGY_LINE}", f"+{FIXED_LINE}", "*** End Patch"])


def create_project(folder: Path) -> Path:
    """Write the files and commit them on branch ``main``; returns the repository."""
    folder.mkdir(parents=True, exist_ok=True)
    for relative, text in FILES.items():
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1"}
    for argv in (("init", "-q", "-b", "main"), ("add", "-A"),
                 (*GIT_IDENTITY, "commit", "-q", "-m", "calc: count_up and its tests")):
        subprocess.run(["git", *argv], cwd=folder, env=env, check=True, capture_output=True)
    return folder


def run_tests(folder: Path) -> tuple[bool, str]:
    """Run the project's tests; ``(passed, last line of the unittest report)``."""
    done = subprocess.run([sys.executable, *TEST_ARGV], cwd=folder, capture_output=True,
                          text=True, timeout=60)
    lines = [line for line in (done.stderr + done.stdout).splitlines() if line.strip()]
    return done.returncode == 0, (lines[-1] if lines else f"exit code {done.returncode}")

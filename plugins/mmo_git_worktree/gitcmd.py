"""Running git for MMO: no prompts, no pager, no hooks, fixed identity, no index writes.

Every call reads from ``/dev/null``, cannot open an editor or pager, runs
no user hooks, never takes the optional index lock (``git status``/``diff``
would otherwise refresh the user's ``.git/index``), never spawns the
fsmonitor daemon or a background ``gc``, and treats pathspecs literally.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

IDENTITY_NAME = "MMO"
IDENTITY_EMAIL = "mmo@localhost"

_REDIRECTING_ENV = (
    "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_COMMON_DIR", "GIT_NAMESPACE", "GIT_PREFIX",
    "GIT_EXTERNAL_DIFF", "GIT_DIFF_OPTS",
)
_CONFIG = (
    f"user.name={IDENTITY_NAME}", f"user.email={IDENTITY_EMAIL}",
    "core.hooksPath=/dev/null", "core.autocrlf=false", "core.safecrlf=false",
    "core.quotePath=false", "core.fsmonitor=false", "core.pager=cat",
    "diff.noprefix=false", "diff.mnemonicPrefix=false", "diff.relative=false",
    "commit.gpgSign=false", "gc.auto=0", "maintenance.auto=false",
    "apply.whitespace=nowarn", "advice.detachedHead=false",
)
TIMEOUT_SECONDS = 600


class GitError(RuntimeError):
    """A git command failed; the message carries git's own explanation."""

    def __init__(self, args: tuple[str, ...], code: int, stderr: str) -> None:
        self.code = code
        self.stderr = stderr
        super().__init__(f"git {' '.join(args[:2])} failed (exit {code}): {stderr.strip()[:2000]}")


def git_env() -> dict[str, str]:
    """The caller's environment minus redirections, plus MMO's fixed settings."""
    env = {k: v for k, v in os.environ.items() if k not in _REDIRECTING_ENV}
    env.update({
        "GIT_TERMINAL_PROMPT": "0", "GIT_PAGER": "cat", "PAGER": "cat", "GIT_EDITOR": ":",
        "GIT_OPTIONAL_LOCKS": "0", "GIT_LITERAL_PATHSPECS": "1", "LC_ALL": "C",
        "GIT_AUTHOR_NAME": IDENTITY_NAME, "GIT_AUTHOR_EMAIL": IDENTITY_EMAIL,
        "GIT_COMMITTER_NAME": IDENTITY_NAME, "GIT_COMMITTER_EMAIL": IDENTITY_EMAIL,
    })
    return env


def run_git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[bytes]:
    """Run one git command in ``cwd``; raises ``GitError`` on failure when ``check``."""
    argv = ["git", "--no-pager"]
    for item in _CONFIG:
        argv += ["-c", item]
    proc = subprocess.run(
        argv + list(args), cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True,
        env=git_env(), timeout=TIMEOUT_SECONDS, check=False,
    )
    if check and proc.returncode != 0:
        raise GitError(args, proc.returncode, proc.stderr.decode("utf-8", "replace"))
    return proc


def git_out(cwd: Path, *args: str) -> str:
    """Stdout of a git command as stripped text."""
    return run_git(cwd, *args).stdout.decode("utf-8", "surrogateescape").strip()


def git_paths(cwd: Path, *args: str) -> list[str]:
    """NUL-separated path output (``-z``) as a list."""
    raw = run_git(cwd, *args).stdout.decode("utf-8", "surrogateescape")
    return [p for p in raw.split("\0") if p]

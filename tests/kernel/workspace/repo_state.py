"""Helpers for the workspace tests: run git as the user, snapshot trees and guarded repo state."""

from __future__ import annotations

import os
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

BINARY = bytes(range(256)) * 4


def git(repo: Path, *args: str) -> str:
    """Run git as a user would in their repo (test identity from the environment)."""
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True,
                          stdin=subprocess.DEVNULL, text=True).stdout


def tree_state(root: Path) -> dict[str, tuple[str, bytes, int]]:
    """Every file, symlink and directory under ``root`` except ``.git``: kind, bytes, mode."""
    state: dict[str, tuple[str, bytes, int]] = {}
    for current, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in dirs + files:
            path = Path(current) / name
            rel = path.relative_to(root).as_posix()
            info = path.lstat()
            if stat.S_ISLNK(info.st_mode):
                state[rel] = ("symlink", os.readlink(path).encode(), 0)
            elif stat.S_ISDIR(info.st_mode):
                state[rel] = ("dir", b"", stat.S_IMODE(info.st_mode))
            elif stat.S_ISREG(info.st_mode):
                state[rel] = ("file", path.read_bytes(), stat.S_IMODE(info.st_mode))
            else:
                state[rel] = ("special", b"", stat.S_IMODE(info.st_mode))
    return state


@dataclass
class UserRepo:
    path: Path

    def git(self, *args: str) -> str:
        return git(self.path, *args)

    def write(self, rel: str, data: bytes | str) -> Path:
        target = self.path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data.encode() if isinstance(data, str) else data)
        return target

    def guarded_state(self) -> dict[str, object]:
        """What no MMO operation may ever change in the user's repository."""
        dot_git = self.path / ".git"
        packed = dot_git / "packed-refs"
        return {
            "refs": self.git("for-each-ref", "--format=%(refname) %(objectname)"),
            "HEAD": (dot_git / "HEAD").read_bytes(),
            "index": (dot_git / "index").read_bytes(),
            "config": (dot_git / "config").read_bytes(),
            "packed-refs": packed.read_bytes() if packed.exists() else None,
            "stash": self.git("stash", "list"),
            "worktrees": self.git("worktree", "list", "--porcelain"),
        }

"""Fixtures for the workspace tests: a real user repository guarded against any git side effect.

``user_repo`` is a git repository in a realistic state (a stash entry, a
staged file, unstaged edits, a deletion and an untracked file). Its
teardown fails the test unless the user's refs (branches and stash),
``HEAD``, ``.git/index``, ``.git/config``, stash list and worktree list are
byte-identical to what they were before the test, which also proves every
test cleaned up its worktree and branch.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from kernel.workspace.repo_state import BINARY, UserRepo


@pytest.fixture(autouse=True)
def _no_leftover_processes(mmo_process_guard):
    yield


@pytest.fixture
def state_dir(mmo_env) -> Path:
    return mmo_env.state_dir


@pytest.fixture
def user_repo(mmo_git_workspace: Path, mmo_env) -> Iterator[UserRepo]:
    repo = UserRepo(mmo_git_workspace)
    repo.write("src/app.py", "print('app')\n")
    repo.write("src/data.bin", BINARY)
    repo.write("src/old.py", "old = True\n")
    repo.write("docs/guide.md", "# Guide\n")
    repo.write("notes.txt", "notes v1\n")
    os.symlink("app.py", repo.path / "src/link.py")
    repo.git("add", "-A")
    repo.git("commit", "-q", "-m", "project files")
    repo.write("notes.txt", "stashed edit\n")
    repo.git("stash", "push", "-q", "-m", "user stash")
    repo.write("src/staged.py", "staged = 1\n")
    repo.git("add", "src/staged.py")
    repo.write("src/app.py", "print('app, edited by the user')\n")
    (repo.path / "src/old.py").unlink()
    repo.write("src/scratch.py", "scratch = 1\n")
    repo.write("notes.txt", "notes v1 plus an uncommitted line\n")
    before = repo.guarded_state()
    assert before["stash"], "fixture must hold a stash entry"
    yield repo
    assert repo.guarded_state() == before, "the user's refs, index, HEAD, config or stash changed"

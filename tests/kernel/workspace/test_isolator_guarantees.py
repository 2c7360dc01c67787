"""Edge guarantees of the isolators on real repositories and directories (spec 06).

Each test pins one documented promise a plausible slip would break: a ``..``
patch path refused for that reason, no git hook of the user's ever running,
git-ignored files kept out of a writer's base, and sockets skipped by the
``copy`` isolator.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import socket
import subprocess
from pathlib import Path

import pytest
from kernel.workspace.repo_state import tree_state
from mmo_copy_workspace import fileset
from mmo_copy_workspace.driver import CopyIsolator
from mmo_git_worktree.driver import GitWorktreeIsolator

from mmo_kernel.workspace.patches import Artifact, Patch, PathState


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True,
                          stdin=subprocess.DEVNULL, text=True).stdout


def _file_patch(kind: str, rel: str) -> Patch:
    """A hand-made patch creating ``rel`` with ``pwned``."""
    data = b"pwned\n"
    digest = hashlib.sha256(data).hexdigest()
    if kind == "git_worktree":
        diff = (f"diff --git a/{rel} b/{rel}\nnew file mode 100644\nindex 0000000..1111111\n"
                f"--- /dev/null\n+++ b/{rel}\n@@ -0,0 +1 @@\n+pwned\n")
        fmt = "git-binary-diff"
    else:
        diff = json.dumps({"format": fileset.FORMAT_VERSION, "files": [{
            "relative_path": rel, "before": {"kind": "absent"},
            "after": {"kind": "file", "mode": 0o644, "sha256": digest,
                      "content_base64": base64.b64encode(data).decode()}}]})
        fmt = "mmo-file-set"
    return Patch(isolator=kind, format=fmt, label="job-1", base="crafted", changed_paths=[rel],
                 diff=diff, artifacts=[Artifact(relative_path=rel, sha256=digest, bytes=6)],
                 preimage=[PathState(relative_path=rel, kind="absent")])


@pytest.mark.parametrize("kind", ["git_worktree", "copy"])
@pytest.mark.parametrize("rel", ["../outside.txt", "src/../../outside.txt", "src/../x.txt"])
def test_a_dotdot_patch_path_is_refused_for_that_reason(kind, rel, mmo_git_workspace):
    workspace = mmo_git_workspace
    (workspace / "src").mkdir()
    before = tree_state(workspace.parent)
    isolator = GitWorktreeIsolator() if kind == "git_worktree" else CopyIsolator()
    with pytest.raises(ValueError, match=r"unsafe patch path .*: '\.\.' would leave the workspace"):
        isolator.apply(workspace, _file_patch(kind, rel))
    assert tree_state(workspace.parent) == before


HOOKS = ("post-checkout", "pre-commit", "prepare-commit-msg", "commit-msg", "post-commit",
         "reference-transaction", "post-index-change", "pre-auto-gc", "post-rewrite")


def _install_hooks(directory: Path, marker: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name in HOOKS:
        hook = directory / name
        hook.write_text(f'#!/bin/sh\necho "{name} $*" >> "{marker}"\n')
        hook.chmod(0o755)


def test_no_git_hook_of_the_user_runs_in_prepare_capture_apply_or_cleanup(
        mmo_git_workspace, mmo_env, tmp_path):
    repo = mmo_git_workspace
    marker = tmp_path / "hooks-ran.log"
    _install_hooks(repo / ".git" / "hooks", marker)
    _install_hooks(tmp_path / "custom-hooks", marker)
    _git(repo, "config", "core.hooksPath", str(tmp_path / "custom-hooks"))
    _git(repo, "commit", "-q", "--allow-empty", "-m", "proves the hooks are live")
    assert marker.read_text().count("post-commit") == 1  # the user's own commit ran them
    marker.unlink()
    (repo / "dirty.txt").write_text("uncommitted\n")  # makes prepare copy and commit a base

    isolator = GitWorktreeIsolator()
    handle = isolator.prepare(repo, mmo_env.state_dir / "writers" / "job-1", ["."], "job-1")
    try:
        (Path(handle.root) / "made.txt").write_text("by the writer\n")
        patch = isolator.capture_patch(handle)
        assert patch.changed_paths == ["made.txt"]
        isolator.apply(repo, patch)
    finally:
        isolator.cleanup(handle)
    assert (repo / "made.txt").read_text() == "by the writer\n"
    assert not marker.exists(), marker.read_text()


def test_git_ignored_files_are_kept_out_of_a_writers_base_and_patch(mmo_git_workspace, mmo_env):
    repo = mmo_git_workspace
    (repo / ".gitignore").write_text("*.env\nbuild/\n")
    _git(repo, "add", ".gitignore")
    _git(repo, "commit", "-q", "-m", "ignore secrets and builds")
    (repo / "secret.env").write_text("TOKEN=do-not-copy\n")
    (repo / "build").mkdir()
    (repo / "build/out.o").write_bytes(b"\x7fELF")
    (repo / "notes.txt").write_text("untracked, not ignored\n")

    isolator = GitWorktreeIsolator()
    handle = isolator.prepare(repo, mmo_env.state_dir / "writers" / "job-1", ["."], "job-1")
    try:
        root = Path(handle.root)
        assert (root / "notes.txt").read_text() == "untracked, not ignored\n"
        assert not (root / "secret.env").exists() and not (root / "build").exists()
        assert "secret.env" not in _git(root, "ls-tree", "-r", "--name-only", handle.base)
        (root / "local.env").write_text("MINE=1\n")  # an ignored file the writer makes
        assert isolator.capture_patch(handle).changed_paths == []
    finally:
        isolator.cleanup(handle)


def test_the_copy_isolator_skips_sockets(tmp_path, mmo_env, monkeypatch):
    project = tmp_path / "plain"
    (project / "run").mkdir(parents=True)
    (project / "run/app.txt").write_text("app\n")
    monkeypatch.chdir(project / "run")  # a short relative name keeps under the socket path limit
    listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listening.bind("app.sock")
    listening.listen(1)
    isolator = CopyIsolator()
    handle = None
    try:
        handle = isolator.prepare(project, mmo_env.state_dir / "writers" / "job-1", ["."],
                                  "job-1")
        root = Path(handle.root)
        assert (root / "run/app.txt").read_text() == "app\n"
        assert not os.path.lexists(root / "run/app.sock")
        assert "run/app.sock" not in json.loads(Path(handle.base).read_text())
        writer_socket = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        monkeypatch.chdir(root / "run")
        writer_socket.bind("writer.sock")  # a socket the writer leaves behind
        writer_socket.close()
        (root / "run/new.txt").write_text("new\n")
        assert isolator.capture_patch(handle).changed_paths == ["run/new.txt"]
    finally:
        listening.close()
        if handle is not None:
            isolator.cleanup(handle)

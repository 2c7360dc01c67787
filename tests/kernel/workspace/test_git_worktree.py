"""The ``git_worktree`` isolator on real repositories: prepare, capture, scope, apply, cleanup."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from kernel.workspace.repo_state import BINARY, git, tree_state
from mmo_git_worktree.driver import GitWorktreeIsolator

from mmo_kernel.errors import DriverConfigError
from mmo_kernel.plugin.manager import get_driver
from mmo_kernel.workspace.patches import ApplyReceipt, Patch, PreimageMismatch
from mmo_kernel.workspace.write_scopes import OutOfScopeMutation, enforce_write_scope


@pytest.fixture
def writers(user_repo, state_dir):
    """Prepare writers on the user's repo; every one is cleaned up before the repo guard runs."""
    made = []

    def make(scope, label="job-1", isolator=None, workspace=None):
        isolator = isolator or GitWorktreeIsolator()
        handle = isolator.prepare(workspace or user_repo.path, state_dir / "writers" / label,
                                  scope, label)
        made.append((isolator, handle))
        return isolator, handle

    yield make
    for isolator, handle in made:
        isolator.cleanup(handle)


def _branch_exists(repo: Path, branch: str) -> bool:
    proc = subprocess.run(["git", "rev-parse", "--verify", "-q", f"refs/heads/{branch}"],
                          cwd=repo, capture_output=True, stdin=subprocess.DEVNULL)
    return proc.returncode == 0


def test_worktree_holds_head_plus_in_scope_uncommitted_state(user_repo, writers, state_dir):
    before = tree_state(user_repo.path)
    iso, handle = writers(["src"])
    root = Path(handle.root)
    assert root.is_relative_to(state_dir)
    assert handle.branch == "mmo/job-1" and _branch_exists(user_repo.path, "mmo/job-1")
    assert (root / "src/app.py").read_text() == "print('app, edited by the user')\n"
    assert (root / "src/staged.py").read_text() == "staged = 1\n"
    assert (root / "src/scratch.py").read_text() == "scratch = 1\n"
    assert not (root / "src/old.py").exists()
    assert (root / "notes.txt").read_text() == "notes v1\n"  # dirty, but outside the scope
    assert iso.capture_patch(handle).changed_paths == []
    assert tree_state(user_repo.path) == before


def test_writer_file_reaches_the_workspace_only_on_apply(user_repo, writers):
    iso, handle = writers(["src"])
    root = Path(handle.root)
    (root / "src/generated.py").write_text("generated = True\n")
    (root / "src/pkg/sub").mkdir(parents=True)
    (root / "src/pkg/sub/mod.py").write_bytes(b"x = 1\n")

    patch = iso.capture_patch(handle)

    assert patch.changed_paths == ["src/generated.py", "src/pkg/sub/mod.py"]
    assert [a.model_dump() for a in patch.artifacts] == [
        {"relative_path": "src/generated.py",
         "sha256": hashlib.sha256(b"generated = True\n").hexdigest(), "bytes": 17},
        {"relative_path": "src/pkg/sub/mod.py",
         "sha256": hashlib.sha256(b"x = 1\n").hexdigest(), "bytes": 6},
    ]
    assert not (user_repo.path / "src/generated.py").exists()
    receipt = iso.apply(user_repo.path, patch)
    assert (user_repo.path / "src/generated.py").read_text() == "generated = True\n"
    assert receipt.created_files == ["src/generated.py", "src/pkg/sub/mod.py"]
    assert receipt.created_dirs == ["src/pkg", "src/pkg/sub"]
    assert receipt.modified_files == [] and receipt.deleted_files == []


def test_binary_deletion_symlink_and_mode_round_trip_and_reverse(user_repo, writers):
    iso, handle = writers(["."])
    root = Path(handle.root)
    new_binary = bytes(reversed(BINARY)) + b"\x00tail"
    (root / "src/data.bin").write_bytes(new_binary)
    (root / "src/app.py").unlink()
    (root / "docs/guide.md").unlink()  # empties docs/
    (root / "bin").mkdir()
    (root / "bin/tool.sh").write_bytes(b"#!/bin/sh\necho hi\n")
    os.chmod(root / "bin/tool.sh", 0o755)
    (root / "latin1.txt").write_bytes(b"caf\xe9 cr\xe8me\n")
    (root / "src/link.py").unlink()
    os.symlink("data.bin", root / "src/link.py")
    before = tree_state(user_repo.path)

    captured = iso.capture_patch(handle)
    assert captured.diff.startswith("base64:")  # latin1.txt makes the diff non-UTF-8
    patch = Patch.model_validate_json(captured.model_dump_json())  # as the job record stores it
    receipt = iso.apply(user_repo.path, patch)
    receipt = ApplyReceipt.model_validate_json(receipt.model_dump_json())

    ws = user_repo.path
    assert (ws / "src/data.bin").read_bytes() == new_binary
    assert not (ws / "src/app.py").exists() and not (ws / "docs").exists()
    assert os.access(ws / "bin/tool.sh", os.X_OK)
    assert (ws / "latin1.txt").read_bytes() == b"caf\xe9 cr\xe8me\n"
    assert os.readlink(ws / "src/link.py") == "data.bin"
    assert sorted(receipt.deleted_files) == ["docs/guide.md", "src/app.py"]
    iso.reverse(ws, patch, receipt)
    assert tree_state(ws) == before


def test_base_includes_dirty_state_so_only_new_changes_count(user_repo, writers):
    iso, handle = writers(["src"])
    root = Path(handle.root)
    (root / "src/app.py").write_text("print('app, edited again by the writer')\n")

    patch = iso.capture_patch(handle)

    assert patch.changed_paths == ["src/app.py"]  # scratch/staged/old.py were already dirty
    [pre] = patch.preimage
    user_bytes = (user_repo.path / "src/app.py").read_bytes()
    assert pre.kind == "file" and pre.sha256 == hashlib.sha256(user_bytes).hexdigest()
    iso.apply(user_repo.path, patch)
    edited = (user_repo.path / "src/app.py").read_text()
    assert edited == "print('app, edited again by the writer')\n"


def test_out_of_scope_changes_are_named_including_files_dirty_before_the_job(user_repo, writers):
    iso, handle = writers(["docs"])
    root = Path(handle.root)
    (root / "docs/guide.md").write_text("# Guide, improved\n")
    (root / "src/app.py").write_text("print('changed outside the scope')\n")
    (root / "notes.txt").write_text("notes rewritten\n")

    patch = iso.capture_patch(handle)

    assert iso.out_of_scope(patch, handle.write_scope) == ["notes.txt", "src/app.py"]
    with pytest.raises(OutOfScopeMutation, match="out-of-scope mutation: notes.txt, src/app.py"):
        enforce_write_scope(patch.changed_paths, handle.write_scope)


def test_two_writers_with_disjoint_scopes_both_apply(user_repo, writers):
    iso_a, writer_a = writers(["src"], label="job-a")
    iso_b, writer_b = writers(["docs"], label="job-b")
    (Path(writer_a.root) / "src/feature.py").write_text("feature = 1\n")
    (Path(writer_a.root) / "src/app.py").write_text("print('a')\n")
    (Path(writer_b.root) / "docs/guide.md").write_text("# Guide by b\n")
    (Path(writer_b.root) / "docs/new.md").write_text("new\n")

    iso_a.apply(user_repo.path, iso_a.capture_patch(writer_a))
    iso_b.apply(user_repo.path, iso_b.capture_patch(writer_b))

    ws = user_repo.path
    assert (ws / "src/feature.py").read_text() == "feature = 1\n"
    assert (ws / "src/app.py").read_text() == "print('a')\n"
    assert (ws / "docs/guide.md").read_text() == "# Guide by b\n"
    assert (ws / "docs/new.md").read_text() == "new\n"


def test_apply_refuses_when_the_workspace_moved_on(user_repo, writers):
    iso, handle = writers(["src"])
    (Path(handle.root) / "src/app.py").write_text("print('writer')\n")
    (Path(handle.root) / "src/new.py").write_text("new = 1\n")
    patch = iso.capture_patch(handle)
    user_repo.write("src/app.py", "print('the user kept working')\n")
    before = tree_state(user_repo.path)

    with pytest.raises(PreimageMismatch, match=r"src/app\.py.*nothing was applied"):
        iso.apply(user_repo.path, patch)

    assert tree_state(user_repo.path) == before


def test_cleanup_removes_worktree_and_branch_and_is_idempotent(user_repo, state_dir):
    iso = GitWorktreeIsolator()
    handle = iso.prepare(user_repo.path, state_dir / "w" / "job-1", ["src"], "job-1")
    with pytest.raises(RuntimeError, match="already exists"):
        iso.prepare(user_repo.path, state_dir / "w" / "job-1b", ["src"], "job-1")
    assert not (state_dir / "w" / "job-1b").exists()

    iso.cleanup(handle)
    iso.cleanup(handle)

    assert not _branch_exists(user_repo.path, "mmo/job-1")
    assert not Path(handle.dest).exists()
    assert str(state_dir) not in git(user_repo.path, "worktree", "list")


def test_cleanup_after_the_worktree_directory_vanished(user_repo, state_dir):
    iso = GitWorktreeIsolator()
    handle = iso.prepare(user_repo.path, state_dir / "w" / "job-2", ["."], "job-2")
    shutil.rmtree(handle.dest)

    iso.cleanup(handle)

    assert not _branch_exists(user_repo.path, "mmo/job-2")
    assert str(state_dir) not in git(user_repo.path, "worktree", "list")


def test_branch_prefix_option_is_used_and_validated(user_repo, writers):
    iso = GitWorktreeIsolator({"branch_prefix": "team/writers/"})
    _, handle = writers(["src"], isolator=iso)
    assert handle.branch == "team/writers/job-1"
    assert _branch_exists(user_repo.path, "team/writers/job-1")
    for bad in ({"branch_prefix": "no-slash"}, {"branch_prefix": "a..b/"},
                {"branch_prefix": "has space/"}, {"prefix": "mmo/"}):
        with pytest.raises(DriverConfigError, match="branch_prefix|prefix"):
            GitWorktreeIsolator(bad, where="profile.toml: workspace_isolation.options")


def test_subdirectory_workspace_maps_paths_and_refuses_escapes(user_repo, writers):
    sub = user_repo.path / "src"
    iso, handle = writers(["."], workspace=sub)
    root = Path(handle.root)
    assert (root / "app.py").read_text() == "print('app, edited by the user')\n"
    (root / "made_here.py").write_text("here = 1\n")
    (root.parent / "README.md").write_text("changed from a subdirectory\n")

    patch = iso.capture_patch(handle)

    assert patch.changed_paths == ["../README.md", "made_here.py"]
    assert iso.out_of_scope(patch, handle.write_scope) == ["../README.md"]
    with pytest.raises(ValueError, match="unsafe patch path"):
        iso.apply(sub, patch)
    (root.parent / "README.md").write_text("# test workspace\n")
    iso.apply(sub, iso.capture_patch(handle))
    assert (sub / "made_here.py").read_text() == "here = 1\n"
    assert not (user_repo.path / "made_here.py").exists()


def test_refusals_are_clear_and_change_nothing(user_repo, state_dir, tmp_path):
    iso = GitWorktreeIsolator()
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(ValueError, match="not inside a git work tree.*copy"):
        iso.prepare(plain, state_dir / "w" / "a", ["."], "a")
    empty = tmp_path / "empty-repo"
    empty.mkdir()
    git(empty, "init", "-q")
    with pytest.raises(ValueError, match="no commits yet"):
        iso.prepare(empty, state_dir / "w" / "b", ["."], "b")
    with pytest.raises(ValueError, match="inside the MMO state dir"):
        iso.prepare(user_repo.path, tmp_path / "elsewhere", ["."], "c")
    with pytest.raises(ValueError, match="invalid workspace label"):
        iso.prepare(user_repo.path, state_dir / "w" / "d", ["."], "../evil")
    with pytest.raises(ValueError, match="escapes the workspace"):
        iso.prepare(user_repo.path, state_dir / "w" / "e", ["../x"], "e")
    assert not (state_dir / "w").exists() or not any((state_dir / "w").iterdir())


def test_both_isolators_are_registered_plugins():
    assert type(get_driver("workspace_isolation", "git_worktree")).__name__ == "GitWorktreeIsolator"
    assert type(get_driver("workspace_isolation", "copy")).__name__ == "CopyIsolator"


def test_a_directory_replaced_by_a_file_round_trips(user_repo, writers):
    iso, handle = writers(["docs"])
    root = Path(handle.root)
    (root / "docs/guide.md").unlink()
    (root / "docs").rmdir()
    (root / "docs").write_text("docs is a file now\n")
    before = tree_state(user_repo.path)

    patch = iso.capture_patch(handle)
    receipt = iso.apply(user_repo.path, patch)

    assert (user_repo.path / "docs").read_text() == "docs is a file now\n"
    iso.reverse(user_repo.path, patch, receipt)
    assert tree_state(user_repo.path) == before


def test_apply_that_cannot_reproduce_the_files_is_rolled_back(user_repo, writers):
    iso, handle = writers(["src"])
    (Path(handle.root) / "src/new.txt").write_text("line\n")
    (Path(handle.root) / "src/app.py").write_text("print('writer')\n")
    patch = iso.capture_patch(handle)
    # The user's own attributes make git write CRLF: the result would differ from the writer's.
    user_repo.write(".git/info/attributes", "*.txt text eol=crlf\n")
    before = tree_state(user_repo.path)

    expected = r"does not reproduce the writer's files for: src/new\.txt"
    with pytest.raises(RuntimeError, match=expected):
        iso.apply(user_repo.path, patch)

    assert tree_state(user_repo.path) == before
    (user_repo.path / ".git/info/attributes").unlink()

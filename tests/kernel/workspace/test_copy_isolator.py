"""The ``copy`` isolator on a plain (non-git) directory."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
from kernel.workspace.repo_state import BINARY, tree_state
from mmo_copy_workspace.driver import CopyIsolator

from mmo_kernel.errors import DriverConfigError
from mmo_kernel.workspace.patches import PreimageMismatch


@pytest.fixture
def project(tmp_path, mmo_env) -> Path:
    root = tmp_path / "plain-project"
    (root / "src").mkdir(parents=True)
    (root / "src/app.py").write_text("print('app')\n")
    (root / "src/data.bin").write_bytes(BINARY)
    (root / "assets/icons").mkdir(parents=True)
    (root / "assets/icons/a.png").write_bytes(b"\x89PNG\x00")
    (root / "node_modules/dep").mkdir(parents=True)
    (root / "node_modules/dep/index.js").write_text("module.exports = 1\n")
    (root / ".git").mkdir()  # a stray .git dir is never copied
    (root / ".git/config").write_text("[core]\n")
    os.symlink("app.py", root / "src/link.py")
    os.mkfifo(root / "src/pipe")  # special files are skipped, never read
    return root


@pytest.fixture
def writer(project, mmo_env):
    made = []

    def make(scope, label="job-1", options=None):
        isolator = CopyIsolator(options)
        handle = isolator.prepare(project, mmo_env.state_dir / "writers" / label, scope, label)
        made.append((isolator, handle))
        return isolator, handle

    yield make
    for isolator, handle in made:
        isolator.cleanup(handle)


def test_copy_excludes_git_and_configured_globs(project, writer):
    _, handle = writer(["."], options={"exclude": [".git", "node_modules", "*.png"]})
    root = Path(handle.root)
    assert (root / "src/app.py").read_text() == "print('app')\n"
    assert os.readlink(root / "src/link.py") == "app.py"
    for absent in (".git", "node_modules", "assets/icons/a.png", "src/pipe"):
        assert not os.path.lexists(root / absent), absent


def test_changes_reach_the_directory_only_on_apply_and_reverse_exactly(project, writer):
    iso, handle = writer(["."])
    root = Path(handle.root)
    (root / "src/generated.py").write_text("generated = True\n")
    (root / "src/data.bin").write_bytes(BINARY[::-1])
    (root / "src/app.py").unlink()
    (root / "tools").mkdir()
    (root / "tools/run.sh").write_bytes(b"#!/bin/sh\n")
    os.chmod(root / "tools/run.sh", 0o755)
    (root / "src/link.py").unlink()
    os.symlink("data.bin", root / "src/link.py")
    before = tree_state(project)

    patch = iso.capture_patch(handle)

    assert patch.format == "mmo-file-set"
    assert patch.changed_paths == ["src/app.py", "src/data.bin", "src/generated.py", "src/link.py",
                                   "tools/run.sh"]
    assert {"relative_path": "src/generated.py", "bytes": 17,
            "sha256": hashlib.sha256(b"generated = True\n").hexdigest()} in [
        a.model_dump() for a in patch.artifacts]
    assert "src/app.py" not in {a.relative_path for a in patch.artifacts}
    assert json.loads(patch.diff)["format"] == "mmo-file-set/1"
    assert tree_state(project) == before

    receipt = iso.apply(project, patch)

    assert (project / "src/generated.py").read_text() == "generated = True\n"
    assert (project / "src/data.bin").read_bytes() == BINARY[::-1]
    assert not (project / "src/app.py").exists()
    assert os.access(project / "tools/run.sh", os.X_OK)
    assert os.readlink(project / "src/link.py") == "data.bin"
    assert receipt.created_files == ["src/generated.py", "tools/run.sh"]
    assert receipt.created_dirs == ["tools"]
    iso.reverse(project, patch, receipt)
    assert tree_state(project) == before


def test_a_directory_replaced_by_a_file_round_trips(project, writer):
    iso, handle = writer(["assets"])
    root = Path(handle.root)
    (root / "assets/icons/a.png").unlink()
    (root / "assets/icons").rmdir()
    (root / "assets/icons").write_text("now a file\n")
    before = tree_state(project)

    patch = iso.capture_patch(handle)
    receipt = iso.apply(project, patch)

    assert (project / "assets/icons").read_text() == "now a file\n"
    iso.reverse(project, patch, receipt)
    assert tree_state(project) == before


def test_out_of_scope_and_preimage_refusal(project, writer):
    iso, handle = writer(["src"])
    root = Path(handle.root)
    (root / "src/app.py").write_text("print('writer')\n")
    (root / "assets/icons/a.png").write_bytes(b"changed")
    patch = iso.capture_patch(handle)
    assert iso.out_of_scope(patch, handle.write_scope) == ["assets/icons/a.png"]

    (project / "src/app.py").write_text("print('user moved on')\n")
    before = tree_state(project)
    with pytest.raises(PreimageMismatch, match="src/app.py"):
        iso.apply(project, patch)
    assert tree_state(project) == before


def test_malformed_patch_is_refused_before_any_write(project, writer):
    iso, handle = writer(["."])
    (Path(handle.root) / "src/new.py").write_text("x\n")
    patch = iso.capture_patch(handle)
    before = tree_state(project)
    broken = patch.model_copy(update={"diff": patch.diff.replace("content_base64", "content")})
    with pytest.raises(ValueError, match="malformed mmo-file-set patch"):
        iso.apply(project, broken)
    escaping = patch.model_copy(update={"changed_paths": ["../evil.py"]})
    with pytest.raises(ValueError, match="files do not match changed_paths"):
        iso.apply(project, escaping)
    assert tree_state(project) == before


def test_options_are_validated():
    assert CopyIsolator().options.exclude == [".git"]
    for bad in ({"exclude": [""]}, {"exclude": ["/abs/*"]}, {"exclude": "node_modules"},
                {"excludes": [".git"]}):
        with pytest.raises(DriverConfigError, match="exclude"):
            CopyIsolator(bad, where="profile.toml: workspace_isolation.options")


def test_cleanup_removes_the_copy_and_is_idempotent(project, mmo_env):
    iso = CopyIsolator()
    handle = iso.prepare(project, mmo_env.state_dir / "w" / "job-9", ["."], "job-9")
    assert Path(handle.root).is_dir()
    iso.cleanup(handle)
    iso.cleanup(handle)
    assert not Path(handle.dest).exists()


def test_a_file_replaced_by_a_directory_round_trips(project, writer):
    iso, handle = writer(["src"])
    root = Path(handle.root)
    (root / "src/app.py").unlink()
    (root / "src/app.py").mkdir()
    (root / "src/app.py/__init__.py").write_text("package = True\n")
    before = tree_state(project)

    patch = iso.capture_patch(handle)
    receipt = iso.apply(project, patch)

    assert (project / "src/app.py/__init__.py").read_text() == "package = True\n"
    assert receipt.deleted_files == ["src/app.py"] and receipt.created_dirs == ["src/app.py"]
    iso.reverse(project, patch, receipt)
    assert tree_state(project) == before

"""Symlinks that lead out of the workspace are refused at capture and again at integration (06).

A writer may add relative links that stay in the tree; a link with an
absolute target, one whose ``..`` climbs out, or one that escapes through
another link is refused by name (``path -> target``). Both built-in isolators
are driven on real directories; the integration refusals use hand-crafted
patches, as a tampered ``patch.json`` would be.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest
from kernel.workspace.repo_state import tree_state
from mmo_copy_workspace import fileset
from mmo_copy_workspace.driver import CopyIsolator
from mmo_git_worktree.driver import GitWorktreeIsolator

from mmo_kernel.jobs.integration import integrate_transaction
from mmo_kernel.workspace.patches import (
    Artifact,
    Patch,
    PathState,
    UnsafeSymlink,
    begin_receipt,
    finish_receipt,
)


@pytest.fixture(params=["git_worktree", "copy"])
def kind(request):
    return request.param


@pytest.fixture
def workspace(kind, request, tmp_path) -> Path:
    if kind == "git_worktree":
        return request.getfixturevalue("user_repo").path
    root = tmp_path / "plain"
    (root / "src").mkdir(parents=True)
    (root / "src/app.py").write_text("print('app')\n")
    return root


@pytest.fixture
def writer(kind, workspace, mmo_env):
    """``make()`` prepares a whole-workspace writer; each is cleaned up afterwards."""
    made = []

    def make(label="job-1"):
        isolator = GitWorktreeIsolator() if kind == "git_worktree" else CopyIsolator()
        handle = isolator.prepare(workspace, mmo_env.state_dir / "writers" / label, ["."], label)
        made.append((isolator, handle))
        return isolator, handle, Path(handle.root)

    yield make
    for isolator, handle in made:
        isolator.cleanup(handle)


def test_capture_refuses_links_leading_out_and_keeps_in_tree_ones(workspace, writer):
    iso, handle, root = writer()
    (root / "sub").mkdir()
    (root / "sub/file").write_text("in tree\n")
    os.symlink("/etc/passwd", root / "x")
    os.symlink("../../outside", root / "y")
    os.symlink("sub/file", root / "z")

    with pytest.raises(UnsafeSymlink) as refused:
        iso.capture_patch(handle)

    message = str(refused.value)
    assert "x -> /etc/passwd (absolute target)" in message
    assert "y -> ../../outside (leaves the workspace)" in message
    assert sorted(refused.value.links) == ["x", "y"]
    assert "z ->" not in message
    # Once the writer removes them, the in-tree link is captured and integrates.
    (root / "x").unlink()
    (root / "y").unlink()
    patch = iso.capture_patch(handle)
    assert patch.changed_paths == ["sub/file", "z"]
    iso.apply(workspace, patch)
    assert os.readlink(workspace / "z") == "sub/file"
    assert (workspace / "z").read_text() == "in tree\n"


def test_an_escape_through_another_link_is_refused_and_named(writer):
    iso, handle, root = writer()
    (root / "sub").mkdir()
    (root / "sub/file").write_text("in tree\n")
    os.symlink(".", root / "d")                   # in the tree: the workspace itself
    os.symlink("d/..", root / "e")                # d is the workspace, so d/.. is its parent
    os.symlink("d/d/sub/file", root / "f")        # a chain that stays inside
    with pytest.raises(UnsafeSymlink) as refused:
        iso.capture_patch(handle)
    assert refused.value.links == {"e": ("d/..", "leaves the workspace through d")}


def test_a_link_loop_is_refused_rather_than_followed_forever(writer):
    iso, handle, root = writer()
    os.symlink("b", root / "a")
    os.symlink("a", root / "b")
    with pytest.raises(UnsafeSymlink, match="more than 40 levels of symlinks") as refused:
        iso.capture_patch(handle)
    assert sorted(refused.value.links) == ["a", "b"]


def test_the_users_own_links_are_left_alone_but_not_redirected(workspace, writer):
    os.symlink("/usr/bin/env", workspace / "tool")     # the user's: absolute, not the writer's
    (workspace / "lib").mkdir()
    (workspace / "lib/a.txt").write_text("a\n")
    os.symlink("lib/..", workspace / "up")             # the user's: the workspace itself
    iso, handle, root = writer()
    (root / "notes-by-writer.txt").write_text("fine\n")
    assert iso.capture_patch(handle).changed_paths == ["notes-by-writer.txt"]

    os.symlink("tool", root / "via-tool")              # the writer's link, out through the user's
    with pytest.raises(UnsafeSymlink) as refused:
        iso.capture_patch(handle)
    assert refused.value.links == {
        "via-tool": ("tool", "leaves the workspace through tool -> /usr/bin/env")}
    (root / "via-tool").unlink()

    shutil.rmtree(root / "lib")                        # now lib is a link to the workspace,
    os.symlink(".", root / "lib")                      # so the unchanged up -> lib/.. leaves it
    with pytest.raises(UnsafeSymlink) as refused:
        iso.capture_patch(handle)
    assert list(refused.value.links) == ["up"]
    assert "tool" not in str(refused.value)


# ------------------------------------------------------------ integration --


def _link_artifact(path: str, target: str) -> Artifact:
    data = target.encode()
    return Artifact(relative_path=path, sha256=hashlib.sha256(data).hexdigest(), bytes=len(data))


def _git_link_section(path: str, target: str) -> str:
    return (f"diff --git a/{path} b/{path}\nnew file mode 120000\nindex 0000000..1111111\n"
            f"--- /dev/null\n+++ b/{path}\n@@ -0,0 +1 @@\n+{target}\n"
            "\\ No newline at end of file\n")


def _crafted(kind: str, links: dict[str, str], listed: list[str] | None = None) -> Patch:
    """A hand-made patch adding ``links`` (as a tampered patch.json would carry)."""
    if kind == "git_worktree":
        diff = "".join(_git_link_section(p, t) for p, t in links.items())
        fmt = "git-binary-diff"
    else:
        files = [{"relative_path": p, "before": {"kind": "absent"},
                  "after": {"kind": "symlink", "mode": 0, "sha256": _link_artifact(p, t).sha256,
                            "content_base64": base64.b64encode(t.encode()).decode()}}
                 for p, t in links.items()]
        diff = json.dumps({"format": fileset.FORMAT_VERSION, "files": files})
        fmt = "mmo-file-set"
    paths = sorted(listed if listed is not None else links)
    return Patch(isolator=kind, format=fmt, label="job-9", base="crafted", changed_paths=paths,
                 diff=diff, artifacts=[_link_artifact(p, links[p]) for p in paths if p in links],
                 preimage=[PathState(relative_path=p, kind="absent") for p in paths])


def _isolator(kind: str):
    return GitWorktreeIsolator() if kind == "git_worktree" else CopyIsolator()


def test_a_crafted_patch_with_an_escaping_link_is_refused_and_changes_nothing(kind, workspace):
    before = tree_state(workspace)
    patch = _crafted(kind, {"evil": "/etc/passwd", "ok": "src/app.py"})
    with pytest.raises(UnsafeSymlink, match=r"evil -> /etc/passwd \(absolute target\)") as refused:
        _isolator(kind).apply(workspace, patch)
    assert list(refused.value.links) == ["evil"]
    assert "refused at integration" in str(refused.value)
    assert tree_state(workspace) == before


def test_a_crafted_chain_of_new_links_is_refused_before_anything_is_written(kind, workspace):
    before = tree_state(workspace)
    patch = _crafted(kind, {"d": ".", "e": "d/.."})
    with pytest.raises(UnsafeSymlink) as refused:
        _isolator(kind).apply(workspace, patch)
    assert refused.value.links == {"e": ("d/..", "leaves the workspace through d")}
    expected = "nothing was applied" if kind == "copy" else "the apply was reversed"
    assert expected in str(refused.value)
    assert tree_state(workspace) == before


def test_a_git_diff_touching_an_unlisted_path_is_refused(user_repo):
    """Only listed paths are checked and reversed, so the diff may touch no other."""
    before = tree_state(user_repo.path)
    patch = _crafted("git_worktree", {"ok": "src/app.py", "evil": "/etc/passwd"}, listed=["ok"])
    with pytest.raises(ValueError, match="its diff touches evil, which changed_paths does not"):
        GitWorktreeIsolator().apply(user_repo.path, patch)
    assert tree_state(user_repo.path) == before


class CarelessIsolator(CopyIsolator):
    """A third-party isolator that writes a file set without checking anything itself."""

    name = "careless"

    def apply(self, workspace, patch):
        receipt = begin_receipt(workspace, patch.changed_paths)
        fileset.write_changes(workspace, fileset.decode_changes(patch.diff))
        return finish_receipt(receipt)


def test_the_kernel_refuses_an_escaping_link_whatever_the_isolator_checked(tmp_path, mmo_env):
    workspace = tmp_path / "plain"
    workspace.mkdir()
    (workspace / "kept.txt").write_text("kept\n")
    before = tree_state(workspace)
    persisted = []
    with pytest.raises(UnsafeSymlink, match="evil -> /etc/passwd") as refused:
        integrate_transaction(CarelessIsolator(), workspace,
                              _crafted("copy", {"evil": "/etc/passwd"}),
                              persist_integrated=lambda: persisted.append("integrated"),
                              persist_taint=lambda entry: persisted.append(entry))
    assert "the apply was reversed" in str(refused.value)
    assert persisted == []
    assert tree_state(workspace) == before


def test_a_linked_directory_the_patch_replaces_is_judged_by_its_new_content(workspace, writer):
    """Under a path the patch replaces, what the old link led to no longer counts."""
    (workspace / "real").mkdir()
    os.symlink("/", workspace / "real/l2")        # the user's own
    os.symlink("real", workspace / "d")           # the user's own
    iso, handle, root = writer()
    (root / "d").unlink()                         # the writer makes d a directory of its own
    (root / "d").mkdir()
    os.symlink("l2", root / "d/e")                # dangling inside the new d: harmless
    patch = iso.capture_patch(handle)
    assert patch.changed_paths == ["d", "d/e"]
    iso.apply(workspace, patch)
    assert os.readlink(workspace / "d/e") == "l2"
    assert os.readlink(workspace / "real/l2") == "/"

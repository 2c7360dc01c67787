"""The patch engine on real directories, helper by helper (spec 06 "exact reversal").

The isolator tests drive these helpers through whole integrations; these pin
each one's exact result: patch-path refusals and their reasons, file states,
receipts (what was created, modified, deleted), exact reversal and what blocks
it, labels, the writer's private directory and symlink resolution, so a changed
comparison or message in ``workspace.patches`` fails a test (``make mutate``).
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

import pytest

from mmo_kernel.workspace.patches import (
    MAX_SYMLINK_HOPS,
    ApplyReceipt,
    Artifact,
    Patch,
    PatchReversalError,
    PathState,
    PreimageMismatch,
    UnsafeSymlink,
    begin_receipt,
    check_applied_symlinks,
    check_label,
    check_preimage,
    check_relative_path,
    check_symlinks,
    contained_path,
    finish_receipt,
    private_dest,
    provisional_created,
    read_state,
    reverse_apply,
    sha256_bytes,
    symlink_escape,
    verify_postimage,
)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def ws(tmp_path) -> Path:
    root = tmp_path / "ws"
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "a.txt").write_bytes(b"A")
    (root / "src" / "pkg" / "m.py").write_bytes(b"M")
    os.chmod(root / "src" / "pkg" / "m.py", 0o640)
    os.symlink("a.txt", root / "src" / "link")
    return root


def _patch(changed, artifacts=(), preimage=()):
    return Patch(isolator="t", format="mmo-file-set", label="job-1", base="b",
                 changed_paths=sorted(changed), diff="", artifacts=list(artifacts),
                 preimage=list(preimage))


def _refused(value):
    with pytest.raises(ValueError) as info:
        check_relative_path(value)
    return str(info.value)


# -- paths and states -------------------------------------------------------------


def test_patch_path_refusals_say_why():
    for value in ("", "/etc/passwd", "a\0b"):
        assert _refused(value) == f"unsafe patch path {value!r}: must be a relative path"
    for value in ("..", "../x", "a/../b", "a/.."):
        assert _refused(value) == f"unsafe patch path {value!r}: '..' would leave the workspace"
    for value in ("a//b", "./a", "a/", "a/./b"):
        assert _refused(value) == f"unsafe patch path {value!r}: must be a normalized relative path"
    for value in (".git", ".git/config", "a/.git/x"):
        assert _refused(value) == f"unsafe patch path {value!r}: git metadata is never patched"
    for value in ("a", "a/b.txt", ".github/x", "a..b", "..a", "x/.gitignore"):
        assert check_relative_path(value) == value


def test_a_path_whose_directory_leaves_through_a_symlink_is_refused(ws, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, ws / "out")
    with pytest.raises(ValueError) as info:
        contained_path(ws, "out/x")
    assert str(info.value) == (
        "unsafe patch path 'out/x': its directory leaves the workspace via a symlink")
    assert contained_path(ws, "out") == ws / "out"  # the link itself is inside
    assert contained_path(ws, "src/pkg/m.py") == ws / "src/pkg/m.py"
    alias = tmp_path / "alias"
    os.symlink(ws, alias)
    assert contained_path(alias, "src/a.txt") == alias / "src/a.txt"
    with pytest.raises(ValueError, match="must be a relative path"):
        contained_path(ws, "/x")


def test_read_state_of_each_kind(ws):
    assert read_state(ws, "src/a.txt") == ("file", sha(b"A"), b"A", 0o666 & ~_umask())
    assert read_state(ws, "src/pkg/m.py") == ("file", sha(b"M"), b"M", 0o640)
    kind, digest, data, _ = read_state(ws, "src/link")
    assert (kind, digest, data) == ("symlink", sha(b"a.txt"), b"a.txt")
    assert read_state(ws, "src/pkg")[:3] == ("dir", None, None)
    assert read_state(ws, "src/pkg")[3] == stat.S_IMODE(os.lstat(ws / "src/pkg").st_mode)
    assert read_state(ws, "nope") == ("absent", None, None, 0)
    assert read_state(ws, "src/a.txt/below") == ("absent", None, None, 0)
    os.mkfifo(ws / "fifo")
    assert read_state(ws, "fifo")[:3] == ("other", None, None)
    assert sha256_bytes(b"") == sha(b"")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_the_preimage_check_names_every_moved_path(ws):
    good = [PathState(relative_path="src/a.txt", kind="file", sha256=sha(b"A")),
            PathState(relative_path="new.txt", kind="absent"),
            PathState(relative_path="src/pkg", kind="absent"),  # a dir where none was: fine
            PathState(relative_path="src/link", kind="symlink", sha256=sha(b"a.txt"))]
    check_preimage(ws, _patch(["new.txt", "src/a.txt", "src/link", "src/pkg"], preimage=good))
    bad = [PathState(relative_path="src/a.txt", kind="file", sha256=sha(b"other")),
           PathState(relative_path="src/link", kind="file", sha256=sha(b"a.txt")),
           PathState(relative_path="gone", kind="file", sha256=sha(b"A")),
           PathState(relative_path="src/pkg/m.py", kind="absent")]
    with pytest.raises(PreimageMismatch) as info:
        check_preimage(ws, _patch(["gone", "src/a.txt", "src/link", "src/pkg/m.py"],
                                  preimage=bad))
    assert info.value.paths == ["gone", "src/a.txt", "src/link", "src/pkg/m.py"]
    assert str(info.value) == (
        "workspace no longer matches the patch preimage (it changed since the writer started) "
        "for: gone, src/a.txt, src/link, src/pkg/m.py; nothing was applied")


def test_changed_paths_must_be_sorted_and_unique():
    for paths in (["b", "a"], ["a", "a"]):
        with pytest.raises(ValueError, match="changed_paths must be sorted and unique"):
            Patch(isolator="t", format="git-binary-diff", label="l", base="b",
                  changed_paths=paths, diff="", artifacts=[], preimage=[])


# -- receipts and exact reversal --------------------------------------------------


def _apply(ws):
    """A change touching every kind: modify, delete, create (in a new dir), replace a link."""
    receipt = begin_receipt(ws, ["src/a.txt", "src/pkg/m.py", "new/deep/n.txt", "src/link",
                                 "src/a.txt"])
    (ws / "src/a.txt").write_bytes(b"A2")
    (ws / "src/pkg/m.py").unlink()
    (ws / "new/deep").mkdir(parents=True)
    (ws / "new/deep/n.txt").write_bytes(b"N")
    (ws / "src/link").unlink()
    os.symlink("pkg", ws / "src/link")
    return receipt


def test_a_receipt_backs_up_every_existing_path_and_its_parents(ws):
    receipt = begin_receipt(ws, ["src/pkg/m.py", "src/a.txt", "src/link", "new/x", "src/pkg",
                                 "src/a.txt"])
    assert receipt.workspace == str(ws)
    assert receipt.changed_paths == ["new/x", "src/a.txt", "src/link", "src/pkg", "src/pkg/m.py"]
    assert {(b.relative_path, b.kind, b.content) for b in receipt.backups} == {
        ("src/a.txt", "file", b"A"), ("src/link", "symlink", b"a.txt"),
        ("src/pkg/m.py", "file", b"M")}
    assert [b.mode for b in receipt.backups if b.relative_path == "src/pkg/m.py"] == [0o640]
    assert set(receipt.dir_modes) == {"src", "src/pkg"}  # "new" does not exist yet
    assert receipt.dir_modes["src/pkg"] == stat.S_IMODE(os.lstat(ws / "src/pkg").st_mode)
    assert (receipt.created_files, receipt.modified_files, receipt.deleted_files,
            receipt.created_dirs) == ([], [], [], [])


def test_a_receipt_refuses_a_special_file(ws):
    os.mkfifo(ws / "src/fifo")
    with pytest.raises(ValueError) as info:
        begin_receipt(ws, ["src/fifo"])
    assert str(info.value) == (
        "cannot patch 'src/fifo': it is not a regular file or symlink in the workspace")


def test_a_finished_receipt_lists_what_the_apply_did(ws):
    done = finish_receipt(_apply(ws))
    assert done.created_files == ["new/deep/n.txt"]
    assert done.modified_files == ["src/a.txt", "src/link"]
    assert done.deleted_files == ["src/pkg/m.py"]
    assert done.created_dirs == ["new", "new/deep"]


def test_a_file_replaced_by_a_directory_counts_as_deleted(ws):
    receipt = begin_receipt(ws, ["src/a.txt"])
    (ws / "src/a.txt").unlink()
    (ws / "src/a.txt").mkdir()
    done = finish_receipt(receipt)
    assert (done.deleted_files, done.modified_files, done.created_files) == (["src/a.txt"], [], [])


def test_a_provisional_receipt_assumes_anything_new_was_created(ws):
    receipt = begin_receipt(ws, ["src/a.txt", "new/deep/n.txt", "other/o.txt"])
    (ws / "new/deep").mkdir(parents=True)
    (ws / "new/deep/n.txt").write_bytes(b"N")
    (ws / "src/a.txt").write_bytes(b"changed")
    guess = provisional_created(receipt)
    assert guess.created_files == ["new/deep/n.txt"]
    assert guess.created_dirs == ["new", "new/deep"]
    assert guess.modified_files == [] and guess.backups == receipt.backups


def test_reversal_restores_the_exact_bytes_modes_and_links(ws):
    before = _snapshot(ws)
    receipt = finish_receipt(_apply(ws))
    reverse_apply(ws, receipt)
    assert _snapshot(ws) == before


def test_reversal_of_a_provisional_receipt_is_exact_too(ws):
    before = _snapshot(ws)
    receipt = provisional_created(_apply(ws))
    reverse_apply(ws, receipt)
    assert _snapshot(ws) == before


def test_reversal_restores_a_deleted_parent_directory_with_its_mode(ws):
    os.chmod(ws / "src/pkg", 0o750)
    before = _snapshot(ws)
    receipt = begin_receipt(ws, ["src/pkg/m.py"])
    (ws / "src/pkg/m.py").unlink()
    (ws / "src/pkg").rmdir()
    reverse_apply(ws, finish_receipt(receipt))
    assert _snapshot(ws) == before
    assert stat.S_IMODE(os.lstat(ws / "src/pkg").st_mode) == 0o750


def test_reversal_puts_a_file_back_where_a_link_now_stands(ws):
    before = _snapshot(ws)
    receipt = begin_receipt(ws, ["src/a.txt"])
    (ws / "src/a.txt").unlink()
    os.symlink("pkg/m.py", ws / "src/a.txt")
    reverse_apply(ws, finish_receipt(receipt))
    assert _snapshot(ws) == before


def _snapshot(root: Path) -> dict[str, tuple]:
    seen = {}
    for path in sorted(root.rglob("*")):
        info = os.lstat(path)
        rel = path.relative_to(root).as_posix()
        if stat.S_ISLNK(info.st_mode):
            seen[rel] = ("link", os.readlink(path))
        elif stat.S_ISDIR(info.st_mode):
            seen[rel] = ("dir", stat.S_IMODE(info.st_mode))
        else:
            seen[rel] = ("file", path.read_bytes(), stat.S_IMODE(info.st_mode))
    return seen


def test_a_receipt_of_another_workspace_is_refused(ws, tmp_path):
    receipt = begin_receipt(ws, ["src/a.txt"])
    with pytest.raises(ValueError) as info:
        reverse_apply(tmp_path, receipt)
    assert str(info.value) == f"receipt belongs to {str(ws)!r}, not {str(tmp_path)!r}"


def test_blockers_are_found_before_anything_is_touched(ws):
    receipt = finish_receipt(_apply(ws))
    (ws / "new/deep/foreign.txt").write_bytes(b"F")  # the user added a file in a created dir
    (ws / "src/pkg/m.py").mkdir()  # and a directory where the patch deleted a file
    applied = _snapshot(ws)
    with pytest.raises(PatchReversalError) as info:
        reverse_apply(ws, receipt)
    assert _snapshot(ws) == applied
    assert info.value.paths == ["new/deep/", "src/pkg/m.py"] and info.value.partial is False
    assert str(info.value) == (
        "could not reverse the applied patch for: new/deep/, src/pkg/m.py (new/deep/: holds "
        "files the patch did not create: new/deep/foreign.txt; src/pkg/m.py: a directory the "
        "patch did not create stands here now; nothing was reversed)")


def test_a_directory_standing_where_a_file_was_created_blocks_reversal(ws):
    receipt = finish_receipt(_apply(ws))
    (ws / "new/deep/n.txt").unlink()
    (ws / "new/deep/n.txt").mkdir()
    with pytest.raises(PatchReversalError) as info:
        reverse_apply(ws, receipt)
    assert "new/deep/n.txt: a directory now stands where the patch created a file" in str(
        info.value)
    assert "new/deep/" not in info.value.paths  # its only entry is the patch's own path


def test_a_partial_reversal_is_reported_as_partial(ws):
    receipt = begin_receipt(ws, ["src/a.txt", "src/pkg/m.py"])
    (ws / "src/a.txt").write_bytes(b"A2")
    (ws / "src/pkg/m.py").unlink()
    (ws / "src/pkg").rmdir()
    (ws / "src/pkg").write_bytes(b"a file where the directory was")  # m.py cannot come back
    with pytest.raises(PatchReversalError) as info:
        reverse_apply(ws, finish_receipt(receipt))
    assert info.value.partial is True and info.value.paths == ["src/pkg/m.py"]
    assert str(info.value).startswith("could not reverse the applied patch for: src/pkg/m.py (")
    assert str(info.value).endswith("; the workspace is partly reversed)")
    assert (ws / "src/a.txt").read_bytes() == b"A"  # everything else was still restored


def test_reversal_error_messages():
    error = PatchReversalError(["b", "a", "b"])
    assert (error.paths, error.partial, str(error)) == (
        ["a", "b"], False, "could not reverse the applied patch for: a, b")
    error = PatchReversalError(["x"], "why", partial=True)
    assert (error.partial, str(error)) == (True, "could not reverse the applied patch for: x (why)")


def test_the_postimage_must_be_exactly_the_writers_files(ws):
    patch = _patch(["src/a.txt", "src/gone", "src/link", "src/pkg"], artifacts=[
        Artifact(relative_path="src/a.txt", sha256=sha(b"A"), bytes=1),
        Artifact(relative_path="src/link", sha256=sha(b"a.txt"), bytes=5)])
    verify_postimage(ws, patch)  # a file, a link, an absent path and a directory are fine
    wrong = _patch(["src/a.txt", "src/link", "src/pkg/m.py", "zzz"], artifacts=[
        Artifact(relative_path="src/a.txt", sha256=sha(b"other"), bytes=1),
        Artifact(relative_path="src/link", sha256=sha(b"a.txt"), bytes=5),
        Artifact(relative_path="zzz", sha256=sha(b""), bytes=0)])
    with pytest.raises(RuntimeError) as info:
        verify_postimage(ws, wrong)
    assert str(info.value) == (
        "applied patch does not reproduce the writer's files for: src/a.txt, src/pkg/m.py, zzz "
        "(a git attribute or filter, or a concurrent writer, changed them); the apply was "
        "reversed")
    (ws / "dir_artifact").mkdir()
    with pytest.raises(RuntimeError, match="dir_artifact"):
        verify_postimage(ws, _patch(["dir_artifact"], artifacts=[
            Artifact(relative_path="dir_artifact", sha256=sha(b""), bytes=0)]))


def test_the_postimage_refuses_an_escaping_link(ws):
    os.symlink("../../etc", ws / "src/esc")
    with pytest.raises(UnsafeSymlink) as info:
        verify_postimage(ws, _patch(["src/esc"], artifacts=[
            Artifact(relative_path="src/esc", sha256=sha(b"../../etc"), bytes=9)]))
    assert str(info.value) == (
        "unsafe symlink in patch: src/esc -> ../../etc (leaves the workspace); a symlink must be "
        "relative and stay inside the workspace; refused at integration: the apply was "
        "reversed, the workspace is unchanged")


# -- symlink resolution -----------------------------------------------------------


def test_symlink_escape_resolves_like_the_kernel(ws):
    assert symlink_escape(ws, "src/x", "/etc") == ("absolute target", [])
    assert symlink_escape(ws, "src/x", "a.txt") == (None, [])
    assert symlink_escape(ws, "src/x", "../src/./pkg//m.py") == (None, [])
    assert symlink_escape(ws, "x", "..") == ("leaves the workspace", [])
    assert symlink_escape(ws, "src/x", "../../ws/src") == ("leaves the workspace", [])
    assert symlink_escape(ws, "src/x", "link") == (None, ["src/link"])
    os.symlink("../..", ws / "src/up")
    assert symlink_escape(ws, "src/x", "up/y") == (
        "leaves the workspace through src/up", ["src/up"])
    os.symlink("/tmp", ws / "src/abs")
    assert symlink_escape(ws, "src/x", "abs/y") == (
        "leaves the workspace through src/abs -> /tmp", ["src/abs"])
    os.symlink("loop", ws / "src/loop")
    why, followed = symlink_escape(ws, "src/x", "loop")
    assert why == f"more than {MAX_SYMLINK_HOPS} levels of symlinks"
    assert len(followed) == MAX_SYMLINK_HOPS + 1


def test_a_chain_of_exactly_the_hop_limit_is_followed(ws):
    for i in range(MAX_SYMLINK_HOPS - 1):
        os.symlink(f"l{i + 1}", ws / f"l{i}")
    os.symlink("src", ws / f"l{MAX_SYMLINK_HOPS - 1}")
    why, followed = symlink_escape(ws, "x", "l0")
    assert (why, len(followed)) == (None, MAX_SYMLINK_HOPS)


def test_the_patchs_links_win_over_the_disk(ws):
    os.symlink("../..", ws / "src/up")
    overlay = {"src/up": "pkg", "src/new": "../.."}
    assert symlink_escape(ws, "src/x", "up/m.py", overlay) == (None, ["src/up"])
    assert symlink_escape(ws, "src/x", "new/y", overlay) == (
        "leaves the workspace through src/new", ["src/new"])
    # under a path the patch replaces, the disk does not count
    assert symlink_escape(ws, "x", "src/up/y", {"src": None}) == (None, [])


def test_check_symlinks_names_only_the_links_the_patch_is_responsible_for(ws):
    os.symlink("../..", ws / "src/up")  # the user's own escaping link
    links = {"src/up": "../..", "src/b": "/abs", "src/ok": "a.txt", "src/via": "up/x"}
    with pytest.raises(UnsafeSymlink) as info:
        check_symlinks(ws, links)
    assert info.value.links == {"src/b": ("/abs", "absolute target"),
                                "src/up": ("../..", "leaves the workspace"),
                                "src/via": ("up/x", "leaves the workspace through src/up")}
    with pytest.raises(UnsafeSymlink) as info:
        check_symlinks(ws, links, changed={"src/b"})
    assert list(info.value.links) == ["src/b"]
    with pytest.raises(UnsafeSymlink) as info:
        check_symlinks(ws, links, changed={"src/up"}, note="n")
    assert list(info.value.links) == ["src/up", "src/via"] and str(info.value).endswith("; n")
    check_symlinks(ws, links, changed={"src/ok"})
    check_symlinks(ws, {})


def test_applied_links_are_checked_only_among_the_changed_paths(ws):
    os.symlink("/etc", ws / "user_link")  # not changed by the patch: left alone
    check_applied_symlinks(ws, ["src/a.txt", "src/link", "missing"])
    os.symlink("../x/../../y", ws / "src/bad")
    with pytest.raises(UnsafeSymlink) as info:
        check_applied_symlinks(ws, ["src/bad", "src/link"])
    assert list(info.value.links) == ["src/bad"]


# -- labels and the writer's private directory ------------------------------------


def test_labels():
    for good in ("a", "job-1", "A.b_c-9", "x" * 120, "1.lockx"):
        assert check_label(good) == good
    for bad in ("", "x" * 121, ".a", "-a", "a..b", "a.lock", "a/b", "a b", "é", None, 5):
        with pytest.raises(ValueError) as info:
            check_label(bad)
        assert str(info.value) == (
            f"invalid workspace label {bad!r}: use 1-120 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit")


def test_the_private_dest_is_created_inside_the_state_dir_only(mmo_env, tmp_path):
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    state = mmo_env.state_dir.resolve()
    dest = private_dest(mmo_env.state_dir / "writers" / "job-1", workspace)
    assert dest.is_dir() and stat.S_IMODE(dest.stat().st_mode) == 0o700
    assert private_dest(dest, workspace) == dest  # an existing empty directory is fine
    (dest / "f").write_text("x")
    with pytest.raises(ValueError) as info:
        private_dest(dest, workspace)
    assert str(info.value) == f"writer workspace {str(dest)!r} already exists and is not empty"
    afile = mmo_env.state_dir / "afile"
    afile.write_text("x")
    with pytest.raises(ValueError, match="already exists and is not empty"):
        private_dest(afile, workspace)
    outside = tmp_path / "elsewhere"
    with pytest.raises(ValueError) as info:
        private_dest(outside, workspace)
    assert str(info.value) == (
        f"writer workspace {str(outside)!r} must be inside the MMO state dir {str(state)!r}")
    assert private_dest(mmo_env.state_dir / "w2", workspace).parent == mmo_env.state_dir
    inner = mmo_env.state_dir / "ws"
    inner.mkdir()
    for target in (inner, inner / "sub"):
        with pytest.raises(ValueError) as info:
            private_dest(target, inner)
        assert str(info.value) == (
            f"writer workspace {str(target)!r} must not be inside the workspace "
            f"{str(inner.resolve())!r}")


def test_an_apply_receipt_round_trips_through_json(ws):
    receipt = finish_receipt(_apply(ws))
    again = ApplyReceipt.model_validate_json(receipt.model_dump_json())
    assert again == receipt


def test_an_unsafe_symlink_message_names_every_link_in_order():
    error = UnsafeSymlink({"z": ("/abs", "absolute target"), "a": ("..", "leaves the workspace")})
    assert list(error.links) == ["a", "z"]
    assert str(error) == (
        "unsafe symlink in patch: a -> .. (leaves the workspace); z -> /abs (absolute target); "
        "a symlink must be relative and stay inside the workspace")
    assert str(UnsafeSymlink({"a": ("/x", "absolute target")}, note="n")).endswith(
        "stay inside the workspace; n")

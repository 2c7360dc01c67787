"""Capturing a writer's worktree as a git ``--binary`` patch, and applying it to the workspace."""

from __future__ import annotations

import base64
import os
import posixpath
import tempfile
from pathlib import Path
from typing import Final

from mmo_kernel.workspace import (
    ApplyReceipt,
    Artifact,
    Patch,
    PatchReversalError,
    PathKind,
    PathState,
    WorkspaceHandle,
    begin_receipt,
    check_preimage,
    check_symlinks,
    contained_path,
    finish_receipt,
    provisional_created,
    read_state,
    reverse_apply,
    sha256_bytes,
    verify_postimage,
)

from .gitcmd import git_paths, run_git

FORMAT: Final = "git-binary-diff"
_DIFF_FLAGS = ("--binary", "--full-index", "--no-renames", "--no-ext-diff", "--no-textconv",
               "--no-color", "--src-prefix=a/", "--dst-prefix=b/")


def _to_workspace(path: str, prefix: str) -> str:
    """A toplevel-relative path as seen from the workspace (``../x`` when outside it)."""
    if not prefix:
        return path
    if path.startswith(prefix + "/"):
        return path[len(prefix) + 1:]
    return posixpath.relpath(path, prefix)


def _to_toplevel(path: str, prefix: str) -> str:
    return f"{prefix}/{path}" if prefix else path


def _inside(path: str) -> bool:
    return not (path == ".." or path.startswith("../"))


def _preimage(worktree: Path, base: str, paths: list[str], prefix: str) -> list[PathState]:
    """Each changed path as it was in the base commit: kind and sha256 (symlinks: target)."""
    entries: dict[str, tuple[str, str]] = {}
    if paths:
        raw = run_git(worktree, "ls-tree", "-r", "-z", "--full-tree", base, "--",
                      *[_to_toplevel(p, prefix) for p in paths]).stdout
        for record in raw.decode("utf-8", "surrogateescape").split("\0"):
            if record:
                meta, name = record.split("\t", 1)
                mode, _kind, oid = meta.split()
                entries[name] = (mode, oid)
    states = []
    for rel in paths:
        found = entries.get(_to_toplevel(rel, prefix))
        if found is None:
            states.append(PathState(relative_path=rel, kind="absent"))
            continue
        mode, oid = found
        if mode == "160000":
            states.append(PathState(relative_path=rel, kind="other"))
            continue
        blob = run_git(worktree, "cat-file", "blob", oid).stdout
        kind: PathKind = "symlink" if mode == "120000" else "file"
        states.append(PathState(relative_path=rel, kind=kind, sha256=sha256_bytes(blob)))
    return states


def _artifacts(root: Path, paths: list[str]) -> list[Artifact]:
    found = []
    for rel in paths:
        kind, digest, content, _ = read_state(root, rel)
        if kind in ("file", "symlink") and digest is not None and content is not None:
            found.append(Artifact(relative_path=rel, sha256=digest, bytes=len(content)))
    return found


def _tree_symlinks(root: Path) -> dict[str, str]:
    """Every symlink of the writer's tree (its index after ``add -A``) with its target."""
    if not root.is_dir():
        return {}
    raw = run_git(root, "ls-files", "-s", "-z").stdout.decode("utf-8", "surrogateescape")
    links = {}
    for record in raw.split("\0"):
        if record.startswith("120000 ") and "\t" in record:
            relative = record.split("\t", 1)[1]
            try:
                links[relative] = os.readlink(root / relative)
            except OSError:
                continue  # staged but gone again: nothing to follow
    return links


def encode_diff(raw: bytes) -> str:
    """The diff as text; non-UTF-8 content is kept exactly behind a ``base64:`` marker."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return "base64:" + base64.b64encode(raw).decode("ascii")


def decode_diff(text: str) -> bytes:
    if text.startswith("base64:"):
        return base64.b64decode(text[len("base64:"):])
    return text.encode("utf-8")


def capture(handle: WorkspaceHandle, isolator: str) -> Patch:
    """Stage everything in the private worktree and diff it against the base commit."""
    worktree = Path(handle.worktree or "")
    relative_root = Path(handle.root).relative_to(worktree).as_posix()
    prefix = "" if relative_root == "." else relative_root
    run_git(worktree, "add", "-A")
    toplevel_paths = git_paths(worktree, "diff", "--cached", "--name-only", "-z", "--no-renames",
                               handle.base)
    changed = sorted({_to_workspace(p, prefix) for p in toplevel_paths})
    inside = [p for p in changed if _inside(p)]
    root = Path(handle.root)
    check_symlinks(root, _tree_symlinks(root), changed=set(inside))
    relative = (f"--relative={prefix}",) if prefix else ()
    raw = run_git(worktree, "diff", "--cached", *_DIFF_FLAGS, *relative, handle.base).stdout
    return Patch(
        isolator=isolator, format=FORMAT, label=handle.label, base=handle.base,
        changed_paths=changed, diff=encode_diff(raw),
        artifacts=_artifacts(root, inside),
        preimage=_preimage(worktree, handle.base, inside, prefix),
    )


def _workspace_prefix(workspace: Path) -> str:
    proc = run_git(workspace, "rev-parse", "--show-prefix", check=False)
    if proc.returncode != 0:
        return ""
    return proc.stdout.decode("utf-8", "surrogateescape").strip().rstrip("/")


def _run_apply(workspace: Path, diff: bytes, *args: str) -> bytes:
    """``git apply <args>`` of ``diff`` as seen from ``workspace``; its stdout."""
    fd, name = tempfile.mkstemp(prefix="mmo-patch-", suffix=".diff")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(diff)
        prefix = _workspace_prefix(workspace)
        directory = (f"--directory={prefix}",) if prefix else ()
        return run_git(workspace, "apply", *args, *directory, name).stdout
    finally:
        os.unlink(name)


def _diff_paths(workspace: Path, diff: bytes) -> list[str]:
    """Every path ``git apply`` would touch, read by git's own parser (``--numstat``)."""
    raw = _run_apply(workspace, diff, "--numstat", "-z").decode("utf-8", "surrogateescape")
    prefix = _workspace_prefix(workspace)
    fields, paths = raw.split("\0"), []
    while fields:
        record = fields.pop(0)
        if not record:
            continue
        name = record.split("\t", 2)[-1]
        if name:
            paths.append(name)
        else:  # a rename or copy names both sides in the next two fields
            paths += fields[:2]
            del fields[:2]
    return [_to_workspace(p, prefix) for p in paths]


def _check_diff_paths(workspace: Path, patch: Patch, diff: bytes) -> None:
    """The diff may touch only the listed paths: those are what is checked and reversed."""
    unlisted = sorted(set(_diff_paths(workspace, diff)) - set(patch.changed_paths))
    if unlisted:
        raise ValueError(f"malformed {FORMAT} patch: its diff touches {', '.join(unlisted)}, "
                         "which changed_paths does not list; nothing was applied")


def apply(workspace: Path, patch: Patch) -> ApplyReceipt:
    """Apply with ``git apply`` after the preimage check; undo exactly if anything goes wrong.

    A diff touching a path ``changed_paths`` does not list is refused first
    (only listed paths are checked and reversed); a symlink the apply leaves
    pointing outside the workspace is refused by ``verify_postimage`` and the
    apply reversed (git itself never writes beyond a symlink).
    """
    if patch.format != FORMAT:
        raise ValueError(f"git_worktree cannot apply a {patch.format!r} patch")
    workspace = Path(workspace)
    for rel in patch.changed_paths:
        contained_path(workspace, rel)
    check_preimage(workspace, patch)
    receipt = begin_receipt(workspace, patch.changed_paths)
    if not patch.changed_paths:
        return receipt
    diff = decode_diff(patch.diff)
    _check_diff_paths(workspace, patch, diff)
    try:
        _run_apply(workspace, diff, "--binary", "--whitespace=nowarn")
        verify_postimage(workspace, patch)
    except BaseException as exc:
        try:
            reverse_apply(workspace, provisional_created(receipt))
        except PatchReversalError as reversal:
            raise reversal from exc
        raise
    return finish_receipt(receipt)

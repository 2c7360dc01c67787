"""The ``copy`` driver: a plain copy per writer, for workspaces that are not git repositories."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, field_validator

from mmo_kernel.plugin import WorkspaceIsolator
from mmo_kernel.workspace import (
    ApplyReceipt,
    Artifact,
    Patch,
    PatchReversalError,
    PathState,
    WorkspaceHandle,
    atomic_write_json,
    begin_receipt,
    check_label,
    check_preimage,
    check_symlinks,
    contained_path,
    finish_receipt,
    normalize_write_scopes,
    private_dest,
    provisional_created,
    reverse_apply,
    verify_postimage,
)

from . import fileset

WORK_DIR = "work"
MANIFEST = "base-manifest.json"


class CopyOptions(BaseModel):
    """``[workspace_isolation] options`` for ``copy``."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    exclude: list[str] = [".git"]

    @field_validator("exclude")
    @classmethod
    def _valid_globs(cls, value: list[str]) -> list[str]:
        for pattern in value:
            if not pattern.strip() or "\0" in pattern or pattern.startswith("/"):
                raise ValueError(f"exclude pattern {pattern!r} must be a non-empty relative glob")
        return value


class CopyIsolator(WorkspaceIsolator):
    """A plain copy per writer, for workspaces that are not git repositories."""

    name = "copy"
    Options = CopyOptions
    options: CopyOptions

    def prepare(
        self, workspace: Path, dest: Path, write_scope: Sequence[str], label: str
    ) -> WorkspaceHandle:
        """Copy the workspace (minus ``exclude``) under ``dest``; its manifest is the base."""
        workspace = Path(os.path.abspath(workspace))
        check_label(label)
        if not workspace.is_dir():
            raise ValueError(f"workspace {str(workspace)!r} is not a directory")
        scopes = normalize_write_scopes(workspace, write_scope)
        dest = private_dest(dest, workspace)
        work = dest / WORK_DIR
        handle = WorkspaceHandle(
            isolator=self.name, label=label, workspace=str(workspace), dest=str(dest),
            root=str(work), write_scope=scopes, base=str(dest / MANIFEST),
        )
        try:
            fileset.copy_tree(workspace, work, self.options.exclude)
            atomic_write_json(Path(handle.base), fileset.manifest(work, self.options.exclude))
        except BaseException:
            self.cleanup(handle)
            raise
        return handle

    def capture_patch(self, handle: WorkspaceHandle) -> Patch:
        """Compare the copy with the base manifest; the diff carries full after-contents.

        A symlink the writer made (or redirected) to lead outside the workspace
        is refused (``UnsafeSymlink``); the user's own links are left alone.
        """
        root = Path(handle.root)
        before = json.loads(Path(handle.base).read_text(encoding="utf-8"))
        after = fileset.manifest(root, self.options.exclude)
        changed = sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))
        links = {p: os.readlink(root / p) for p, entry in after.items()
                 if entry["kind"] == "symlink"}
        check_symlinks(root, links, changed=set(changed))
        return Patch(
            isolator=self.name, format=fileset.FORMAT, label=handle.label, base=handle.base,
            changed_paths=changed,
            diff=fileset.encode_changes(root, before, after, changed),
            artifacts=[Artifact(relative_path=p, sha256=after[p]["sha256"], bytes=_size(root, p))
                       for p in changed if p in after],
            preimage=[PathState(relative_path=p, kind=before[p]["kind"], sha256=before[p]["sha256"])
                      if p in before else PathState(relative_path=p, kind="absent")
                      for p in changed],
        )

    def apply(self, workspace: Path, patch: Patch) -> ApplyReceipt:
        """Write the file set after the preimage check; undo exactly if anything goes wrong.

        A symlink the patch would leave pointing outside the workspace is
        refused before anything is written.
        """
        if patch.format != fileset.FORMAT:
            raise ValueError(f"copy cannot apply a {patch.format!r} patch")
        workspace = Path(workspace)
        files = fileset.decode_changes(patch.diff)
        if sorted(e["relative_path"] for e in files) != patch.changed_paths:
            raise ValueError("malformed mmo-file-set patch: files do not match changed_paths")
        for rel in patch.changed_paths:
            contained_path(workspace, rel)
        links = {e["relative_path"]: os.fsdecode(e["after"]["content"]) for e in files
                 if e["after"]["kind"] == "symlink"}
        check_symlinks(workspace, links, overlay={**dict.fromkeys(patch.changed_paths), **links},
                       note="refused at integration: nothing was applied")
        check_preimage(workspace, patch)
        receipt = begin_receipt(workspace, patch.changed_paths)
        try:
            fileset.write_changes(workspace, files)
            verify_postimage(workspace, patch)
        except BaseException as exc:
            try:
                reverse_apply(workspace, provisional_created(receipt))
            except PatchReversalError as reversal:
                raise reversal from exc
            raise
        return finish_receipt(receipt)

    def cleanup(self, handle: WorkspaceHandle) -> None:
        """Remove the copy and its manifest; safe to repeat."""
        dest = Path(handle.dest)
        for path in (dest / WORK_DIR, Path(handle.base)):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            elif os.path.lexists(path):
                path.unlink()
        if dest.is_dir() and not any(dest.iterdir()):
            dest.rmdir()


def _size(root: Path, relative: str) -> int:
    path = root / relative
    return len(os.readlink(path).encode()) if path.is_symlink() else path.lstat().st_size

"""The patch model shared by every workspace isolator, and the exact-reversal engine.

An isolator captures a writer's changes as a ``Patch`` against the base it
prepared (spec 06). Integration checks the canonical workspace still holds
the patch's *preimage*, applies, and keeps an ``ApplyReceipt`` with a backup
of every path it touches, so a failed transaction can restore the workspace
byte for byte. These helpers are filesystem-only so every isolator shares them.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import stat
from collections import deque
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from mmo_kernel.state.files import atomic_write_bytes

PathKind = Literal["absent", "file", "symlink", "dir", "other"]


def check_relative_path(value: str) -> str:
    """A safe workspace-relative POSIX path: no absolute path, no ``..``, nothing in ``.git``.

    ``..`` is checked before normalization so its refusal says why (``a/../b``
    is not merely "unnormalized": it names a parent directory).
    """
    if not value or value.startswith("/") or "\0" in value:
        raise ValueError(f"unsafe patch path {value!r}: must be a relative path")
    parts = value.split("/")
    if ".." in parts:
        raise ValueError(f"unsafe patch path {value!r}: '..' would leave the workspace")
    if posixpath.normpath(value) != value:
        raise ValueError(f"unsafe patch path {value!r}: must be a normalized relative path")
    if ".git" in parts:
        raise ValueError(f"unsafe patch path {value!r}: git metadata is never patched")
    return value


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class WorkspaceHandle(_Model):
    """Where one writer works; persisted in the job record so cleanup survives restarts."""

    isolator: str
    label: str
    workspace: str
    dest: str
    root: str = Field(description="the directory the writer works in (its cwd)")
    write_scope: list[str]
    base: str = Field(
        description="git: the base commit (HEAD plus in-scope dirty state); copy: manifest path"
    )
    branch: str | None = None
    worktree: str | None = None
    repo_root: str | None = None


class Artifact(_Model):
    """One changed file that exists after the change (spec 04 ``artifacts``)."""

    relative_path: str
    sha256: str
    bytes: int


class PathState(_Model):
    """What a path held in the base: the preimage a canonical workspace must still match."""

    relative_path: str
    kind: PathKind
    sha256: str | None = None


class Patch(_Model):
    """A writer's change set; ``diff`` is git's ``--binary`` diff or a self-contained file set."""

    isolator: str
    format: Literal["git-binary-diff", "mmo-file-set"]
    label: str
    base: str
    changed_paths: list[str]
    diff: str
    artifacts: list[Artifact]
    preimage: list[PathState]

    @field_validator("changed_paths")
    @classmethod
    def _sorted_unique(cls, value: list[str]) -> list[str]:
        if value != sorted(set(value)):
            raise ValueError("changed_paths must be sorted and unique")
        return value


class Backup(_Model):
    """A path's exact pre-apply content, kept so a failed integration can restore it."""

    model_config = ConfigDict(extra="forbid", frozen=True, ser_json_bytes="base64",
                              val_json_bytes="base64")

    relative_path: str
    kind: Literal["file", "symlink"]
    mode: int
    content: bytes = Field(repr=False)


class ApplyReceipt(_Model):
    """What ``apply`` did to the canonical workspace, enough to reverse it exactly."""

    model_config = ConfigDict(extra="forbid", frozen=True, ser_json_bytes="base64",
                              val_json_bytes="base64")

    workspace: str
    changed_paths: list[str]
    created_files: list[str] = Field(default_factory=list)
    created_dirs: list[str] = Field(default_factory=list)
    modified_files: list[str] = Field(default_factory=list)
    deleted_files: list[str] = Field(default_factory=list)
    dir_modes: dict[str, int] = Field(default_factory=dict, description="pre-existing parents")
    backups: list[Backup] = Field(default_factory=list, repr=False)


class PreimageMismatch(RuntimeError):
    """The canonical workspace changed since the writer's base; nothing was applied."""

    def __init__(self, paths: Sequence[str]) -> None:
        self.paths = sorted(paths)
        super().__init__(
            "workspace no longer matches the patch preimage (it changed since the writer "
            "started) for: " + ", ".join(self.paths) + "; nothing was applied"
        )


class PatchReversalError(RuntimeError):
    """Undoing an applied patch failed; the workspace may hold part of the change."""

    def __init__(self, paths: Sequence[str], detail: str = "", partial: bool = False) -> None:
        self.paths = sorted(set(paths))
        self.partial = partial
        tail = f" ({detail})" if detail else ""
        super().__init__("could not reverse the applied patch for: " + ", ".join(self.paths) + tail)


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def contained_path(root: Path, relative: str) -> Path:
    """``root/relative`` after refusing paths whose parents leave ``root`` through a symlink."""
    check_relative_path(relative)
    target = Path(root) / relative
    real_root = Path(root).resolve()
    parent = target.parent.resolve(strict=False)
    if parent != real_root and real_root not in parent.parents:
        raise ValueError(
            f"unsafe patch path {relative!r}: its directory leaves the workspace via a symlink"
        )
    return target


def read_state(root: Path, relative: str) -> tuple[PathKind, str | None, bytes | None, int]:
    """``(kind, sha256, content, mode)`` of a path; symlinks hash their target text."""
    path = contained_path(root, relative)
    try:
        info = path.lstat()
    except FileNotFoundError:
        return "absent", None, None, 0
    except NotADirectoryError:
        return "absent", None, None, 0
    mode = stat.S_IMODE(info.st_mode)
    if stat.S_ISLNK(info.st_mode):
        data = os.fsencode(os.readlink(path))
        return "symlink", sha256_bytes(data), data, mode
    if stat.S_ISREG(info.st_mode):
        data = path.read_bytes()
        return "file", sha256_bytes(data), data, mode
    if stat.S_ISDIR(info.st_mode):
        return "dir", None, None, mode
    return "other", None, None, mode


MAX_SYMLINK_HOPS = 40
"""Like the kernel's own limit: a longer chain of links is refused, not followed."""


class UnsafeSymlink(ValueError):
    """A patch would leave a symlink that leads outside the workspace (spec 06).

    ``links`` maps each refused link's relative path to ``(target, why)``.
    """

    def __init__(self, links: Mapping[str, tuple[str, str]], note: str = "") -> None:
        self.links = dict(sorted(links.items()))
        named = "; ".join(f"{path} -> {target} ({why})"
                          for path, (target, why) in self.links.items())
        tail = f"; {note}" if note else ""
        super().__init__(f"unsafe symlink in patch: {named}; a symlink must be relative and "
                         f"stay inside the workspace{tail}")


def _link_at(root: Path, relative: str, overlay: Mapping[str, str | None]) -> str | None:
    """The target of the link at ``relative`` (the overlay, i.e. the patch, wins), else None.

    Under a path the overlay changes, only the overlay counts: what is on disk
    there now is what the patch replaces.
    """
    if relative in overlay:
        return overlay[relative]
    if any(parent in overlay for parent in _parents(relative)):
        return None
    try:
        info = os.lstat(Path(root) / relative)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return os.readlink(Path(root) / relative) if stat.S_ISLNK(info.st_mode) else None


def symlink_escape(root: Path, relative: str, target: str,
                   overlay: Mapping[str, str | None] | None = None) -> tuple[str | None, list[str]]:
    """Why the link ``relative -> target`` would lead outside ``root`` (None: it stays inside),
    and the other links its resolution went through.

    Resolution is the kernel's, done by hand so nothing outside ``root`` is
    ever touched: component by component from the link's directory, following
    links met on the way (``overlay`` first, then the disk), ``..`` popping a
    component; leaving ``root`` at any step is an escape, even if a later
    component would come back.
    """
    followed: list[str] = []
    if target.startswith("/"):
        return "absolute target", followed
    current: list[str] = []
    pending = deque(relative.split("/")[:-1] + target.split("/"))
    while pending:
        name = pending.popleft()
        if name in ("", "."):
            continue
        if name == "..":
            if not current:
                via = f" through {followed[-1]}" if followed else ""
                return f"leaves the workspace{via}", followed
            current.pop()
            continue
        path = "/".join([*current, name])
        link = _link_at(root, path, overlay or {})
        if link is None:
            current.append(name)
            continue
        followed.append(path)
        if len(followed) > MAX_SYMLINK_HOPS:
            return f"more than {MAX_SYMLINK_HOPS} levels of symlinks", followed
        if link.startswith("/"):
            return f"leaves the workspace through {path} -> {link}", followed
        pending.extendleft(reversed(link.split("/")))
    return None, followed


def check_symlinks(root: Path, links: Mapping[str, str], *,
                   overlay: Mapping[str, str | None] | None = None,
                   changed: Collection[str] | None = None, note: str = "") -> None:
    """Refuse (``UnsafeSymlink``) links that lead outside ``root``.

    With ``changed``, only escapes the patch is responsible for count: a link
    it changed, or an unchanged one whose resolution now goes through a link
    it changed. The user's own links elsewhere stay as they are.
    """
    refused = {}
    for relative, target in links.items():
        why, followed = symlink_escape(root, relative, target, overlay)
        if why is None:
            continue
        if changed is None or relative in changed or set(followed) & set(changed):
            refused[relative] = (target, why)
    if refused:
        raise UnsafeSymlink(refused, note)


def check_applied_symlinks(workspace: Path, changed_paths: Iterable[str], note: str = "") -> None:
    """After an apply: every changed path that is now a symlink must stay inside."""
    root = Path(workspace)
    links = {}
    for rel in changed_paths:
        info = _lstat(contained_path(root, rel))
        if info is not None and stat.S_ISLNK(info.st_mode):
            links[rel] = os.readlink(root / rel)
    check_symlinks(root, links, note=note)


def check_preimage(workspace: Path, patch: Patch) -> None:
    """Refuse with ``PreimageMismatch`` naming every path that differs from the base.

    A directory where the base had no file is fine: patches track files, and
    a patch may replace a directory it empties with a file.
    """
    moved = []
    for expected in patch.preimage:
        kind, digest, _, _ = read_state(Path(workspace), expected.relative_path)
        if kind == "dir" and expected.kind == "absent":
            continue
        if (kind, digest) != (expected.kind, expected.sha256):
            moved.append(expected.relative_path)
    if moved:
        raise PreimageMismatch(moved)


def _parents(relative: str) -> list[str]:
    """Ancestor directories of a relative path, shallowest first (``a``, ``a/b``)."""
    parts = relative.split("/")[:-1]
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


def begin_receipt(workspace: Path, changed_paths: Iterable[str]) -> ApplyReceipt:
    """Snapshot every path a patch will touch, before anything is written."""
    root = Path(workspace)
    paths = sorted(set(changed_paths))
    backups, dir_modes = [], {}
    for rel in paths:
        kind, _, content, mode = read_state(root, rel)
        if kind == "other":
            raise ValueError(
                f"cannot patch {rel!r}: it is not a regular file or symlink in the workspace"
            )
        if kind == "dir":
            dir_modes[rel] = mode
        elif kind != "absent":
            backups.append(Backup(relative_path=rel, kind=kind, mode=mode, content=content or b""))
        for parent in _parents(rel):
            info = _lstat(root / parent)
            if info is not None and stat.S_ISDIR(info.st_mode):
                dir_modes[parent] = stat.S_IMODE(info.st_mode)
    return ApplyReceipt(workspace=str(root), changed_paths=paths, dir_modes=dir_modes,
                        backups=backups)


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return path.lstat()
    except (FileNotFoundError, NotADirectoryError):
        return None


def finish_receipt(receipt: ApplyReceipt) -> ApplyReceipt:
    """Record what the apply created, modified and deleted, comparing against the backups."""
    root = Path(receipt.workspace)
    before = {b.relative_path for b in receipt.backups}
    created: list[str] = []
    modified: list[str] = []
    deleted: list[str] = []
    dirs: set[str] = set()
    for rel in receipt.changed_paths:
        info = _lstat(root / rel)
        exists = info is not None and not stat.S_ISDIR(info.st_mode)
        if rel in before:
            (modified if exists else deleted).append(rel)
        elif exists:
            created.append(rel)
        for parent in _parents(rel):
            parent_info = _lstat(root / parent)
            if (parent not in receipt.dir_modes and parent_info is not None
                    and stat.S_ISDIR(parent_info.st_mode)):
                dirs.add(parent)
    return receipt.model_copy(update={
        "created_files": created, "modified_files": modified, "deleted_files": deleted,
        "created_dirs": sorted(dirs),
    })


def provisional_created(receipt: ApplyReceipt) -> ApplyReceipt:
    """A receipt for an apply that failed part-way: anything new may have been created."""
    before = {b.relative_path for b in receipt.backups}
    root = Path(receipt.workspace)
    created = [p for p in receipt.changed_paths if p not in before and _lstat(root / p) is not None]
    dirs = sorted({
        parent for rel in receipt.changed_paths for parent in _parents(rel)
        if parent not in receipt.dir_modes and _lstat(root / parent) is not None
    })
    return receipt.model_copy(update={"created_files": created, "created_dirs": dirs})


REVERSED_NOTE = "refused at integration: the apply was reversed, the workspace is unchanged"


def verify_postimage(workspace: Path, patch: Patch) -> None:
    """Check the workspace now holds exactly the patch's result (catches filters, races),
    and no changed path is a symlink leading outside it (``UnsafeSymlink``)."""
    wanted = {a.relative_path: a.sha256 for a in patch.artifacts}
    wrong = []
    for rel in patch.changed_paths:
        kind, digest, _, _ = read_state(Path(workspace), rel)
        if rel in wanted:
            if kind not in ("file", "symlink") or digest != wanted[rel]:
                wrong.append(rel)
        elif kind not in ("absent", "dir"):
            wrong.append(rel)
    if wrong:
        raise RuntimeError(
            "applied patch does not reproduce the writer's files for: " + ", ".join(sorted(wrong))
            + " (a git attribute or filter, or a concurrent writer, changed them); "
            "the apply was reversed"
        )
    check_applied_symlinks(workspace, patch.changed_paths, note=REVERSED_NOTE)


def _remove_created(root: Path, receipt: ApplyReceipt, problems: dict[str, str]) -> None:
    for rel in receipt.created_files:
        path = root / rel
        try:
            if path.is_dir() and not path.is_symlink():
                problems[rel] = "a directory now stands where the patch created a file"
            else:
                path.unlink(missing_ok=True)
        except OSError as exc:
            problems[rel] = str(exc)
    for rel in sorted(receipt.created_dirs, key=lambda p: p.count("/"), reverse=True):
        try:
            (root / rel).rmdir()
        except FileNotFoundError:
            continue
        except OSError as exc:
            problems[rel + "/"] = f"cannot remove created directory: {exc.strerror}"


def _restore_dirs(root: Path, receipt: ApplyReceipt, problems: dict[str, str]) -> None:
    for rel, mode in sorted(receipt.dir_modes.items(), key=lambda item: item[0].count("/")):
        path = root / rel
        try:
            if _lstat(path) is None:
                path.mkdir(mode=mode)
            os.chmod(path, mode)
        except OSError as exc:
            problems[rel + "/"] = str(exc)


def _restore_backup(root: Path, backup: Backup) -> None:
    path = root / backup.relative_path
    info = _lstat(path)
    if info is not None and stat.S_ISDIR(info.st_mode):
        raise IsADirectoryError(f"a directory now stands at {backup.relative_path!r}")
    if backup.kind == "symlink":
        if info is not None:
            path.unlink()
        os.symlink(os.fsdecode(backup.content), path)
        return
    if info is not None and stat.S_ISLNK(info.st_mode):
        path.unlink()
    atomic_write_bytes(path, backup.content, mode=backup.mode, redact=False)  # the user's file
    os.chmod(path, backup.mode)


def _unrestored(root: Path, receipt: ApplyReceipt) -> list[str]:
    wrong = []
    for backup in receipt.backups:
        kind, digest, _, mode = read_state(root, backup.relative_path)
        same_mode = kind == "symlink" or mode == backup.mode
        if (kind, digest) != (backup.kind, sha256_bytes(backup.content)) or not same_mode:
            wrong.append(backup.relative_path)
    for rel in receipt.created_files:
        info = _lstat(root / rel)
        if info is not None and not (rel in receipt.dir_modes and stat.S_ISDIR(info.st_mode)):
            wrong.append(rel)
    wrong += [p + "/" for p in receipt.created_dirs
              if (root / p).is_dir() and not (root / p).is_symlink()]
    return wrong


def _reversal_blockers(root: Path, receipt: ApplyReceipt) -> dict[str, str]:
    """What would stop an exact reversal, found before anything is touched."""
    blockers: dict[str, str] = {}
    ours = set(receipt.created_files) | set(receipt.created_dirs)
    for rel in receipt.created_files:
        info = _lstat(root / rel)
        if info is not None and stat.S_ISDIR(info.st_mode):
            blockers[rel] = "a directory now stands where the patch created a file"
    for rel in receipt.created_dirs:
        path = root / rel
        if path.is_dir() and not path.is_symlink():
            entries = (f"{rel}/{name}" for name in os.listdir(path))
            foreign = sorted(e for e in entries if e not in ours)
            if foreign:
                blockers[rel + "/"] = "holds files the patch did not create: " + ", ".join(foreign)
    for backup in receipt.backups:
        info = _lstat(root / backup.relative_path)
        if (info is not None and stat.S_ISDIR(info.st_mode)
                and backup.relative_path not in receipt.created_dirs):
            blockers[backup.relative_path] = "a directory the patch did not create stands here now"
    return blockers


def reverse_apply(workspace: Path, receipt: ApplyReceipt) -> None:
    """Restore the workspace to its exact pre-apply bytes, or raise ``PatchReversalError``.

    Anything that would block an exact reversal is detected first; then
    nothing is touched and the workspace keeps the applied change.
    """
    root = Path(workspace)
    if Path(receipt.workspace) != root:
        raise ValueError(f"receipt belongs to {receipt.workspace!r}, not {str(root)!r}")
    blockers = _reversal_blockers(root, receipt)
    if blockers:
        detail = "; ".join(f"{p}: {why}" for p, why in sorted(blockers.items()))
        raise PatchReversalError(list(blockers), detail + "; nothing was reversed")
    problems: dict[str, str] = {}
    _remove_created(root, receipt, problems)
    _restore_dirs(root, receipt, problems)
    for backup in receipt.backups:
        try:
            _restore_backup(root, backup)
        except OSError as exc:
            problems[backup.relative_path] = str(exc)
    for rel in _unrestored(root, receipt):
        problems.setdefault(rel, "content differs from before the apply")
    if problems:
        detail = "; ".join(f"{p}: {why}" for p, why in sorted(problems.items()))
        raise PatchReversalError(list(problems), detail + "; the workspace is partly reversed",
                                 partial=True)


_LABEL_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def check_label(label: str) -> str:
    """A writer label (usually the job id) usable as a branch and directory name."""
    if (not isinstance(label, str) or not label or len(label) > 120
            or not set(label) <= _LABEL_CHARS
            or label[0] in ".-" or ".." in label or label.endswith(".lock")):
        raise ValueError(
            f"invalid workspace label {label!r}: use 1-120 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return label


def private_dest(dest: Path, workspace: Path) -> Path:
    """Create the writer's private dir: inside MMO's state dir, outside the workspace, empty."""
    from mmo_kernel.state.paths import ensure_private_dir, state_dir

    target = Path(os.path.abspath(dest))
    state = state_dir().resolve()
    real = target.resolve(strict=False)
    if real != state and state not in real.parents:
        raise ValueError(
            f"writer workspace {str(target)!r} must be inside the MMO state dir {str(state)!r}"
        )
    ws = Path(workspace).resolve()
    if real == ws or ws in real.parents:
        raise ValueError(
            f"writer workspace {str(target)!r} must not be inside the workspace {str(ws)!r}"
        )
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise ValueError(f"writer workspace {str(target)!r} already exists and is not empty")
    return ensure_private_dir(target)

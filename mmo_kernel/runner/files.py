"""File executors of the runner (spec 12 "Files"): fenced reads, guarded edits, transfers.

``read_files`` pages a UTF-8 file by lines and names each page's file revision
(``sha256:<hex>`` of its bytes), so a host can page through a file without
losing or repeating a line and can prove which bytes it read. Edits are checked
against the bytes on disk at apply time and written atomically (temp file in
the same directory, then rename, mode kept); one failing change writes
nothing. Every path goes through ``mmo_kernel.project_tools.paths`` (no
absolute paths, no ``..``, no symlinks, regular files only) and every message
names only project-relative paths.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import hashlib
import os
import secrets
import stat
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mmo_kernel.project_tools.envelope import ToolFailure, suggested
from mmo_kernel.project_tools.paths import (
    check_leaf,
    leaf_stat,
    open_parent,
    open_regular,
    os_failure,
    shown,
    split_relative,
)
from mmo_kernel.runner.context import CallContext, Project

DEFAULT_LIMIT = 400
MAX_LIMIT = 2000
MAX_ITEMS = 20
PAGE_BYTES = 256 * 1024
MAX_CHANGE_BYTES = 4 * 1024 * 1024
MAX_CHANGES = 50
MAX_ARTIFACT_BYTES = 256 * 1024 * 1024
CHUNK = 1024 * 1024
REVISION_PREFIX = "sha256:"
_M = TypeVar("_M", bound=BaseModel)


# ---------------------------------------------------------------- argument models

class _Args(BaseModel):
    """Forwarded arguments: ``project``/``session_id`` and friends are already resolved."""

    model_config = ConfigDict(extra="ignore")


class _Item(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str
    limit: int | None = Field(default=None, ge=1, le=MAX_LIMIT)
    cursor: int | None = Field(default=None, ge=0)
    expected_read_revision: str | None = None


class _ReadArgs(_Args):
    items: list[_Item] = Field(min_length=1, max_length=MAX_ITEMS)


class _Create(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["create"]
    path: str
    content: str


class _Replace(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["replace_exact"]
    old_text: str = Field(min_length=1)
    new_text: str


class _Edit(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["edit"]
    path: str
    expected_read_revision: str
    edits: list[_Replace] = Field(min_length=1)


class _EditArgs(_Args):
    changes: list[Annotated[_Create | _Edit, Field(discriminator="kind")]] = Field(
        min_length=1, max_length=MAX_CHANGES)


class _TransferArgs(_Args):
    source_project: str
    source_path: str
    destination_project: str
    destination_path: str
    overwrite: bool = False


class _ArtifactReadArgs(_Args):
    project: str
    path: str


class _ArtifactWriteArgs(_Args):
    project: str
    path: str
    data_b64: str
    overwrite: bool = False


def parse_arguments(model: type[_M], arguments: dict[str, Any]) -> _M:
    """Validate forwarded arguments; a failure names the field in one line."""
    try:
        return model.model_validate(arguments)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "arguments"
        raise ToolFailure("invalid_arguments", f"{where}: {first['msg']}") from None


# ---------------------------------------------------------------- helpers

def revision_of(data: bytes) -> str:
    return REVISION_PREFIX + hashlib.sha256(data).hexdigest()


def _umask() -> int:
    """The process umask without changing it (``os.umask`` is process-wide and racy)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


def _new_file_mode() -> int:
    return 0o666 & ~_umask()


_LOCKS: dict[str, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


def _project_lock(root: Path) -> threading.Lock:
    """One writer at a time per project inside this runner (calls run in worker threads)."""
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(str(root), threading.Lock())


def _project(ctx: CallContext, project_id: str, what: str) -> Project:
    project = ctx.projects.get(project_id)
    if project is None:
        if ctx.project is not None and ctx.project.id == project_id:
            return ctx.project
        raise ToolFailure("project_not_found", f"{what}: no such project on this runner")
    return project


def _call_project(ctx: CallContext, arguments: dict[str, Any]) -> Project:
    if ctx.project is not None:
        return ctx.project
    value = arguments.get("project")
    if isinstance(value, str):
        return _project(ctx, value, "project")
    raise ToolFailure("invalid_arguments", "project: field required")


def _read_all(fd: int, limit: int, rel: str) -> bytes:
    """All bytes of an open file, refusing more than ``limit``."""
    chunks: list[bytes] = []
    total = 0
    while chunk := os.read(fd, CHUNK):
        total += len(chunk)
        if total > limit:
            raise ToolFailure("invalid_arguments", f"{rel} is larger than {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _read_file(root: Path, rel: str, limit: int = MAX_ARTIFACT_BYTES) -> tuple[bytes, int, str]:
    """Bytes, permission bits and canonical path of a regular project file."""
    fd, info, canonical = open_regular(root, rel)
    try:
        return _read_all(fd, limit, canonical), stat.S_IMODE(info.st_mode), canonical
    except OSError as exc:
        raise os_failure(exc, f"cannot read {canonical}") from None
    finally:
        os.close(fd)


# ---------------------------------------------------------------- read_files

@dataclass
class _Page:
    text: str
    revision: str
    start_line: int
    end_line: int
    total_lines: int
    file_bytes: int
    line_truncated: bool


class _PageBuilder:
    """Collects lines ``[cursor, cursor + limit)`` while the whole file streams past."""

    def __init__(self, cursor: int, limit: int) -> None:
        self.cursor = cursor
        self.limit = limit
        self.lines_done = 0
        self.page = bytearray()
        self.taken = 0
        self.closed = False
        self.line_truncated = False
        self.current = bytearray()
        self.overflow = False

    def _in_range(self) -> bool:
        return (not self.closed and self.cursor <= self.lines_done
                and self.taken < self.limit)

    def feed(self, chunk: bytes) -> None:
        start, size = 0, len(chunk)
        while start < size:
            if self.closed:  # after the page: only count lines, in bulk
                self.lines_done += chunk.count(b"\n", start)
                return
            if self.lines_done < self.cursor:  # before the page: skip whole lines, in C
                need = self.cursor - self.lines_done
                rest = chunk[start:].split(b"\n", need)
                self.lines_done += len(rest) - 1
                if len(rest) <= need:
                    return
                start = size - len(rest[-1])
                continue
            nl = chunk.find(b"\n", start)
            end = size if nl < 0 else nl + 1
            self._append(chunk[start:end])
            if nl >= 0:
                self._line_end()
            start = end

    def _append(self, piece: bytes) -> None:
        room = PAGE_BYTES - len(self.page) - len(self.current)
        if len(piece) > room:
            self.current += piece[:max(room, 0) + 4]
            self.overflow = True
        else:
            self.current += piece

    def _line_end(self) -> None:
        if self._in_range():
            if not self.overflow:
                self.page += self.current
                self.taken += 1
                self.closed = self.taken >= self.limit
            elif self.taken == 0:
                # one line longer than a page: its head, cut at a character boundary
                cut = bytes(self.current[:PAGE_BYTES]).decode("utf-8", "ignore")
                self.page += cut.encode("utf-8")
                self.taken = 1
                self.line_truncated = True
                self.closed = True
            else:
                self.closed = True  # the next page starts with this line
            self.current = bytearray()
            self.overflow = False
        self.lines_done += 1


def _read_page(root: Path, rel: str, cursor: int, limit: int) -> _Page:
    fd, _info, canonical = open_regular(root, rel)
    digest = hashlib.sha256()
    decoder = codecs.getincrementaldecoder("utf-8")("strict")
    builder = _PageBuilder(cursor, limit)
    size = 0
    last = b"\n"
    try:
        while chunk := os.read(fd, CHUNK):
            if b"\0" in chunk:
                raise ToolFailure("not_a_text_file", f"{canonical} is not a text file (it "
                                  "contains NUL bytes)")
            try:
                decoder.decode(chunk)
            except UnicodeDecodeError:
                raise ToolFailure("not_a_text_file",
                                  f"{canonical} is not a UTF-8 text file") from None
            digest.update(chunk)
            size += len(chunk)
            last = chunk[-1:]
            builder.feed(chunk)
        try:
            decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            raise ToolFailure("not_a_text_file", f"{canonical} is not a UTF-8 text file") from None
    except OSError as exc:
        raise os_failure(exc, f"cannot read {canonical}") from None
    finally:
        os.close(fd)
    if last != b"\n":  # a last line without a newline is a line too
        builder._line_end()
    total = builder.lines_done
    return _Page(text=builder.page.decode("utf-8"), revision=REVISION_PREFIX + digest.hexdigest(),
                 start_line=cursor + 1, end_line=cursor + builder.taken, total_lines=total,
                 file_bytes=size, line_truncated=builder.line_truncated)


def read_files(arguments: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    """``read_files``: one page per item, per-item errors, a followable next call."""
    args = parse_arguments(_ReadArgs, arguments)
    root = _call_project(ctx, arguments).root
    raw_items = arguments.get("items") or []
    items: list[dict[str, Any]] = []
    follow: list[dict[str, Any]] = []
    for index, item in enumerate(args.items):
        cursor = item.cursor or 0
        limit = item.limit or DEFAULT_LIMIT
        try:
            page = _read_page(root, item.path, cursor, limit)
            expected = item.expected_read_revision
            if expected is not None and expected != page.revision:
                raise ToolFailure("stale_file_revision",
                                  f"{shown(item.path)} changed since it was read "
                                  f"(expected {expected[:80]}, now {page.revision}); read it "
                                  "again from the start")
        except ToolFailure as exc:
            items.append({"path": shown(item.path), "error_kind": exc.kind, "error": exc.message})
            continue
        output: dict[str, Any] = {
            "text": page.text, "read_revision": page.revision,
            "has_more": page.end_line < page.total_lines, "start_line": page.start_line,
            "end_line": page.end_line, "total_lines": page.total_lines,
            "file_bytes": page.file_bytes,
        }
        if page.line_truncated:
            output["line_truncated"] = True
        if output["has_more"]:
            output["next_cursor"] = page.end_line
            given = raw_items[index] if index < len(raw_items) else {}
            nxt = {k: v for k, v in dict(given).items() if v is not None}
            nxt.update(cursor=page.end_line, expected_read_revision=page.revision)
            follow.append(nxt)
        items.append({"path": shown(item.path), "output": output})
    result: dict[str, Any] = {"items": items}
    if follow:
        again = {k: v for k, v in arguments.items()
                 if k not in ("items", "_mmo") and v is not None}
        again["items"] = follow
        result["suggested_call"] = suggested(
            "read_files", again, True,
            "read the next page of each unfinished file at the same revision")
    return result


# ---------------------------------------------------------------- atomic writes

@dataclass
class _Staged:
    """A complete temp file beside its destination, not yet renamed into place."""

    rel: str
    leaf: str
    dir_fd: int
    tmp: str
    created_dirs: list[str] = field(default_factory=list)
    installed: bool = False
    backup: bytes | None = None
    backup_mode: int | None = None


def _stage(root: Path, parts: tuple[str, ...], rel: str, chunks: Iterable[bytes],
           new_mode: int, *, limit: int | None = None) -> tuple[_Staged, int, str]:
    """Write ``chunks`` into a temp file in the destination's directory (parents made);
    returns it with the byte count and the hex sha256. The temp file gets the mode of an
    existing destination (mode kept), else ``new_mode``."""
    dir_fd, created = open_parent(root, parts, rel, create=True)
    staged = _Staged(rel=rel, leaf=parts[-1], dir_fd=dir_fd, tmp="", created_dirs=created)
    try:
        existing = leaf_stat(dir_fd, parts[-1])
        mode = (stat.S_IMODE(existing.st_mode) if existing is not None
                and stat.S_ISREG(existing.st_mode) else new_mode)
        staged.tmp = f".{parts[-1][:64]}.mmo-{secrets.token_hex(6)}.tmp"
        fd = os.open(staged.tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                     | getattr(os, "O_CLOEXEC", 0), 0o600, dir_fd=dir_fd)
        digest, total = hashlib.sha256(), 0
        try:
            for chunk in chunks:
                total += len(chunk)
                if limit is not None and total > limit:
                    raise ToolFailure("invalid_arguments",
                                      f"{rel}: more than {limit} bytes to write")
                digest.update(chunk)
                view = memoryview(chunk)
                while view:
                    view = view[os.write(fd, view):]
            os.fsync(fd)
            os.fchmod(fd, mode)
        finally:
            os.close(fd)
    except OSError as exc:
        _discard(root, staged)
        raise os_failure(exc, f"cannot write {rel}", "runner_unavailable") from None
    except BaseException:
        _discard(root, staged)
        raise
    return staged, total, digest.hexdigest()


def _discard(root: Path, staged: _Staged, *, dirs: bool = True) -> None:
    """Remove the temp file (and with ``dirs`` the directories made for it); close its
    directory."""
    if staged.tmp:
        try:
            os.unlink(staged.tmp, dir_fd=staged.dir_fd)
        except OSError:
            pass
    if staged.dir_fd >= 0:
        os.close(staged.dir_fd)
        staged.dir_fd = -1
    if dirs:
        _remove_dirs(root, staged.created_dirs)


def _remove_dirs(root: Path, created: list[str]) -> None:
    """Remove directories this call made, innermost first, where they are still empty."""
    for rel in sorted(set(created), key=lambda r: r.count("/"), reverse=True):
        try:
            os.rmdir(Path(root).joinpath(*rel.split("/")))
        except OSError:
            pass  # no longer empty: something else uses it now


def _install(staged: _Staged, *, clobber: bool) -> None:
    """Move the temp file into place: ``rename`` when replacing, ``link`` (never clobbers)
    when the destination must not exist."""
    if clobber:
        os.rename(staged.tmp, staged.leaf, src_dir_fd=staged.dir_fd, dst_dir_fd=staged.dir_fd)
    else:
        try:
            os.link(staged.tmp, staged.leaf, src_dir_fd=staged.dir_fd, dst_dir_fd=staged.dir_fd,
                    follow_symlinks=False)
        except FileExistsError:
            raise ToolFailure("file_exists", f"{staged.rel} already exists") from None
        except OSError:  # a filesystem without hard links: check, then rename
            if leaf_stat(staged.dir_fd, staged.leaf) is not None:
                raise ToolFailure("file_exists", f"{staged.rel} already exists") from None
            os.rename(staged.tmp, staged.leaf, src_dir_fd=staged.dir_fd,
                      dst_dir_fd=staged.dir_fd)
        else:
            os.unlink(staged.tmp, dir_fd=staged.dir_fd)
    staged.tmp = ""
    staged.installed = True
    try:
        os.fsync(staged.dir_fd)
    except OSError:
        pass


def _undo(staged: _Staged) -> bool:
    """Put back what was at an installed destination; False when that failed."""
    try:
        if staged.backup is None:
            os.unlink(staged.leaf, dir_fd=staged.dir_fd)
            return True
        tmp = f".{staged.leaf[:64]}.mmo-{secrets.token_hex(6)}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600,
                     dir_fd=staged.dir_fd)
        try:
            os.write(fd, staged.backup)
            os.fchmod(fd, staged.backup_mode or _new_file_mode())
        finally:
            os.close(fd)
        os.rename(tmp, staged.leaf, src_dir_fd=staged.dir_fd, dst_dir_fd=staged.dir_fd)
        return True
    except OSError:
        return False


def _current_revision(staged: _Staged) -> str | None:
    """The revision of the destination as it is now (None when absent or not a file)."""
    try:
        fd = os.open(staged.leaf, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK,
                     dir_fd=staged.dir_fd)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        digest = hashlib.sha256()
        while chunk := os.read(fd, CHUNK):
            digest.update(chunk)
        return REVISION_PREFIX + digest.hexdigest()
    finally:
        os.close(fd)


# ---------------------------------------------------------------- edit_project_files

@dataclass
class _Planned:
    index: int
    kind: str
    rel: str
    parts: tuple[str, ...]
    data: bytes
    expected: str | None = None
    original: bytes | None = None
    original_mode: int | None = None


def _encode(text: str, rel: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        raise ToolFailure("invalid_arguments", f"text for {rel} is not valid Unicode (a lone "
                          "surrogate)") from None


def _fail_change(exc: ToolFailure, index: int, rel: str) -> ToolFailure:
    return ToolFailure(exc.kind, f"changes[{index}]: {exc.message}", exc.state_changed,
                       **{**exc.extra, "path": rel, "change_index": index})


def _apply_edits(text: str, change: _Edit, rel: str) -> str:
    for number, edit in enumerate(change.edits):
        first = text.find(edit.old_text)
        if first < 0:
            raise ToolFailure("edit_text_not_found",
                              f"edits[{number}].old_text does not occur in {rel}")
        if text.find(edit.old_text, first + 1) >= 0:
            raise ToolFailure("edit_text_not_unique",
                              f"edits[{number}].old_text occurs more than once in {rel}; "
                              "include more surrounding text")
        text = text[:first] + edit.new_text + text[first + len(edit.old_text):]
    return text


def _plan(root: Path, index: int, change: _Create | _Edit) -> _Planned:
    parts = split_relative(change.path)
    rel = "/".join(parts)
    if not parts:
        raise ToolFailure("not_a_regular_file", "the project root is a directory, not a file")
    if ".git" in parts:
        raise ToolFailure("path_outside_project",
                          f"{rel} is inside git metadata (.git); project tools never write there")
    if isinstance(change, _Create):
        data = _encode(change.content, rel)
        if len(data) > MAX_CHANGE_BYTES:
            raise ToolFailure("invalid_arguments", f"content of {rel} is over 4 MiB")
        try:
            dir_fd, _ = open_parent(root, parts, rel)
        except ToolFailure as exc:
            if exc.kind != "file_not_found":
                raise
            return _Planned(index, "create", rel, parts, data)  # parents made at apply
        try:
            info = leaf_stat(dir_fd, parts[-1])
        finally:
            os.close(dir_fd)
        if info is not None:
            if stat.S_ISLNK(info.st_mode) or not stat.S_ISREG(info.st_mode):
                check_leaf(info, rel, must_exist=True, regular=True)
            raise ToolFailure("file_exists", f"{rel} already exists; edit it with an "
                              "expected_read_revision from read_files instead")
        return _Planned(index, "create", rel, parts, data)
    size = sum(len(_encode(e.new_text, rel)) for e in change.edits)
    if size > MAX_CHANGE_BYTES:
        raise ToolFailure("invalid_arguments", f"new_text of the edits of {rel} is over 4 MiB")
    original, mode, _ = _read_file(root, rel)
    current = revision_of(original)
    if current != change.expected_read_revision:
        raise ToolFailure("stale_file_revision",
                          f"{rel} changed since it was read (expected "
                          f"{change.expected_read_revision[:80]}, now {current}); read it again")
    try:
        text = original.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolFailure("not_a_text_file", f"{rel} is not a UTF-8 text file") from None
    data = _encode(_apply_edits(text, change, rel), rel)
    return _Planned(index, "edit", rel, parts, data, expected=current, original=original,
                    original_mode=mode)


def _commit_changes(root: Path, plans: list[_Planned]) -> list[dict[str, Any]]:
    """Stage every change, re-check every base, then install all (or nothing)."""
    staged: list[tuple[_Planned, _Staged]] = []
    try:
        for plan in plans:
            try:
                item, _, _ = _stage(root, plan.parts, plan.rel, [plan.data], _new_file_mode())
            except ToolFailure as exc:
                raise _fail_change(exc, plan.index, plan.rel) from None
            item.backup, item.backup_mode = plan.original, plan.original_mode
            staged.append((plan, item))
        for plan, item in staged:  # the bytes on disk right before the renames
            now = _current_revision(item)
            if plan.kind == "edit" and now != plan.expected:
                raise _fail_change(ToolFailure(
                    "stale_file_revision", f"{plan.rel} changed while the edit was applied; "
                    "read it again"), plan.index, plan.rel)
            if plan.kind == "create" and leaf_stat(item.dir_fd, item.leaf) is not None:
                raise _fail_change(ToolFailure("file_exists", f"{plan.rel} already exists"),
                                   plan.index, plan.rel)
        for plan, item in staged:
            try:
                _install(item, clobber=plan.kind == "edit")
            except ToolFailure as exc:
                raise _fail_change(exc, plan.index, plan.rel) from None
            except OSError as exc:
                raise _fail_change(os_failure(exc, f"cannot write {plan.rel}",
                                              "runner_unavailable"),
                                   plan.index, plan.rel) from None
    except BaseException as exc:
        undone = all([_undo(item) for _, item in staged if item.installed])
        for _, item in staged:
            _discard(root, item, dirs=False)  # temp files first, then the directories made
        _remove_dirs(root, [d for _, item in staged for d in item.created_dirs])
        if not undone and isinstance(exc, ToolFailure):
            raise ToolFailure(exc.kind, exc.message + "; earlier changes could not be undone",
                              "unknown", **exc.extra) from None
        raise
    items = []
    for plan, item in staged:
        os.close(item.dir_fd)
        items.append({"path": plan.rel, "kind": plan.kind, "read_revision": revision_of(plan.data),
                      "file_bytes": len(plan.data)})
    return items


def edit_project_files(arguments: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    """``edit_project_files``: all changes checked against the bytes on disk, then written
    atomically; any failure writes nothing (``state_changed = false``)."""
    args = parse_arguments(_EditArgs, arguments)
    root = _call_project(ctx, arguments).root
    seen: dict[str, int] = {}
    for index, change in enumerate(args.changes):
        try:
            rel = "/".join(split_relative(change.path, what="path"))
        except ToolFailure as exc:
            raise _fail_change(exc, index, shown(change.path)) from None
        if rel in seen:
            raise ToolFailure("invalid_arguments", f"changes[{index}].path: {rel} is already "
                              f"changed by changes[{seen[rel]}]; combine the edits into one change")
        seen[rel] = index
    with _project_lock(root):
        plans = []
        for index, change in enumerate(args.changes):
            try:
                plans.append(_plan(root, index, change))
            except ToolFailure as exc:
                raise _fail_change(exc, index, "/".join(split_relative(change.path))) from None
        items = _commit_changes(root, plans)
    return {"changed": True, "state_changed": True, "items": items}


# ---------------------------------------------------------------- transfers

def _chunks_of(fd: int, limit: int, rel: str) -> Iterator[bytes]:
    total = 0
    while chunk := os.read(fd, CHUNK):
        total += len(chunk)
        if total > limit:
            raise ToolFailure("invalid_arguments", f"{rel} is over 256 MiB; "
                              "transfer_project_artifact copies at most 256 MiB")
        yield chunk


def _write_artifact(root: Path, rel_in: str, chunks: Iterable[bytes], mode: int,
                    overwrite: bool, what: str) -> dict[str, Any]:
    """Write a destination file atomically; ``destination_exists`` unless ``overwrite``."""
    parts = split_relative(rel_in, what=what)
    rel = "/".join(parts)
    if not parts:
        raise ToolFailure("not_a_regular_file", f"{what}: the project root is a directory")
    if ".git" in parts:
        raise ToolFailure("path_outside_project",
                          f"{rel} is inside git metadata (.git); project tools never write there")
    with _project_lock(root):
        try:
            dir_fd, _ = open_parent(root, parts, rel)
        except ToolFailure as exc:
            if exc.kind != "file_not_found":
                raise
        else:
            try:
                info = leaf_stat(dir_fd, parts[-1])
            finally:
                os.close(dir_fd)
            if info is not None:
                check_leaf(info, rel, must_exist=True, regular=True)
                if not overwrite:
                    raise ToolFailure("destination_exists", f"{rel} already exists; pass "
                                      "overwrite = true to replace it")
        staged, total, digest = _stage(root, parts, rel, chunks, mode,
                                       limit=MAX_ARTIFACT_BYTES)
        try:
            _install(staged, clobber=overwrite)
        except ToolFailure as exc:
            _discard(root, staged)
            raise ToolFailure("destination_exists", exc.message) from None
        except OSError as exc:
            _discard(root, staged)
            raise os_failure(exc, f"cannot write {rel}", "runner_unavailable") from None
        os.close(staged.dir_fd)
    return {"file_bytes": total, "sha256": digest, "state_changed": True}


def transfer_project_artifact(arguments: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    """Same-runner transfer: stream the source into the destination, byte exact."""
    args = parse_arguments(_TransferArgs, arguments)
    source = _project(ctx, args.source_project, "source_project")
    destination = _project(ctx, args.destination_project, "destination_project")
    fd, info, rel = open_regular(source.root, args.source_path)
    try:
        if info.st_size > MAX_ARTIFACT_BYTES:
            raise ToolFailure("invalid_arguments", f"{rel} is over 256 MiB; "
                              "transfer_project_artifact copies at most 256 MiB")
        mode = stat.S_IMODE(info.st_mode) & ~_umask() & 0o777
        return _write_artifact(destination.root, args.destination_path,
                               _chunks_of(fd, MAX_ARTIFACT_BYTES, rel), mode, args.overwrite,
                               "destination_path")
    finally:
        os.close(fd)


def artifact_read(arguments: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    """Internal (router-only): one file's bytes for a cross-runner transfer."""
    args = parse_arguments(_ArtifactReadArgs, arguments)
    root = _call_project(ctx, arguments).root
    data, _mode, _rel = _read_file(root, args.path)
    return {"data_b64": base64.b64encode(data).decode("ascii"),
            "sha256": hashlib.sha256(data).hexdigest(), "file_bytes": len(data)}


def artifact_write(arguments: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    """Internal (router-only): the destination half of a cross-runner transfer."""
    args = parse_arguments(_ArtifactWriteArgs, arguments)
    root = _call_project(ctx, arguments).root
    if len(args.data_b64) > (MAX_ARTIFACT_BYTES // 3 + 1) * 4:
        raise ToolFailure("invalid_arguments", "data_b64 is over 256 MiB")
    try:
        data = base64.b64decode(args.data_b64, validate=True)
    except (binascii.Error, ValueError):
        raise ToolFailure("invalid_arguments", "data_b64 is not valid base64") from None
    return _write_artifact(root, args.path, [data], _new_file_mode(), args.overwrite, "path")

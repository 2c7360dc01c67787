"""Project-relative path rules for every project tool (spec 12, "Path rules").

A tool path is project-relative POSIX: never absolute, never with a ``..``
component, never through a symlink below the project root, and (for file
tools) a regular file. Checks walk the path one component at a time with
``O_NOFOLLOW`` directory descriptors, so a symlink planted between a check and
the use of a path is refused instead of followed. Error messages name only the
project-relative path, or ``<path>`` when the caller's path was absolute: an
absolute path of the runner's machine never leaves it.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from pathlib import Path

from mmo_kernel.project_tools.envelope import ToolFailure

HIDDEN = "<path>"
_ABSOLUTE = re.compile(r"(?<![\w.<])/[^\s'\",;:()]+")
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0) | getattr(
    os, "O_NONBLOCK", 0)
"""``O_NONBLOCK`` so opening a FIFO planted at the path cannot hang the call."""


def os_failure(exc: OSError, what: str, default: str = "file_not_found") -> ToolFailure:
    """An OS error on a project path as a tool failure; ``what`` names the action and the
    project-relative path (``cannot read a.txt``), the OS text says why (no paths)."""
    code = exc.errno
    if code in (errno.EACCES, errno.EPERM, errno.EROFS):
        kind = "permission_denied"
    elif code in (errno.ENOTDIR, errno.EISDIR, errno.ELOOP):
        kind = "not_a_regular_file"
    elif code == errno.ENOENT:
        kind = "file_not_found"
    else:
        kind = default
    return ToolFailure(kind, f"{what}: {exc.strerror or type(exc).__name__}")


def shown(rel: object) -> str:
    """How a caller's path may appear in an output: as given unless absolute."""
    text = rel if isinstance(rel, str) else str(rel)
    return HIDDEN if text.startswith("/") else text


def split_relative(rel: object, *, what: str = "path") -> tuple[str, ...]:
    """The normalized components of a project-relative path, or ``ToolFailure``.

    Empty and ``.`` components are dropped (``./a//b`` is ``a/b``); an absolute
    path or any ``..`` component is ``path_outside_project``.
    """
    if not isinstance(rel, str) or not rel:
        raise ToolFailure("invalid_arguments", f"{what} must be a non-empty string")
    if "\0" in rel:
        raise ToolFailure("invalid_arguments", f"{what} must not contain a NUL byte")
    if rel.startswith("/"):
        raise ToolFailure("path_outside_project",
                          f"{what} must be relative to the project root, not absolute: {HIDDEN}")
    parts = tuple(p for p in rel.split("/") if p not in ("", "."))
    if ".." in parts:
        raise ToolFailure("path_outside_project", f"{what} must not contain '..': {rel}")
    return parts


def normalize(rel: object, *, what: str = "path") -> str:
    """The canonical POSIX form (``a/b``) of a project-relative path; ``""`` is the root."""
    return "/".join(split_relative(rel, what=what))


def _check_writable(parts: tuple[str, ...], rel: str) -> None:
    """Writes into git metadata would let a ``write`` scope plant hooks (code execution)."""
    if ".git" in parts:
        raise ToolFailure("path_outside_project",
                          f"{rel} is inside git metadata (.git); project tools never write there")


def open_parent(root: Path, parts: tuple[str, ...], rel: str, *, create: bool = False,
                ) -> tuple[int, list[str]]:
    """An ``O_NOFOLLOW`` descriptor of the directory holding ``parts[-1]``.

    With ``create`` missing directories are made (the second value lists them,
    project-relative, outermost first, so a failed write can remove them again).
    The caller closes the descriptor.
    """
    created: list[str] = []
    try:
        fd = os.open(root, _DIR_FLAGS)
    except OSError:
        raise ToolFailure("file_not_found",
                          f"the project root is not available for {rel}") from None
    try:
        for depth, name in enumerate(parts[:-1]):
            here = "/".join(parts[: depth + 1])
            try:
                info = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                if not create:
                    raise ToolFailure("file_not_found", f"no such file: {rel}") from None
                try:
                    os.mkdir(name, 0o777, dir_fd=fd)
                except FileExistsError:
                    pass  # made concurrently: the checks below still apply
                except OSError as exc:
                    raise os_failure(exc, f"cannot create directory {here}",
                                     "runner_unavailable") from None
                else:
                    created.append(here)
                info = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except OSError as exc:
                raise os_failure(exc, f"cannot reach {rel}") from None
            if stat.S_ISLNK(info.st_mode):
                raise ToolFailure("path_outside_project",
                                  f"{rel} goes through a symlink ({here}); symlinks below the "
                                  "project root are never followed")
            if not stat.S_ISDIR(info.st_mode):
                if create:
                    raise ToolFailure("not_a_regular_file", f"{here} is not a directory ({rel})")
                raise ToolFailure("file_not_found", f"no such file: {rel} ({here} is not a "
                                  "directory)")
            try:
                child = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise ToolFailure("path_outside_project",
                                      f"{rel} goes through a symlink ({here})") from None
                raise os_failure(exc, f"cannot reach {rel}") from None
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        for here in reversed(created):  # a failed walk leaves no new directories behind
            try:
                os.rmdir(Path(root).joinpath(*here.split("/")))
            except OSError:
                pass
        raise
    return fd, created


def leaf_stat(dir_fd: int, name: str) -> os.stat_result | None:
    """``lstat`` of ``name`` in ``dir_fd``; None when it does not exist."""
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def check_leaf(info: os.stat_result | None, rel: str, *, must_exist: bool,
               regular: bool) -> None:
    """The rules for the last component: exists (when asked), not a symlink, a regular file."""
    if info is None:
        if must_exist:
            raise ToolFailure("file_not_found", f"no such file: {rel}")
        return
    if stat.S_ISLNK(info.st_mode):
        raise ToolFailure("not_a_regular_file",
                          f"{rel} is a symlink; symlinks below the project root are never followed")
    if regular and not stat.S_ISREG(info.st_mode):
        what = "a directory" if stat.S_ISDIR(info.st_mode) else "a special file"
        raise ToolFailure("not_a_regular_file", f"{rel} is {what}, not a regular file")


def resolve_in_project(root: Path, rel: str, *, must_exist: bool = True, regular: bool = True,
                       write: bool = False) -> Path:
    """The absolute path of ``rel`` inside ``root`` once every rule holds.

    ``must_exist=False`` allows a missing leaf (and missing parents); ``regular=False``
    allows any non-symlink leaf (e.g. a directory ``cwd``); ``write`` also refuses git
    metadata. The returned path is for local use only: never put it in an output.
    """
    parts = split_relative(rel)
    canonical = "/".join(parts)
    if write:
        _check_writable(parts, canonical)
    if not parts:
        if regular:
            raise ToolFailure("not_a_regular_file", "the project root is a directory, not a "
                              "regular file")
        return Path(root)
    try:
        fd, _ = open_parent(Path(root), parts, canonical)
    except ToolFailure as exc:
        if exc.kind == "file_not_found" and not must_exist:
            return Path(root).joinpath(*parts)
        raise
    try:
        check_leaf(leaf_stat(fd, parts[-1]), canonical, must_exist=must_exist, regular=regular)
    finally:
        os.close(fd)
    return Path(root).joinpath(*parts)


def open_regular(root: Path, rel: str) -> tuple[int, os.stat_result, str]:
    """A read descriptor of the regular file ``rel`` (never through a symlink), its
    ``fstat`` and the canonical relative path. The caller closes the descriptor."""
    parts = split_relative(rel)
    canonical = "/".join(parts)
    if not parts:
        raise ToolFailure("not_a_regular_file", "the project root is a directory, not a "
                          "regular file")
    dir_fd, _ = open_parent(Path(root), parts, canonical)
    try:
        check_leaf(leaf_stat(dir_fd, parts[-1]), canonical, must_exist=True, regular=True)
        try:
            fd = os.open(parts[-1], _FILE_FLAGS, dir_fd=dir_fd)
        except FileNotFoundError:
            raise ToolFailure("file_not_found", f"no such file: {canonical}") from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise ToolFailure("not_a_regular_file", f"{canonical} is a symlink") from None
            raise os_failure(exc, f"cannot open {canonical}") from None
    finally:
        os.close(dir_fd)
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):  # swapped after the check
        os.close(fd)
        raise ToolFailure("not_a_regular_file", f"{canonical} is not a regular file")
    os.set_blocking(fd, True)
    return fd, info, canonical


def display_path(root: Path, p: Path | str) -> str:
    """``p`` as project-relative POSIX when it lies inside ``root``, else ``<path>``."""
    try:
        relative = Path(os.path.abspath(p)).relative_to(os.path.abspath(root))
    except ValueError:
        return HIDDEN
    text = relative.as_posix()
    return "." if text in ("", ".") else text


def scrub(text: str, root: Path) -> str:
    """``text`` with paths below the project root made relative and every other absolute
    path replaced by ``<path>``: for messages that quote an OS or git error."""
    base = os.path.abspath(root)
    out = text.replace(base + "/", "").replace(base, ".")
    return _ABSOLUTE.sub(HIDDEN, out)

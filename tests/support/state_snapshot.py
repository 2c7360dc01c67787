"""Byte-for-byte, mtime-for-mtime pictures of a state dir, to prove a read wrote nothing."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any


def snapshot(root: Path) -> dict[str, tuple[Any, ...]]:
    """Every entry under ``root`` (``root`` too; symlinks not followed): its type, mode,
    size, ``st_mtime_ns`` and inode, a regular file's bytes and a directory's listing.
    Lock files, the listing index, its WAL and shared memory are entries like any other."""
    out: dict[str, tuple[Any, ...]] = {}
    for directory, dirs, files in os.walk(root):
        for name in (".", *dirs, *files):
            path = Path(directory) / name
            info = os.lstat(path)
            if stat.S_ISREG(info.st_mode):
                content: Any = path.read_bytes()
            elif stat.S_ISDIR(info.st_mode):
                content = tuple(sorted(os.listdir(path)))
            else:
                content = None
            key = os.path.relpath(path, root)
            out[key] = (stat.S_IFMT(info.st_mode), info.st_mode, info.st_size,
                        info.st_mtime_ns, info.st_ino, content)
    return out


def changes(before: dict[str, tuple[Any, ...]],
            after: dict[str, tuple[Any, ...]]) -> list[str]:
    """The entries created, removed or changed between two snapshots (empty: none)."""
    return sorted(key for key in before.keys() | after.keys()
                  if before.get(key) != after.get(key))

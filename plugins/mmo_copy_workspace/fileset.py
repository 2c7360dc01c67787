"""Manifests of a directory tree and the self-contained ``mmo-file-set`` patch format.

A manifest maps each relative path to ``{kind, sha256, mode}`` (symlinks
hash their target text and are never followed). The patch's ``diff`` is a
JSON document holding, per changed path, the before state and the complete
after content (base64), so applying needs nothing but the patch itself.
"""

from __future__ import annotations

import base64
import fnmatch
import json
import os
import shutil
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from mmo_kernel.workspace import atomic_write_bytes, contained_path, read_state

FORMAT: Final = "mmo-file-set"
FORMAT_VERSION = "mmo-file-set/1"
ALWAYS_EXCLUDED = ".git"


def excluded(relative: str, patterns: Sequence[str]) -> bool:
    """A path is excluded when its name or its whole relative path matches a glob."""
    name = relative.rsplit("/", 1)[-1]
    if name == ALWAYS_EXCLUDED:
        return True
    return any(fnmatch.fnmatchcase(name, p) or fnmatch.fnmatchcase(relative, p) for p in patterns)


def _walk(root: Path, patterns: Sequence[str]) -> list[str]:
    """Relative paths of regular files and symlinks under ``root``, excluded ones pruned."""
    found = []
    for current, dirs, files in os.walk(root, followlinks=False):
        rel_dir = Path(current).relative_to(root).as_posix()
        prefix = "" if rel_dir == "." else rel_dir + "/"
        keep = []
        for name in dirs:
            rel = prefix + name
            if excluded(rel, patterns):
                continue
            if os.path.islink(os.path.join(current, name)):
                found.append(rel)
            else:
                keep.append(name)
        dirs[:] = keep
        for name in files:
            rel = prefix + name
            if not excluded(rel, patterns):
                found.append(rel)
    return sorted(found)


def manifest(root: Path, patterns: Sequence[str]) -> dict[str, dict[str, Any]]:
    """``{relative_path: {kind, sha256, mode}}`` for every file and symlink (nothing else)."""
    entries = {}
    for rel in _walk(root, patterns):
        kind, digest, _, mode = read_state(root, rel)
        if kind in ("file", "symlink"):
            entries[rel] = {"kind": kind, "sha256": digest, "mode": mode if kind == "file" else 0}
    return entries


def copy_tree(source: Path, target: Path, patterns: Sequence[str]) -> None:
    """Copy files and symlinks (as symlinks) with their modes; skip excluded and special files."""
    target.mkdir(parents=True, exist_ok=True)
    for rel in _walk(source, patterns):
        src, dst = source / rel, target / rel
        info = src.lstat()
        dst.parent.mkdir(parents=True, exist_ok=True)
        if stat.S_ISLNK(info.st_mode):
            os.symlink(os.readlink(src), dst)
        elif stat.S_ISREG(info.st_mode):
            shutil.copyfile(src, dst, follow_symlinks=False)
            os.chmod(dst, stat.S_IMODE(info.st_mode))


def encode_changes(root: Path, before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]],
                   paths: Sequence[str]) -> str:
    """The self-contained JSON patch text for ``paths``."""
    files = []
    for rel in paths:
        old, new = before.get(rel), after.get(rel)
        entry: dict[str, Any] = {"relative_path": rel, "before": old or {"kind": "absent"}}
        if new is None:
            entry["after"] = {"kind": "absent"}
        else:
            _, _, content, _ = read_state(root, rel)
            encoded = base64.b64encode(content or b"").decode("ascii")
            entry["after"] = {**new, "content_base64": encoded}
        files.append(entry)
    return json.dumps({"format": FORMAT_VERSION, "files": files}, indent=1, sort_keys=True)


def decode_changes(text: str) -> list[dict[str, Any]]:
    """Parse and check the JSON patch text; a malformed document is refused before any write."""
    try:
        doc = json.loads(text)
        if doc.get("format") != FORMAT_VERSION:
            raise ValueError(f"format is {doc.get('format')!r}, expected {FORMAT_VERSION!r}")
        files = doc["files"]
        for entry in files:
            after = entry["after"]
            if after["kind"] not in ("absent", "file", "symlink"):
                raise ValueError(f"unknown kind {after['kind']!r}")
            if after["kind"] != "absent":
                after["content"] = base64.b64decode(after["content_base64"], validate=True)
                int(after["mode"])
        return files
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise ValueError(f"malformed {FORMAT} patch: {exc}") from None


def _remove_emptied_parents(root: Path, relative: str) -> None:
    """Like git: drop directories a deletion left empty, so a file may take their place."""
    parent = (root / relative).parent
    while parent != root and parent.is_dir() and not any(parent.iterdir()):
        parent.rmdir()
        parent = parent.parent


def write_changes(root: Path, files: list[dict[str, Any]]) -> None:
    """Deletions first (deepest first), then files and symlinks with their modes."""
    for entry in sorted(files, key=lambda e: e["relative_path"].count("/"), reverse=True):
        if entry["after"]["kind"] == "absent":
            path = contained_path(root, entry["relative_path"])
            if os.path.lexists(path):
                path.unlink()
            _remove_emptied_parents(root, entry["relative_path"])
    for entry in files:
        after = entry["after"]
        if after["kind"] == "absent":
            continue
        path = contained_path(root, entry["relative_path"])
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_symlink() or (after["kind"] == "symlink" and os.path.lexists(path)):
            path.unlink()
        if after["kind"] == "symlink":
            os.symlink(os.fsdecode(after["content"]), path)
        else:
            atomic_write_bytes(path, after["content"], mode=after["mode"], redact=False)
            os.chmod(path, after["mode"])

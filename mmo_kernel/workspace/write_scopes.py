"""Write scopes: which paths of the delegated workspace a writer may change (spec 04/06).

A scope is a normalized POSIX path relative to the session's cwd (``"."`` is
the whole cwd). Two scopes overlap when they are equal or one is an
ancestor of the other; overlapping live writers are refused at admission
(``write scope conflicts``) so two patches never touch the same file.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from mmo_kernel.errors import AdmissionError

WHOLE_WORKSPACE = "."
_GLOB_CHARS = frozenset("*?[")


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _normalize_one(cwd: Path, real_cwd: Path, value: object) -> str:
    if not isinstance(value, str):
        raise ValueError(f"write scope must be a string path, got {type(value).__name__}")
    raw = value.strip()
    if not raw:
        raise ValueError("write scope must not be empty")
    if "\0" in raw:
        raise ValueError(f"write scope {value!r} contains a NUL byte")
    if _GLOB_CHARS & set(raw):
        raise ValueError(f"write scope {value!r} is a glob; write scopes are paths, not patterns")
    if os.path.isabs(raw):
        absolute = Path(os.path.normpath(raw))
        if not (_inside(absolute, cwd) or _inside(absolute, real_cwd)):
            raise ValueError(f"write scope {value!r} is outside the workspace {str(cwd)!r}")
        base = cwd if _inside(absolute, cwd) else real_cwd
        relative = absolute.relative_to(base).as_posix() or WHOLE_WORKSPACE
    else:
        relative = posixpath.normpath(raw.replace(os.sep, "/"))
    if relative == ".." or relative.startswith("../"):
        raise ValueError(f"write scope {value!r} escapes the workspace {str(cwd)!r}")
    if ".git" in relative.split("/"):
        raise ValueError(f"write scope {value!r} points into git metadata (.git)")
    resolved = (real_cwd / relative).resolve(strict=False)
    if not _inside(resolved, real_cwd):
        raise ValueError(
            f"write scope {value!r} leaves the workspace through a symlink "
            f"(resolves to {str(resolved)!r})"
        )
    return relative


def normalize_write_scopes(
    cwd: Path, values: str | Iterable[str] | None, *, required: bool = False
) -> list[str]:
    """Validate scopes against ``cwd``; omitted scopes mean the whole workspace unless required.

    Returns sorted unique relative paths, with scopes inside another scope
    folded into it (``["src", "src/a"]`` -> ``["src"]``).
    """
    if isinstance(values, str):
        values = [values]
    items = list(values) if values is not None else []
    if not items:
        if required:
            raise ValueError(
                "this agent requires an explicit write scope (write_scopes) for workspace-write"
            )
        return [WHOLE_WORKSPACE]
    cwd = Path(os.path.abspath(cwd))
    real_cwd = cwd.resolve()
    if not real_cwd.is_dir():
        raise ValueError(f"workspace {str(cwd)!r} is not a directory")
    scopes = sorted({_normalize_one(cwd, real_cwd, v) for v in items}, key=_parts)
    folded: list[str] = []
    for scope in scopes:
        if not any(scopes_overlap(kept, scope) for kept in folded):
            folded.append(scope)
    return sorted(folded)


def resolve_write_scopes(cwd: Path, scopes: Sequence[str]) -> list[str]:
    """Absolute paths of normalized scopes (the record's ``write_scope_resolved``)."""
    root = Path(os.path.abspath(cwd))
    return [str(root if s == WHOLE_WORKSPACE else root / s) for s in scopes]


def _parts(scope: str) -> tuple[str, ...]:
    if scope.startswith("/"):
        return ("/", *[p for p in posixpath.normpath(scope).split("/") if p])
    norm = posixpath.normpath(scope)
    return () if norm == WHOLE_WORKSPACE else tuple(norm.split("/"))


def _as_list(value: str | Sequence[str]) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def scopes_overlap(a: str | Sequence[str], b: str | Sequence[str]) -> bool:
    """True when any scope of ``a`` equals, contains or lies inside any scope of ``b``.

    Works on relative scopes of one cwd or on absolute resolved scopes
    (compare writers of different sessions on the same workspace); mixing
    the two is refused.
    """
    for left in _as_list(a):
        for right in _as_list(b):
            if left.startswith("/") != right.startswith("/"):
                raise ValueError(
                    f"cannot compare relative scope with absolute scope: {left!r}, {right!r}"
                )
            lp, rp = _parts(left), _parts(right)
            shorter = min(len(lp), len(rp))
            if lp[:shorter] == rp[:shorter]:
                return True
    return False


def path_in_scopes(path: str, scopes: Sequence[str]) -> bool:
    """Whether a workspace-relative path lies inside one of ``scopes``."""
    parts = _parts(path)
    if parts[:1] == ("..",):
        return False
    return any(parts[: len(sp)] == sp for sp in map(_parts, scopes))


def paths_outside_scopes(paths: Iterable[str], scopes: Sequence[str]) -> list[str]:
    """The paths a writer changed outside its scopes, sorted (``out-of-scope mutation``)."""
    return sorted(p for p in set(paths) if not path_in_scopes(p, scopes))


def assert_no_scope_conflicts(
    requested: Sequence[str], live_writers: Mapping[str, Sequence[str]]
) -> None:
    """Refuse a writer whose scopes overlap a live writer's (``write scope conflicts``).

    ``live_writers`` maps job id -> that job's scopes (all relative to the same
    cwd, or all absolute).
    """
    clashes = [
        f"{mine!r} overlaps {theirs!r} of live writer {job_id}"
        for job_id, scopes in sorted(live_writers.items())
        for mine in requested
        for theirs in scopes
        if scopes_overlap(mine, theirs)
    ]
    if clashes:
        raise AdmissionError(
            "write scope conflicts: " + "; ".join(clashes), reason="write_scope_conflict"
        )


class OutOfScopeMutation(RuntimeError):
    """A writer changed paths outside its write scope; the job fails and the session is tainted."""

    def __init__(self, paths: Sequence[str]) -> None:
        self.paths = sorted(paths)
        super().__init__("out-of-scope mutation: " + ", ".join(self.paths))


def enforce_write_scope(changed_paths: Iterable[str], scopes: Sequence[str]) -> None:
    """Raise ``OutOfScopeMutation`` naming every changed path outside ``scopes``."""
    outside = paths_outside_scopes(changed_paths, scopes)
    if outside:
        raise OutOfScopeMutation(outside)

"""The project registry: ``<project_registry_dir>/<name>.toml``, one project each (spec 12).

A file that is invalid, names a missing path, a path outside every allowed root
(realpath), a symlinked root, or an ``id`` another file also uses (both are skipped) is
left out with one warning in the runner log and never reaches the server. ``Registry``
rescans on demand (every 5 s and on reconnect, driven by ``runner/main.py``) and tells
whether the project list changed; a warning is logged once until its file changes.
"""

from __future__ import annotations

import logging
import os
import threading
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError

from mmo_kernel.runner.context import ID_PATTERN, Project, RunnerConfig

LOG = logging.getLogger("mmo.runner")
RESCAN_SECONDS = 5.0


class ProjectFile(BaseModel):
    """One registry file; unknown keys make it invalid."""

    model_config = ConfigDict(extra="forbid")

    id: StrictStr = Field(pattern=ID_PATTERN)
    path: StrictStr
    name: StrictStr | None = None
    description: StrictStr = ""


@dataclass
class ScanResult:
    projects: dict[str, Project] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def _inside(path: Path, roots: Iterable[Path]) -> bool:
    return any(path == root or root in path.parents for root in roots)


def _vcs(root: Path) -> str:
    return "git" if (root / ".git").exists() else "none"


def _load(file: Path, roots: tuple[Path, ...]) -> Project | str:
    """The file's project, or the reason it is skipped (one line)."""
    try:
        with open(file, "rb") as handle:
            data = tomllib.load(handle)
        doc = ProjectFile.model_validate(data)
    except tomllib.TOMLDecodeError as exc:
        return f"invalid TOML: {exc}"
    except OSError as exc:
        return f"unreadable: {exc.strerror or exc}"
    except ValidationError as exc:
        error = exc.errors()[0]
        key = ".".join(str(p) for p in error.get("loc") or ()) or "(file)"
        if error.get("type") == "extra_forbidden":
            return f"invalid project file: unknown key {key!r}"
        if error.get("type") == "missing":
            return f"invalid project file: missing key {key!r}"
        return f"invalid project file: {key}: {error.get('msg')}"
    given = Path(doc.path)
    if not given.is_absolute():
        return f"project {doc.id!r}: path must be absolute"
    if os.path.islink(doc.path.rstrip("/") or "/"):
        return f"project {doc.id!r}: the project root is a symlink"
    if not given.is_dir():
        return f"project {doc.id!r}: path does not exist or is not a directory"
    root = Path(os.path.realpath(given))
    if not _inside(root, roots):
        return f"project {doc.id!r}: path is outside every policy.allowed_roots"
    return Project(id=doc.id, name=doc.name or doc.id, description=doc.description, root=root,
                   vcs=_vcs(root))  # type: ignore[arg-type]


def scan(directory: Path, roots: tuple[Path, ...]) -> ScanResult:
    """Read every ``*.toml`` of ``directory``; never raises."""
    result = ScanResult()
    try:
        files = sorted(p for p in directory.iterdir()
                       if p.suffix == ".toml" and not p.name.startswith(".") and p.is_file())
    except FileNotFoundError:
        result.warnings.append(f"project registry {directory} does not exist: no projects")
        return result
    except OSError as exc:
        result.warnings.append(f"project registry {directory} is unreadable: "
                               f"{exc.strerror or exc}")
        return result
    found: dict[str, list[tuple[Path, Project]]] = {}
    for file in files:
        loaded = _load(file, roots)
        if isinstance(loaded, str):
            result.warnings.append(f"skipping project file {file}: {loaded}")
            continue
        found.setdefault(loaded.id, []).append((file, loaded))
    for project_id, entries in sorted(found.items()):
        if len(entries) > 1:
            for file, _ in entries:
                others = ", ".join(str(f.name) for f, _ in entries if f != file)
                result.warnings.append(f"skipping project file {file}: duplicate id "
                                       f"{project_id!r} (also in {others})")
            continue
        result.projects[project_id] = entries[0][1]
    return result


class Registry:
    """The current accepted projects; thread-safe reads, rescans from one thread."""

    def __init__(self, config: RunnerConfig) -> None:
        self._directory = config.project_registry_dir
        self._roots = tuple(config.policy.allowed_roots)
        self._lock = threading.Lock()
        self._projects: dict[str, Project] = {}
        self._logged: set[str] = set()
        self._scanned = False

    def projects(self) -> dict[str, Project]:
        with self._lock:
            return dict(self._projects)

    def wire(self) -> list[dict[str, object]]:
        """The projects as hello/projects frames carry them (no paths), sorted by id."""
        return [p.wire() for _, p in sorted(self.projects().items())]

    def rescan(self) -> bool:
        """Scan again; True when the accepted projects changed (always on the first scan)."""
        result = scan(self._directory, self._roots)
        for warning in result.warnings:
            if warning not in self._logged:
                LOG.warning("%s", warning)
        self._logged = set(result.warnings)
        with self._lock:
            changed = result.projects != self._projects or not self._scanned
            self._projects = result.projects
            self._scanned = True
        return changed

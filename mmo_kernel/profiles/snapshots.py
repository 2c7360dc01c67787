"""Immutable, content-addressed compilations of a profile (spec 02, "Snapshots").

Sessions run from snapshots, never from the live profile folder. A snapshot
directory ``<state dir>/snapshots/<hash>/`` holds the resolved profile, the
catalog entries it uses, guidance, the orchestration skill and contracts,
plus ``manifest.json``. The hash covers every file's sha256, so the same
inputs always give the same snapshot, and any later change to a file is
detected when the snapshot is loaded.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mmo_kernel import package_version
from mmo_kernel.config.catalog_load import load_catalog
from mmo_kernel.config.toml_input import DocumentError
from mmo_kernel.errors import format_validation_error
from mmo_kernel.profiles.checks import check_profile
from mmo_kernel.profiles.loading import locate_profile, parse_profile
from mmo_kernel.profiles.resolve import apply_bindings, resolve_profile
from mmo_kernel.profiles.schema import (
    PROFILE_SKILL_NAME,
    PROFILE_SKILL_RELATIVE_PATH,
    PROFILE_SKILL_SOURCE,
    ResolvedProfile,
    agent_guidance_relative_path,
)
from mmo_kernel.state import paths
from mmo_kernel.state.files import MMO_SCHEMA_VERSION, atomic_write_bytes
from mmo_kernel.state.records import check_schema_version

MANIFEST = "manifest.json"
PROFILE_JSON = "profile.json"
CATALOG_JSON = "catalog.json"
HASH_RE = re.compile(r"^[0-9a-f]{64}$")
INTEGRITY_FAILURE = "failed integrity validation"

__all__ = [
    "PROFILE_SKILL_NAME",
    "PROFILE_SKILL_RELATIVE_PATH",
    "agent_guidance_relative_path",
    "compile_profile",
    "load_snapshot",
    "snapshot_profile",
    "snapshot_contract",
    "snapshots_dir",
]


class SnapshotManifest(BaseModel):
    """``manifest.json``: what the snapshot is and the sha256 of every other file."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    schema_version: int
    snapshot_hash: str
    profile_id: str
    root_agent: str
    route_ids: dict[str, str]
    """agent -> gateway model id (the catalog model key)."""
    contract_transports: dict[str, str | None]
    files: dict[str, str] = Field(min_length=1)
    package_version: str


def snapshots_dir() -> Path:
    return paths.state_dir() / "snapshots"


def _canonical_json(data: Any) -> bytes:
    return (json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def content_hash(files: Mapping[str, str]) -> str:
    """The snapshot hash: sha256 over the canonical list of (path, file sha256)."""
    canonical = json.dumps(
        {"schema_version": MMO_SCHEMA_VERSION, "files": dict(sorted(files.items()))},
        sort_keys=True,
        separators=(",", ":"),
    )
    return _sha256(canonical.encode("utf-8"))


def _snapshot_files(
    resolved: ResolvedProfile,
    folder: Path,
    catalog_entries: dict[str, Any],
    contracts: dict[str, dict[str, Any]],
) -> dict[str, bytes]:
    files = {
        PROFILE_JSON: _canonical_json(resolved.model_dump(mode="json")),
        CATALOG_JSON: _canonical_json({"schema_version": MMO_SCHEMA_VERSION, **catalog_entries}),
        PROFILE_SKILL_RELATIVE_PATH: (folder / PROFILE_SKILL_SOURCE).read_bytes(),
    }
    for aid in resolved.agents:
        rel = agent_guidance_relative_path(aid)
        files[rel] = (folder / rel).read_bytes()
    for ref, schema in contracts.items():
        files[ref] = _canonical_json(schema)
    return files


def _make_writable(directory: Path) -> None:
    for path in [directory, *directory.rglob("*")]:
        if path.is_dir() and not path.is_symlink():
            os.chmod(path, 0o700)


def _write_tree(root: Path, files: dict[str, bytes], manifest: dict[str, Any]) -> Path:
    """Write everything into a private temp dir, seal it read-only, return it."""
    staging = Path(tempfile.mkdtemp(prefix=".compile-", dir=root))
    try:
        for rel, data in sorted(files.items()):
            target = staging / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(target, data, mode=0o444, redact=False)  # digests are recorded
        atomic_write_bytes(staging / MANIFEST, _canonical_json(manifest), mode=0o444, redact=False)
        directories = sorted(
            (p for p in staging.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)
        )
        for path in [*directories, staging]:
            os.chmod(path, 0o555)
    except BaseException:
        _make_writable(staging)
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return staging


def _publish(root: Path, staging: Path, snapshot_hash: str) -> None:
    """Rename the sealed temp dir into place; a concurrent identical compile may win."""
    try:
        os.rename(staging, root / snapshot_hash)
    except OSError as exc:
        _make_writable(staging)
        shutil.rmtree(staging, ignore_errors=True)
        if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY):
            raise
    fd = os.open(root, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def compile_profile(
    profile: str | os.PathLike[str], bindings: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """Validate ``profile`` (after ``bindings``) and write its snapshot.

    Returns ``{"manifest", "directory"}`` like ``load_snapshot``.

    Re-compiling unchanged inputs finds the existing snapshot and writes nothing.
    """
    location = locate_profile(profile)
    doc = parse_profile(location)
    catalog = load_catalog(isolate_fragments=True)
    doc, recorded = apply_bindings(doc, bindings, catalog)
    problems = check_profile(doc, location.folder, location.file, catalog)
    if problems:
        raise DocumentError(problems)
    resolved, contracts = resolve_profile(doc, location.folder, catalog, recorded)
    entries = catalog.entries_for(agent.model for agent in resolved.agents.values())
    files = _snapshot_files(resolved, location.folder, entries, contracts)
    digests = {rel: _sha256(data) for rel, data in files.items()}
    snapshot_hash = content_hash(digests)
    paths.ensure_private_dir(paths.state_dir())
    root = paths.ensure_private_dir(snapshots_dir())
    if not (root / snapshot_hash).exists():
        manifest = SnapshotManifest(
            schema_version=MMO_SCHEMA_VERSION,
            snapshot_hash=snapshot_hash,
            profile_id=resolved.id,
            root_agent=resolved.root_agent,
            route_ids={aid: agent.model for aid, agent in resolved.agents.items()},
            contract_transports={aid: a.contract_transport for aid, a in resolved.agents.items()},
            files=dict(sorted(digests.items())),
            package_version=package_version(),
        )
        _publish(root, _write_tree(root, files, manifest.model_dump()), snapshot_hash)
    return load_snapshot(snapshot_hash)


def _integrity_error(snapshot_hash: str, detail: str) -> RuntimeError:
    return RuntimeError(f"snapshot {snapshot_hash} {INTEGRITY_FAILURE}: {detail}")


def _read_manifest(directory: Path, snapshot_hash: str) -> SnapshotManifest:
    path = directory / MANIFEST
    if path.is_symlink() or not path.is_file():
        raise _integrity_error(snapshot_hash, f"{MANIFEST} is missing")
    try:
        doc = json.loads(path.read_bytes())
    except ValueError as exc:
        raise _integrity_error(snapshot_hash, f"{MANIFEST} is invalid ({exc})") from None
    if isinstance(doc, dict) and "schema_version" in doc:  # a missing one is an integrity failure
        check_schema_version(doc, str(path), "snapshot")
    try:
        return SnapshotManifest.model_validate(doc)
    except ValidationError as exc:
        raise _integrity_error(snapshot_hash, f"{MANIFEST} is invalid "
                               f"({format_validation_error(exc)})") from None


def _present_files(directory: Path, snapshot_hash: str) -> set[str]:
    found = set()
    for path in directory.rglob("*"):
        rel = path.relative_to(directory).as_posix()
        if path.is_symlink() or not (path.is_file() or path.is_dir()):
            raise _integrity_error(snapshot_hash, f"{rel} is not a regular file")
        if path.is_file() and rel != MANIFEST:
            found.add(rel)
    return found


def load_snapshot(snapshot_hash: str) -> dict[str, Any]:
    """``{"manifest", "directory"}`` after checking every file against its recorded sha256."""
    if not isinstance(snapshot_hash, str) or not HASH_RE.match(snapshot_hash):
        raise ValueError(f"invalid snapshot hash {snapshot_hash!r} (64 lower-case hex digits)")
    directory = snapshots_dir() / snapshot_hash
    if not directory.is_dir():
        raise FileNotFoundError(f"unknown snapshot {snapshot_hash}")
    manifest = _read_manifest(directory, snapshot_hash)
    if manifest.snapshot_hash != snapshot_hash or content_hash(manifest.files) != snapshot_hash:
        raise _integrity_error(snapshot_hash, "the manifest does not match the snapshot hash")
    present = _present_files(directory, snapshot_hash)
    expected = set(manifest.files)
    if present != expected:
        missing, extra = sorted(expected - present), sorted(present - expected)
        raise _integrity_error(snapshot_hash, f"missing files {missing}, unexpected files {extra}")
    for rel, digest in manifest.files.items():
        if _sha256((directory / rel).read_bytes()) != digest:
            raise _integrity_error(snapshot_hash, f"{rel} no longer matches its recorded sha256")
    return {"manifest": manifest.model_dump(), "directory": directory}


def _as_snapshot(snapshot: Mapping[str, Any] | str) -> dict[str, Any]:
    if isinstance(snapshot, str):
        return load_snapshot(snapshot)
    if isinstance(snapshot, Mapping) and "manifest" in snapshot and "directory" in snapshot:
        return dict(snapshot)
    raise ValueError("snapshot must be a snapshot hash or a {'manifest', 'directory'} mapping")


def snapshot_profile(snapshot: Mapping[str, Any] | str) -> ResolvedProfile:
    """The resolved profile stored in a snapshot (a hash is loaded and verified first)."""
    snap = _as_snapshot(snapshot)
    data = json.loads((Path(snap["directory"]) / PROFILE_JSON).read_bytes())
    return ResolvedProfile.model_validate(data)


def snapshot_contract(snapshot: Mapping[str, Any] | str, agent: str) -> dict[str, Any] | None:
    """The JSON Schema of ``agent``'s output contract in the snapshot, or None."""
    snap = _as_snapshot(snapshot)
    resolved = snapshot_profile(snap)
    if agent not in resolved.agents:
        raise ValueError(f"unknown agent {agent!r}; agents: {', '.join(resolved.agents)}")
    ref = resolved.agents[agent].output_contract
    if ref is None:
        return None
    return json.loads((Path(snap["directory"]) / ref).read_bytes())

"""Reading a stored snapshot back: its layout, its manifest and the integrity check.

A snapshot directory ``<state dir>/snapshots/<hash>/`` is written once by
``profiles.snapshots.compile_profile`` and never changes. Everything that only
reads one (a session's resolved profile, a job's output contract, the price
table ``mmo jobs`` costs usage with) needs this module alone, not the profile
checks and loaders that compiling pulls in.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mmo_kernel.errors import format_validation_error
from mmo_kernel.state import paths
from mmo_kernel.state.files import MMO_SCHEMA_VERSION
from mmo_kernel.state.records import check_schema_version

if TYPE_CHECKING:
    from mmo_kernel.profiles.schema import ResolvedProfile

MANIFEST = "manifest.json"
PROFILE_JSON = "profile.json"
CATALOG_JSON = "catalog.json"
HASH_RE = re.compile(r"^[0-9a-f]{64}$")
INTEGRITY_FAILURE = "failed integrity validation"


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


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def content_hash(files: Mapping[str, str]) -> str:
    """The snapshot hash: sha256 over the canonical list of (path, file sha256)."""
    canonical = json.dumps(
        {"schema_version": MMO_SCHEMA_VERSION, "files": dict(sorted(files.items()))},
        sort_keys=True,
        separators=(",", ":"),
    )
    return sha256_hex(canonical.encode("utf-8"))


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
        if sha256_hex((directory / rel).read_bytes()) != digest:
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
    from mmo_kernel.profiles.schema import ResolvedProfile  # pricing a snapshot never needs it

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

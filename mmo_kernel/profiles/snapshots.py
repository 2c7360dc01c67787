"""Immutable, content-addressed compilations of a profile (spec 02, "Snapshots").

Sessions run from snapshots, never from the live profile folder. A snapshot
directory ``<state dir>/snapshots/<hash>/`` holds the resolved profile, the
catalog entries it uses, guidance, the orchestration skill and contracts,
plus ``manifest.json``. The hash covers every file's sha256, so the same
inputs always give the same snapshot, and any later change to a file is
detected when the snapshot is loaded.

This module compiles (checks, resolution, sealing); reading a stored snapshot
back lives in ``profiles.snapshot_store`` and is re-exported here.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mmo_kernel import package_version
from mmo_kernel.config.catalog_load import load_catalog
from mmo_kernel.config.toml_input import DocumentError
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
from mmo_kernel.profiles.snapshot_store import (
    CATALOG_JSON,
    MANIFEST,
    PROFILE_JSON,
    SnapshotManifest,
    content_hash,
    load_snapshot,
    sha256_hex,
    snapshot_contract,
    snapshot_profile,
    snapshots_dir,
)
from mmo_kernel.state import paths
from mmo_kernel.state.files import MMO_SCHEMA_VERSION, atomic_write_bytes

__all__ = [
    "CATALOG_JSON",
    "PROFILE_SKILL_NAME",
    "PROFILE_SKILL_RELATIVE_PATH",
    "agent_guidance_relative_path",
    "compile_profile",
    "load_snapshot",
    "snapshot_profile",
    "snapshot_contract",
    "snapshots_dir",
]


def _canonical_json(data: Any) -> bytes:
    return (json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


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
    digests = {rel: sha256_hex(data) for rel, data in files.items()}
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

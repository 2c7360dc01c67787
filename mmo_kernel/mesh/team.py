"""What the mesh needs to know about a session's team, read from its snapshot.

``mmo_kernel.profiles.snapshots`` owns the format: ``<state>/snapshots/<hash>/``
holds ``profile.json`` (the resolved profile) and ``manifest.json`` (the
sha256 of every file). Importing that module costs over a second (it pulls
in the catalog and plugin machinery), so the mesh reads the two JSON files
directly, checks ``profile.json`` against its manifest digest, and keeps
only the fields it uses. Snapshots are immutable, so a parsed team is
cached per hash for the life of the server process.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_HASH = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
PROFILE_JSON = "profile.json"
MANIFEST_JSON = "manifest.json"
INTEGRITY_FAILURE = "failed integrity validation"


@dataclass(frozen=True)
class AgentRole:
    """One agent's delegation settings."""

    name: str
    can_spawn: tuple[str, ...] = ()
    native_agents: tuple[str, ...] = ()
    controls: dict[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class Team:
    """The delegation-relevant part of a compiled profile."""

    root_agent: str
    max_depth: int
    agents: dict[str, AgentRole]

    def role(self, agent: str) -> AgentRole:
        try:
            return self.agents[agent]
        except KeyError:
            raise LookupError(f"agent {agent!r} is not part of the session's profile") from None


_CACHE: dict[tuple[str, str], Team] = {}


def _names(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{where} must be a list of agent names")
    return tuple(value)


def _controls(value: Any, where: str) -> dict[str, tuple[str, ...]]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"{where} must be a table")
    grants = {}
    for target, grant in value.items():
        actions = grant.get("actions") if isinstance(grant, dict) else None
        grants[target] = _names(actions, f"{where}.{target}.actions")
    return grants


def team_from_profile(profile: dict[str, Any]) -> Team:
    """Extract the team from a resolved profile document (TOML or JSON shaped)."""
    root = profile.get("root_agent")
    agents_doc = profile.get("agents")
    if not isinstance(root, str) or not isinstance(agents_doc, dict) or root not in agents_doc:
        raise ValueError("snapshot profile has no valid root_agent / agents")
    coordination = profile.get("coordination") or {}
    max_depth = coordination.get("max_depth", 1) if isinstance(coordination, dict) else 1
    if isinstance(max_depth, bool) or not isinstance(max_depth, int) or max_depth < 0:
        raise ValueError("snapshot profile coordination.max_depth must be a non-negative int")
    agents = {}
    for name, doc in agents_doc.items():
        doc = doc if isinstance(doc, dict) else {}
        agents[name] = AgentRole(
            name=name,
            can_spawn=_names(doc.get("can_spawn"), f"agents.{name}.can_spawn"),
            native_agents=_names(doc.get("native_agents"), f"agents.{name}.native_agents"),
            controls=_controls(doc.get("controls"), f"agents.{name}.controls"),
        )
    return Team(root_agent=root, max_depth=max_depth, agents=agents)


def _read_regular(path: Path) -> bytes:
    if path.is_symlink() or not path.is_file():
        raise FileNotFoundError(f"snapshot {path.parent.name} has no {path.name}")
    return path.read_bytes()


def _read_profile(directory: Path) -> dict[str, Any]:
    """``profile.json``, refused unless it matches the digest recorded in ``manifest.json``."""
    name = directory.name
    manifest = json.loads(_read_regular(directory / MANIFEST_JSON))
    raw = _read_regular(directory / PROFILE_JSON)
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if manifest.get("snapshot_hash") != name or not isinstance(files, dict):
        raise ValueError(f"snapshot {name} {INTEGRITY_FAILURE}: manifest does not describe it")
    if files.get(PROFILE_JSON) != hashlib.sha256(raw).hexdigest():
        raise ValueError(f"snapshot {name} {INTEGRITY_FAILURE}: {PROFILE_JSON} does not match")
    doc = json.loads(raw)
    if not isinstance(doc, dict):
        raise ValueError(f"snapshot {name}: {PROFILE_JSON} is not a profile document")
    return doc


def load_team(state_dir: Path, snapshot_hash: str) -> Team:
    """The team of snapshot ``snapshot_hash`` (cached: snapshots never change)."""
    if (
        not isinstance(snapshot_hash, str)
        or not _HASH.match(snapshot_hash)
        or ".." in snapshot_hash
    ):
        raise ValueError("session has an invalid snapshot_hash")
    key = (str(state_dir), snapshot_hash)
    if key not in _CACHE:
        _CACHE[key] = team_from_profile(
            _read_profile(Path(state_dir) / "snapshots" / snapshot_hash)
        )
    return _CACHE[key]

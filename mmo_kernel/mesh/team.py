"""What the mesh needs to know about a session's team, read from its snapshot.

The snapshot module (``mmo_kernel.snapshots``) owns the snapshot format; until
it lands, this module reads the resolved profile defensively from
``<state>/snapshots/<hash>/`` (``profile.json``, else ``profile.toml``) and
keeps only the fields the mesh uses. Snapshots are immutable, so a parsed
team is cached per hash for the life of the server process.
"""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_HASH = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
PROFILE_FILES = ("profile.json", "profile.toml")


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


def _read_profile(directory: Path) -> dict[str, Any]:
    for name in PROFILE_FILES:
        path = directory / name
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            doc = json.loads(data) if name.endswith(".json") else tomllib.loads(data.decode())
            if isinstance(doc, dict) and isinstance(doc.get("profile"), dict):
                doc = doc["profile"]
            if not isinstance(doc, dict):
                raise ValueError(f"{path} is not a profile document")
            return doc
    raise FileNotFoundError(f"snapshot {directory.name} has no resolved profile")


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

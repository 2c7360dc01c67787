"""What a session's root or a job has cost, priced from the snapshot it ran with.

The model and its price come from the session's snapshot (its ``catalog.json``
and the agent -> model key of its manifest), never from the current catalog:
a later catalog edit does not rewrite the cost of past work. An unreadable or
unknown snapshot, an agent it does not know, a model without a price or a
record without usage all give ``None`` (unknown).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from mmo_kernel.config.pricing import model_cost
from mmo_kernel.profiles.snapshot_store import CATALOG_JSON, load_snapshot
from mmo_kernel.state import paths

if TYPE_CHECKING:
    from mmo_kernel.config.catalog import Model

_lock = threading.Lock()
_models: dict[tuple[str, str], dict[str, Model | None]] = {}
"""``(state dir, snapshot hash)`` -> agent -> model; snapshots never change once written."""


def _read_agent_models(snapshot_hash: str) -> dict[str, Model | None]:
    from mmo_kernel.config.catalog import Model  # the catalog's models: only once a job is priced

    snapshot = load_snapshot(snapshot_hash)  # verifies every file's digest
    data = json.loads((Path(snapshot["directory"]) / CATALOG_JSON).read_bytes())
    entries = data.get("models") if isinstance(data, dict) else None
    entries = entries if isinstance(entries, dict) else {}
    out: dict[str, Model | None] = {}
    for agent, key in snapshot["manifest"]["route_ids"].items():
        entry = entries.get(key)
        try:
            out[agent] = None if entry is None else Model.model_validate(entry)
        except ValidationError:
            out[agent] = None
    return out


def agent_models(snapshot_hash: Any) -> dict[str, Model | None]:
    """agent -> the catalog model it ran on in that snapshot (empty when unreadable)."""
    if not isinstance(snapshot_hash, str):
        return {}
    key = (str(paths.state_dir()), snapshot_hash)
    with _lock:
        kept = _models.get(key)
    if kept is not None:
        return kept
    try:
        found = _read_agent_models(snapshot_hash)
    except (OSError, ValueError, RuntimeError, KeyError, TypeError):
        return {}  # a missing or damaged snapshot: unknown, and tried again next time
    with _lock:
        _models[key] = found
    return found


def agent_cost(snapshot_hash: Any, agent: Any, usage: Any) -> Decimal | None:
    """USD for ``usage`` of ``agent`` at its model's price in the snapshot, or None."""
    if not isinstance(agent, str):
        return None
    return model_cost(agent_models(snapshot_hash).get(agent), usage)


def job_cost(job: Mapping[str, Any]) -> Decimal | None:
    """The cost of a job record's ``usage`` (None when unknown)."""
    return agent_cost(job.get("snapshot_hash"), job.get("agent"), job.get("usage"))


def root_cost(session: Mapping[str, Any]) -> Decimal | None:
    """The cost of a session record's ``root_usage`` (None when unknown)."""
    return agent_cost(session.get("snapshot_hash"), session.get("root_agent"),
                      session.get("root_usage"))

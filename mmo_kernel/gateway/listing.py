"""``gateway_models``: the gateway model ids a compiled snapshot uses."""

from __future__ import annotations

import json
from typing import Any

from mmo_kernel.state.paths import state_dir


def gateway_models(snapshot_hash: str) -> dict[str, Any]:
    """``{"object": "list", "data": [{"id": ...}]}`` from the manifest's ``route_ids``.

    ``route_ids`` maps agent -> gateway model id; several agents may share a
    model, which is listed once (sorted, so the answer is stable).
    """
    if not isinstance(snapshot_hash, str) or not snapshot_hash.isalnum():
        raise ValueError(f"snapshot hash must be alphanumeric, got {snapshot_hash!r}")
    manifest_path = state_dir() / "snapshots" / snapshot_hash / "manifest.json"
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"unknown snapshot {snapshot_hash!r}: no {manifest_path}") from None
    route_ids = manifest.get("route_ids") if isinstance(manifest, dict) else None
    if not isinstance(route_ids, dict):
        raise ValueError(f"snapshot {snapshot_hash} manifest has no route_ids mapping")
    ids = sorted({str(v) for v in route_ids.values() if isinstance(v, str) and v})
    return {"object": "list", "data": [{"id": i, "object": "model"} for i in ids]}


def models_payload(model_ids: list[str]) -> dict[str, Any]:
    """The ``/v1/models`` body for a list of gateway model ids."""
    return {"object": "list",
            "data": [{"id": i, "object": "model", "owned_by": "mmo"} for i in sorted(model_ids)]}

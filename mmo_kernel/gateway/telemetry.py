"""``route_telemetry``: which provider actually served an agent's requests (spec 08).

OpenRouter reports routing in two shapes; both are read:

* ``routing``: ``serving_provider_slug``, ``serving_endpoint_tag``,
  ``attempt``, ``retry_count``, ``fallback_index``;
* ``openrouter_metadata``: ``attempt``, ``endpoints.available[*]`` (the one
  with ``selected`` served; its position is the fallback index) and
  ``attempts[*].provider/status``; retries are not reported, so they are
  ``None`` and ``retry_telemetry_complete`` is false.

When only an attempt number is known, ``fallback_index = attempt - 1``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _slug(entry: Mapping[str, Any]) -> str | None:
    for key in ("provider_slug", "provider", "slug", "provider_name", "name"):
        if isinstance(entry.get(key), str) and entry[key]:
            return entry[key]
    return None


def _from_routing(routing: Mapping[str, Any]) -> dict[str, Any]:
    attempt = _int(routing.get("attempt"))
    retries = _int(routing.get("retry_count"))
    fallback = _int(routing.get("fallback_index"))
    if fallback is None and retries is None and attempt is not None:
        fallback = attempt - 1
    return {"slug": routing.get("serving_provider_slug") or None,
            "tag": routing.get("serving_endpoint_tag") or None,
            "attempt": attempt, "retries": retries, "fallback": fallback,
            "retries_known": retries is not None}


def _from_openrouter(meta: Mapping[str, Any]) -> dict[str, Any]:
    raw = meta.get("endpoints")
    endpoints: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    available = [e for e in endpoints.get("available") or [] if isinstance(e, Mapping)]
    selected = next(((i, e) for i, e in enumerate(available) if e.get("selected")), None)
    slug = tag = fallback = None
    if selected is not None:
        fallback, entry = selected
        slug = _slug(entry)
        tag = entry.get("tag") or entry.get("endpoint_tag") or None
    if slug is None:
        ok = [a for a in meta.get("attempts") or [] if isinstance(a, Mapping)
              and str(a.get("status", "")).lower() in ("200", "success", "ok", "succeeded")]
        slug = _slug(ok[-1]) if ok else None
    attempt = _int(meta.get("attempt"))
    if fallback is None and attempt is not None:
        fallback = attempt - 1
    return {"slug": slug, "tag": tag, "attempt": attempt, "retries": None,
            "fallback": fallback, "retries_known": False}


def _read_one(metadata: Mapping[str, Any]) -> dict[str, Any] | None:
    if isinstance(metadata.get("provider_metadata"), Mapping):
        metadata = metadata["provider_metadata"]
    if isinstance(metadata.get("routing"), Mapping):
        return _from_routing(metadata["routing"])
    if isinstance(metadata.get("openrouter_metadata"), Mapping):
        return _from_openrouter(metadata["openrouter_metadata"])
    if "serving_provider_slug" in metadata:
        return _from_routing(metadata)
    if isinstance(metadata.get("provider"), str):
        return {"slug": metadata["provider"], "tag": None, "attempt": None, "retries": None,
                "fallback": None, "retries_known": False}
    return None


def _events(events_path: Path | str | None) -> list[Mapping[str, Any]]:
    if events_path is None:
        return []
    try:
        lines = Path(events_path).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    found = []
    for line in lines:
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, Mapping) and _read_one(row) is not None:
            found.append(row)
    return found


def route_telemetry(metadata: Mapping[str, Any] | list[Mapping[str, Any]] | None,
                    usage: Mapping[str, Any] | None = None,
                    events_path: Path | str | None = None) -> dict[str, Any]:
    """Serving providers, endpoint tags, attempt, retries and fallback index of a run.

    ``metadata`` is one provider-metadata mapping (or a list, one per
    request); rows of ``events_path`` (JSON lines, e.g. the gateway request
    log) that carry provider metadata are added. ``usage`` is accepted for
    the caller's convenience; it does not change the routing facts.
    """
    del usage
    entries = [metadata] if isinstance(metadata, Mapping) else list(metadata or [])
    parsed = [p for p in (_read_one(e) for e in entries + _events(events_path)
                          if isinstance(e, Mapping)) if p is not None]
    slugs = list(dict.fromkeys(p["slug"] for p in parsed if p["slug"]))
    tags = list(dict.fromkeys(p["tag"] for p in parsed if p["tag"]))
    last = parsed[-1] if parsed else None
    complete = bool(parsed) and all(p["slug"] for p in parsed)
    return {
        "complete": complete,
        "actual_serving_provider_slugs": slugs if complete else [],
        "actual_serving_endpoint_tags": tags if complete else [],
        "successful_attempt": last["attempt"] if last else None,
        "retries": last["retries"] if last else None,
        "fallback_index": last["fallback"] if last else None,
        "retry_telemetry_complete": bool(parsed) and all(p["retries_known"] for p in parsed),
    }

"""The MMO plugins an environment has installed, so a running gateway can be seen to lack one.

The gateway loads route drivers once, when it starts. A plugin installed (or
upgraded) after that is unknown to it: its routes would be refused as having
an unknown driver although the session that asks for them has the plugin.
``ensure_gateway`` compares this set with the one the gateway recorded at
start-up and restarts a gateway that lacks any of the caller's entries.
"""

from __future__ import annotations

import os
from importlib import metadata

from mmo_kernel.plugin.manager import DISABLE_ENV, ENTRY_POINT_GROUP


def installed_plugins() -> list[str]:
    """``<entry point>=<target> (<distribution> <version>)`` per enabled ``mmo.plugins`` entry."""
    blocked = {part.strip() for part in os.environ.get(DISABLE_ENV, "").split(",") if part.strip()}
    entries = set()
    for entry in metadata.entry_points(group=ENTRY_POINT_GROUP):
        if entry.name in blocked:
            continue
        dist = getattr(entry, "dist", None)
        origin = f"{dist.name} {dist.version}" if dist is not None else "unknown"
        entries.add(f"{entry.name}={entry.value} ({origin})")
    return sorted(entries)


def lacks_plugins(record: dict[str, object], plugins: list[str]) -> bool:
    """True when the gateway of ``record`` started without one of ``plugins``.

    Only a missing entry counts: a gateway with more plugins than the caller
    serves the caller fine, and two installations sharing one state directory
    must not restart each other's gateway on every session.
    """
    recorded = record.get("plugins")
    if not isinstance(recorded, list):
        return True  # a gateway from before plugin sets were recorded
    return not set(plugins) <= set(recorded)

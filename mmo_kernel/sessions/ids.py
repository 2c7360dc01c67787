"""Id prefixes on the command line: resolve one to a full id, and show short ids.

Ids are ``YYYYMMDD-HHMMSS-<name>-<hex6>``. Like git's abbreviated hashes, a
short id is the shortest cut of the full id that no other id starts with,
cut at the end of the time stamp, at the end of the name, or inside the hex
suffix. Ids created in a later second never share a time stamp, so a short id
stays valid as new ids appear. Uniqueness is judged against every id of the
kind in the state directory, not only those a table shows.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable

from mmo_kernel.sessions.records import CREATING_MARKER, sessions_root

STAMP_CHARS = len("YYYYMMDD-HHMMSS")
_STANDARD_ID = re.compile(r"^[0-9]{8}-[0-9]{6}-[A-Za-z0-9._-]+-[0-9a-f]{6}$")
SHOWN_CANDIDATES = 10


class AmbiguousIdError(ValueError):
    """An id prefix that more than one id starts with."""


def resolve_prefix(text: str, ids: Collection[str], kind: str, listing: str) -> str:
    """The one id equal to ``text`` or starting with it; ``kind`` names it in errors."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"a {kind} id must not be empty")
    text = text.strip()
    if text in ids:
        return text
    matches = sorted(i for i in ids if i.startswith(text))
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise FileNotFoundError(f"no MMO {kind} {text!r}: no such {kind}, no {kind} id starts "
                                f"with it (see `{listing}`)")
    shown = ", ".join(matches[:SHOWN_CANDIDATES])
    more = len(matches) - SHOWN_CANDIDATES
    raise AmbiguousIdError(f"{kind} id prefix {text!r} is ambiguous: it matches {shown}"
                           + (f" and {more} more" if more > 0 else "")
                           + "; give more of the id")


def _common(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _cuts(full: str) -> list[int]:
    """Where a short id may end: the time stamp, the name, each hex digit."""
    if not _STANDARD_ID.match(full):
        return [len(full)]
    hex_start = len(full) - 6
    return [STAMP_CHARS, hex_start - 1, *range(hex_start + 1, len(full) + 1)]


def short_ids(ids: Iterable[str], universe: Collection[str]) -> dict[str, str]:
    """``{full id: short id}`` for ``ids``, each unique among ``universe``."""
    ordered = sorted(set(universe) | set(ids))
    place = {value: n for n, value in enumerate(ordered)}
    out = {}
    for full in ids:
        n = place[full]
        shared = max(_common(full, ordered[n - 1]) if n > 0 else 0,
                     _common(full, ordered[n + 1]) if n + 1 < len(ordered) else 0)
        out[full] = next((full[:cut] for cut in _cuts(full) if cut > shared), full)
    return out


def session_ids() -> list[str]:
    """Every session of the state directory (not those still being created)."""
    root = sessions_root()
    if not root.is_dir():
        return []
    return [entry.name for entry in root.iterdir()
            if not entry.name.startswith(".") and (entry / "session.json").exists()
            and not (entry / CREATING_MARKER).exists()]


def resolve_session_id(text: str) -> str:
    """The full session id ``text`` is, or is an unambiguous prefix of."""
    return resolve_prefix(text, session_ids(), "session", "mmo sessions --all")


def short_session_ids(ids: Iterable[str]) -> dict[str, str]:
    return short_ids(list(ids), session_ids())


__all__ = ["AmbiguousIdError", "resolve_prefix", "resolve_session_id", "session_ids",
           "short_ids", "short_session_ids"]

"""Activity logs (spec 12 "Invocation envelope `_mmo`"): what a host asked to record.

``_mmo.record = <session>`` appends the call (tool, time, success, business session)
to that session's log and nowhere else; it is bookkeeping only and never changes
which session a tool acts on. One JSONL file per session under
``<state>/activity/``; the handoff shows the last 20 entries.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from mmo_kernel.serve.sessions_index import now_ms
from mmo_kernel.state.audit import append_jsonl, read_jsonl
from mmo_kernel.state.paths import ensure_private_dir

RECENT = 20


class ActivityLog:
    def __init__(self, state_dir: Path) -> None:
        self._dir = Path(state_dir) / "activity"

    def _path(self, session_id: str) -> Path:
        # The file name is derived, never taken from the wire as a path.
        digest = hashlib.sha256(session_id.encode("utf-8")).hexdigest()[:32]
        return self._dir / f"{digest}.jsonl"

    def append(self, session_id: str, *, tool: str, success: bool,
               business_session: str | None, error_kind: str | None = None) -> dict[str, Any]:
        entry: dict[str, Any] = {"tool": tool, "time_unix_ms": now_ms(), "success": success,
                                 "business_session": business_session}
        if error_kind is not None:
            entry["error_kind"] = error_kind
        ensure_private_dir(self._dir)
        append_jsonl(self._path(session_id), entry)
        return entry

    def recent(self, session_id: str, limit: int = RECENT) -> list[dict[str, Any]]:
        """The last ``limit`` entries, oldest first."""
        return read_jsonl(self._path(session_id))[-limit:]

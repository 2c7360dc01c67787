"""Work results (spec 12 "Review, finish and work results"): each session's latest finish.

A work result belongs to its business session only: ``finish_coding_task`` records it
for the ``session_id`` it acted on, never for an ``_mmo.record`` session. A finish
without ``outputs`` clears the retained ``task_outputs`` (``null``), so a stale
receipt never outlives the finish that replaced it.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from mmo_kernel.serve.sessions_index import StateFile, now_ms


def open_result(session_id: str) -> dict[str, Any]:
    """A session that was never finished."""
    return {"session_id": session_id, "status": "open", "summary": None,
            "task_outcome": None, "task_outputs": None, "finished_at_unix_ms": None}


class WorkResults:
    """``work-results.json`` under the server state dir: public session id -> work result."""

    def __init__(self, state_dir: Path) -> None:
        self._file = StateFile(Path(state_dir) / "work-results.json",
                               {"schema_version": 1, "results": {}})

    def get(self, session_id: str) -> dict[str, Any]:
        """``get_work_result_state``'s ``work_result`` for the session."""
        row = self._file.read()["results"].get(session_id)
        return copy.deepcopy(row) if row else open_result(session_id)

    def record_finish(self, session_id: str, *, summary: str | None,
                      output: dict[str, Any], outputs_given: bool) -> dict[str, Any]:
        """Keep what a successful finish returned; ``task_outputs`` exactly as returned."""
        result = {"session_id": session_id, "status": "finished", "summary": summary,
                  "task_outcome": copy.deepcopy(output.get("task_outcome")),
                  "task_outputs": (copy.deepcopy(output.get("task_outputs"))
                                   if outputs_given else None),
                  "finished_at_unix_ms": now_ms()}
        with self._file.transaction() as data:
            data["results"][session_id] = result
        return copy.deepcopy(result)

"""Event recorders: where the client's ``{"recorded_at", "direction", "message"}`` rows go."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mmo_kernel.host_api import append_jsonl

from .client import Recorder


def jsonl_recorder(path: Path) -> Recorder:
    """A recorder appending compact rows to ``events.jsonl`` / ``root-events.jsonl``."""
    target = Path(path)

    def record(row: dict[str, Any]) -> None:
        append_jsonl(target, row)

    return record


__all__ = ["jsonl_recorder"]

"""Job id prefixes on the command line (the rule is in ``mmo_kernel.sessions.ids``)."""

from __future__ import annotations

from collections.abc import Iterable

from mmo_kernel.jobs.records import jobs_root
from mmo_kernel.sessions.ids import resolve_prefix, short_ids


def job_ids() -> list[str]:
    """Every job of the state directory that has a record."""
    root = jobs_root()
    if not root.is_dir():
        return []
    return [entry.name for entry in root.iterdir()
            if not entry.name.startswith(".") and (entry / "metadata.json").exists()]


def resolve_job_id(text: str) -> str:
    """The full job id ``text`` is, or is an unambiguous prefix of."""
    return resolve_prefix(text, job_ids(), "job", "mmo jobs")


def short_job_ids(ids: Iterable[str]) -> dict[str, str]:
    return short_ids(list(ids), job_ids())


__all__ = ["job_ids", "resolve_job_id", "short_job_ids"]

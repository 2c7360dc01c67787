"""Result files of a job, read only from inside the job's own directory (spec 04 "Results").

A record's ``result_path``, ``partial_result_path`` or
``structured_result_path`` is trusted only when it names a regular file in
``<state>/jobs/<job_id>/`` (a relative path is taken relative to it); anything
else — another directory, a symlink leaving it — is refused by name.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from mmo_kernel.jobs.records import job_dir

UNSAFE_PHRASES = {"result_path": "unsafe result path",
                  "partial_result_path": "unsafe partial-result path",
                  "structured_result_path": "unsafe structured-result path"}


def owned_result_file(record: dict[str, Any], field: str) -> Path | None:
    """The file ``record[field]`` names, checked to be inside the job dir; None when unset."""
    value = record.get(field)
    if value is None:
        return None
    directory = job_dir(record["job_id"])
    phrase = UNSAFE_PHRASES.get(field, f"unsafe {field}")
    if not isinstance(value, str) or not value:
        raise RuntimeError(f"{phrase} for job {record['job_id']}: not a path")
    candidate = Path(value) if os.path.isabs(value) else directory / value
    real_dir = directory.resolve()
    real = candidate.resolve()
    if real.parent != real_dir and real_dir not in real.parents:
        raise RuntimeError(f"{phrase} for job {record['job_id']}: it is outside the job directory")
    if candidate.is_symlink():
        raise RuntimeError(f"{phrase} for job {record['job_id']}: it is a symlink")
    return real


def result_source(record: dict[str, Any]) -> tuple[Path | None, str | None]:
    """``(file, kind)`` of the result to show: the final result, else the partial one."""
    final = owned_result_file(record, "result_path")
    if final is not None and final.is_file():
        return final, record.get("result_kind") or "final"
    partial = owned_result_file(record, "partial_result_path")
    if partial is not None and partial.is_file():
        return partial, "partial"
    return None, None

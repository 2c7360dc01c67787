"""Result files of a job, read only from inside the job's own directory (spec 04 "Results").

A record's ``result_path``, ``partial_result_path`` or
``structured_result_path`` is trusted only when it names a regular file in
``<state>/jobs/<job_id>/`` (a relative path is taken relative to it); anything
else — another directory, a sibling job's directory, a symlinked leaf — is
refused by name. The leaf is never resolved: it is opened itself with
``O_NOFOLLOW``, so a ``result.md`` that is a symlink (even to the job's own
``metadata.json``) is refused, not served.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Any

from mmo_kernel.jobs.records import job_dir

RESULT_FILES = {"result_path": "result.md", "partial_result_path": "partial-result.md",
                "structured_result_path": "result.json"}
UNSAFE_PHRASES = {"result_path": "unsafe result path",
                  "partial_result_path": "unsafe partial-result path",
                  "structured_result_path": "unsafe structured-result path"}


def _inside(path: str, directory: str) -> bool:
    """``path`` is ``directory`` or below it (the separator keeps ``job10`` out of ``job1``)."""
    return path == directory or path.startswith(directory + os.sep)


def contained_result_file(record: dict[str, Any], field: str,
                          default: bool = True) -> Path | None:
    """The file ``record[field]`` names, its directory checked to be the job dir (or below).

    An unset field means the default file name when ``default``, else None.
    The leaf itself is not followed (see ``read_result_file``). None when
    nothing exists there.
    """
    directory = job_dir(record["job_id"])
    phrase = UNSAFE_PHRASES[field]
    value = record.get(field)
    if value is None:
        if not default:
            return None
        value = RESULT_FILES[field]
    if not isinstance(value, str) or not value:
        raise RuntimeError(f"{phrase}: {field} of job {record['job_id']} must be a path string")
    candidate = Path(value) if os.path.isabs(value) else directory / value
    parent = os.path.realpath(candidate.parent)
    if not _inside(parent, os.path.realpath(directory)):
        raise RuntimeError(f"{phrase}: {field} of job {record['job_id']} points outside the "
                           "job's directory")
    leaf = Path(parent) / candidate.name
    return leaf if os.path.lexists(leaf) else None


def read_result_file(record: dict[str, Any], field: str, default: bool = True) -> str | None:
    """The UTF-8 text of a result file, or None if it is absent.

    Refused (``unsafe ... path``) when the leaf is a symlink or not a regular
    file: the candidate itself is opened with ``O_NOFOLLOW``.
    """
    path = contained_result_file(record, field, default)
    if path is None:
        return None
    phrase = UNSAFE_PHRASES[field]
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise RuntimeError(f"{phrase}: {path.name} of job {record['job_id']} is a "
                               "symlink") from None
        if exc.errno == errno.ENOENT:
            return None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise RuntimeError(f"{phrase}: {path.name} of job {record['job_id']} is not a "
                           "regular file")
    with os.fdopen(fd, "rb") as handle:
        raw = handle.read()
    return raw.decode("utf-8", "replace")


def result_source(record: dict[str, Any]) -> tuple[str | None, str | None]:
    """``(text, kind)`` of the result to show: the final result, else the partial one."""
    final = read_result_file(record, "result_path", default=False)
    if final is not None:
        return final, record.get("result_kind") or "final"
    partial = read_result_file(record, "partial_result_path", default=False)
    if partial is not None:
        return partial, "partial"
    return None, None

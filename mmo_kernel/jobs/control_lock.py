"""The per-job control lock: one control (delivery included) at a time per job.

Its own module because controls, integration and disposition all take it,
and none of them should import the others for it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from mmo_kernel.errors import StateError
from mmo_kernel.jobs.records import job_file, read_job_record

CONTROL_LOCK_NAME = "control.lock"
CONTROL_LOCK_TIMEOUT = 120.0


@contextmanager
def job_control_lock(job_id: str, timeout: float = CONTROL_LOCK_TIMEOUT) -> Iterator[None]:
    """Hold ``<job dir>/control.lock``: one control (delivery included) at a time per job."""
    from filelock import Timeout, UnixFileLock

    read_job_record(job_id)  # unknown jobs fail before a lock file is created
    path = job_file(job_id, CONTROL_LOCK_NAME)
    lock = UnixFileLock(str(path), timeout=timeout, mode=0o600, is_singleton=True)
    try:
        lock.acquire()
    except Timeout:
        raise StateError(f"control lock of job {job_id} is held by another control; gave up "
                         f"after {timeout:g} s") from None
    try:
        yield
    finally:
        lock.release()

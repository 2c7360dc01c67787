"""``wait_for_jobs``: block until jobs finish or make progress (spec 04 "Waiting").

Waking is driven by the records themselves: every change a host or a
control makes rewrites ``metadata.json`` (atomic rename, new inode and
mtime), so the waiter stats each record every ``POLL_SECONDS`` and re-reads
only those that changed; a watch on the jobs' directories (``RenameWatch``,
inotify on Linux) ends the sleep as soon as a record is renamed into place,
so a finished job is seen at once rather than up to a poll later. Each poll
also checks that the runner of every working job is still alive (a cheap
process-identity check): a host killed without writing anything is reconciled
to ``suspended`` within a poll, and a full reconciling reload every
``RECONCILE_SECONDS`` catches anything else.
A job that is ``suspended`` or ``paused`` makes no progress until its caller
acts, so the wait also returns when a job stops there, or when every
unfinished job is there already: it never sits out its timeout on work that
cannot move by itself. The loop sleeps between polls, so waiting costs no
measurable CPU.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping
from typing import Any

from mmo_kernel.jobs.authority import require_session_job
from mmo_kernel.jobs.listing import load_job, reconcile_job
from mmo_kernel.jobs.records import TERMINAL_JOB_STATUSES, job_dir, job_file, progress_revision
from mmo_kernel.jobs.result_files import result_source
from mmo_kernel.state.changes import RenameWatch
from mmo_kernel.state.records import is_exact_int

POLL_SECONDS = 0.05
RECONCILE_SECONDS = 1.0
PREVIEW_CHARS = 4000
AWAITING_CONTROL_STATUSES = frozenset({"suspended", "paused"})
"""Non-terminal statuses in which a job does nothing until a control moves it."""
AWAITING_CONTROL_NOTE = (
    "The jobs in awaiting_control are suspended or paused: they make no progress until you "
    "act. A suspended job's work is on its persisted app-server thread: agent_continue "
    "continues it on the same thread (agent_finalize asks for its result, agent_stop or "
    "agent_cancel end it). Their previews show the partial result."
)
RESULT_READING_NOTE = (
    "The results are bounded previews (at most 4000 characters each; truncated = true when "
    "the result is longer). Read the full result with agent_result, following next_cursor "
    "until it is null."
)


def _check_arguments(job_ids: Any, timeout_seconds: Any,
                     after_revision: Any) -> tuple[list[str], float, dict[str, int] | None]:
    if not isinstance(job_ids, (list, tuple)) or not job_ids or not all(
            isinstance(j, str) for j in job_ids):
        raise ValueError("job_ids must be a non-empty list of job ids")
    ids = list(dict.fromkeys(job_ids))
    if isinstance(timeout_seconds, bool) or not isinstance(timeout_seconds, (int, float)) \
            or not timeout_seconds >= 0:
        raise ValueError(f"timeout_seconds must be a number >= 0, got {timeout_seconds!r}")
    if after_revision is None:
        return ids, float(timeout_seconds), None
    if not isinstance(after_revision, Mapping) or set(after_revision) != set(ids):
        raise ValueError("after_revision must name exactly the requested jobs "
                         f"({', '.join(ids)})")
    for job_id, value in after_revision.items():
        if not is_exact_int(value) or value < 0:
            raise ValueError(f"after_revision[{job_id!r}] must be an int >= 0, got {value!r}")
    return ids, float(timeout_seconds), dict(after_revision)


def _stamp(job_id: str) -> tuple[int, int, int] | None:
    try:
        info = os.stat(job_file(job_id, "metadata.json"))
    except FileNotFoundError:
        return None
    return info.st_ino, info.st_mtime_ns, info.st_size


def preview(record: dict[str, Any]) -> dict[str, Any]:
    """A bounded preview of a finished job's result (final, else partial)."""
    entry: dict[str, Any] = {"status": record["status"]}
    try:
        text, kind = result_source(record)
    except RuntimeError as exc:
        return {**entry, "preview": "", "truncated": False, "error": str(exc)}
    if text is None:
        return {**entry, "preview": "", "truncated": False, "result_kind": None,
                "note": "no result was recorded"}
    return {**entry, "preview": text[:PREVIEW_CHARS], "truncated": len(text) > PREVIEW_CHARS,
            "total_chars": len(text), "result_kind": kind,
            "result_state": record.get("result_state")}


class _Watch:
    """The latest records of the watched jobs, re-read only when their file changes."""

    def __init__(self, ids: list[str], session_id: str) -> None:
        self.ids = ids
        self.records: dict[str, dict[str, Any]] = {}
        self.stamps: dict[str, Any] = {}
        for job_id in ids:
            record = load_job(job_id)
            require_session_job(record, session_id)
            self.records[job_id] = record
            self.stamps[job_id] = _stamp(job_id)
        self.reconciled_at = time.monotonic()

    def refresh(self) -> None:
        full = time.monotonic() - self.reconciled_at >= RECONCILE_SECONDS
        for job_id in self.ids:
            stamp = _stamp(job_id)
            if full or stamp != self.stamps[job_id]:
                self.records[job_id] = load_job(job_id)
                self.stamps[job_id] = _stamp(job_id)
            elif self.records[job_id]["status"] not in TERMINAL_JOB_STATUSES:
                self._check_host(job_id)
        if full:
            self.reconciled_at = time.monotonic()

    def _check_host(self, job_id: str) -> None:
        """Reconcile the cached record against its processes (a lost runner suspends it);
        the record is re-read only when reconciliation changed it."""
        record = self.records[job_id]
        if reconcile_job(record) is not record:
            self.records[job_id] = load_job(job_id)
            self.stamps[job_id] = _stamp(job_id)

    def revisions(self) -> dict[str, int]:
        return {j: progress_revision(r) for j, r in self.records.items()}

    def unfinished(self) -> list[str]:
        return [j for j in self.ids if self.records[j]["status"] not in TERMINAL_JOB_STATUSES]

    def awaiting_control(self) -> list[str]:
        return [j for j in self.ids if self.records[j]["status"] in AWAITING_CONTROL_STATUSES]


def _done(watch: _Watch, baseline: dict[str, int], after: dict[str, int] | None) -> bool:
    """Every job is terminal; a job moved past ``after``; a job moved into a status that
    waits for its caller; or nothing unfinished can move without the caller."""
    unfinished = watch.unfinished()
    if not unfinished:
        return True
    moved = {j for j, rev in watch.revisions().items() if rev > baseline[j]}
    if after is not None and moved:
        return True
    awaiting = set(watch.awaiting_control())
    return bool(moved & awaiting) or set(unfinished) <= awaiting


def wait_for_jobs(job_ids: list[str], session_id: str, timeout_seconds: float,
                  include_results: bool = True,
                  after_revision: Mapping[str, int] | None = None,
                  cancelled: threading.Event | None = None) -> dict[str, Any]:
    """Wait until every job is terminal, a job moves past ``after_revision``, or the timeout.

    Returns ``{"unfinished", "progress_revisions", "changed_job_ids",
    "timed_out_waiting"}`` plus bounded ``results`` and ``result_reading_note``
    when ``include_results`` and at least one job is finished. It also returns
    when a job becomes ``suspended`` or ``paused`` (a lost host is noticed within
    a poll) or when every unfinished job is: those are listed in
    ``awaiting_control`` (with ``awaiting_control_note``), their partial results
    previewed like finished ones. Setting
    ``cancelled`` (the caller gave up, e.g. an MCP client cancelled the call)
    ends the wait at once, with ``cancelled_waiting: true``.
    """
    ids, timeout, after = _check_arguments(job_ids, timeout_seconds, after_revision)
    with RenameWatch(job_dir(j) for j in ids) as renamed:  # before the first read
        watch = _Watch(ids, session_id)
        baseline = after if after is not None else watch.revisions()
        deadline = time.monotonic() + timeout
        timed_out = False
        stop = cancelled if cancelled is not None else threading.Event()
        while not stop.is_set():
            if _done(watch, baseline, after):
                break
            if time.monotonic() >= deadline:
                timed_out = True
                break
            renamed.wait(min(POLL_SECONDS, max(deadline - time.monotonic(), 0.0)))
            watch.refresh()
    result = _result(watch, baseline, timed_out, include_results)
    if stop.is_set():
        result["cancelled_waiting"] = True
    return result


def _result(watch: _Watch, baseline: dict[str, int], timed_out: bool,
            include_results: bool) -> dict[str, Any]:
    revisions = watch.revisions()
    unfinished = watch.unfinished()
    result: dict[str, Any] = {
        "unfinished": unfinished,
        "progress_revisions": revisions,
        "changed_job_ids": [j for j in watch.ids if revisions[j] > baseline[j]],
        "timed_out_waiting": timed_out,
    }
    awaiting = watch.awaiting_control()
    if awaiting:
        result["awaiting_control"] = awaiting
        result["awaiting_control_note"] = AWAITING_CONTROL_NOTE
    shown = [j for j in watch.ids if j not in unfinished or j in awaiting]
    if include_results and shown:
        result["results"] = {j: preview(watch.records[j]) for j in shown}
        result["result_reading_note"] = RESULT_READING_NOTE
    return result

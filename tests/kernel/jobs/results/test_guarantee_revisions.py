"""``progress_revision`` moves on goal and result changes, so waiters see them (spec 04).

Besides status, turns and controls, a change of ``goal_status``, ``result_kind``,
``result_state`` or ``structured_result_path`` is progress: the revision moves by
one and a ``wait_for_jobs(after_revision=...)`` caller is told the job changed.
Writing the same value again is not progress. The jobs are ``running`` with a real
live runner process, so a waiter has no other reason to return.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kernel.jobs.results.conftest import ROOT, make_job
from support.waiting import Background

from mmo_kernel.jobs.records import REMOVE, job_dir, read_job_record, update_job
from mmo_kernel.jobs.results import accept_result, read_result
from mmo_kernel.jobs.waiting import wait_for_jobs
from mmo_kernel.state.processes import spawn_detached, terminate_process_groups

CHANGES = [
    ("goal_status", None, "active"),
    ("goal_status", "active", "complete"),
    ("goal_status", "budgetLimited", REMOVE),
    ("result_kind", None, "partial"),
    ("result_kind", "partial", "final"),
    ("result_state", "unread", "read"),
    ("result_state", "read", "accepted"),
    ("structured_result_path", None, "result.json"),
    ("structured_result_path", "result.json", REMOVE),
]


@pytest.fixture
def running_job(session) -> Iterator[Callable[..., dict[str, Any]]]:
    """A ``running`` job record whose runner is a real live process (its own group)."""
    started: list[int] = []

    def make(**fields: Any) -> dict[str, Any]:
        pid, token = spawn_detached(["sleep", "600"], cwd="/", env=dict(os.environ))
        started.append(pid)
        return make_job(session, status="running", runner_pid=pid, runner_pgid=pid,
                        runner_start_token=token, **fields)

    yield make
    terminate_process_groups(started, 1.0)


def _changed_since(job: dict, session: dict, revision: int) -> dict:
    """What a waiter that last saw ``revision`` is told, without waiting (timeout 0)."""
    return wait_for_jobs([job["job_id"]], session["session_id"], 0, include_results=False,
                         after_revision={job["job_id"]: revision})


@pytest.mark.parametrize(("field", "old", "new"), CHANGES,
                         ids=[f"{f}:{o}->{'removed' if n is REMOVE else n}" for f, o, n in CHANGES])
def test_a_goal_or_result_change_moves_the_revision_and_a_waiter_sees_it(session, running_job,
                                                                          field, old, new):
    job = running_job(**({field: old} if old is not None else {}))
    before = read_job_record(job["job_id"])["progress_revision"]
    after = update_job(job["job_id"], **{field: new})
    assert after["progress_revision"] == before + 1
    seen = _changed_since(job, session, before)
    assert seen["changed_job_ids"] == [job["job_id"]] and seen["timed_out_waiting"] is False
    assert seen["progress_revisions"] == {job["job_id"]: before + 1}


@pytest.mark.parametrize(("field", "value"), [
    ("goal_status", "active"), ("result_kind", "final"), ("result_state", "read"),
    ("structured_result_path", "result.json")])
def test_writing_the_same_value_again_is_not_progress(session, running_job, field, value):
    job = running_job(**{field: value})
    before = read_job_record(job["job_id"])["progress_revision"]
    assert update_job(job["job_id"], **{field: value})["progress_revision"] == before
    seen = _changed_since(job, session, before)
    assert seen["changed_job_ids"] == [] and seen["timed_out_waiting"] is True


def test_a_waiting_caller_is_woken_by_a_goal_status_change(session, running_job):
    job = running_job(goal_status="active")
    revision = read_job_record(job["job_id"])["progress_revision"]
    waiter = Background(wait_for_jobs, [job["job_id"]], session["session_id"], 60,
                        include_results=False, after_revision={job["job_id"]: revision})
    update_job(job["job_id"], goal_status="budgetLimited")
    woken = waiter.join()
    assert woken["changed_job_ids"] == [job["job_id"]] and woken["timed_out_waiting"] is False
    assert woken["unfinished"] == [job["job_id"]]


def test_reading_and_accepting_a_result_are_each_progress(session):
    job = make_job(session, result="the answer")
    start = read_job_record(job["job_id"])["progress_revision"]
    read_result(job["job_id"], session["session_id"])  # the last page: unread -> read
    read = read_job_record(job["job_id"])
    assert read["result_state"] == "read" and read["progress_revision"] == start + 1
    assert _changed_since(job, session, start)["changed_job_ids"] == [job["job_id"]]
    accept_result(job["job_id"], "right", session["session_id"], ROOT)
    accepted = read_job_record(job["job_id"])
    assert accepted["result_state"] == "accepted"
    assert accepted["progress_revision"] == start + 2


def test_publishing_a_structured_result_beside_the_text_is_progress(session):
    job = make_job(session, result='{"ok": true}', contract_valid=True)
    (job_dir(job["job_id"]) / "result.json").write_text('{"ok": true}', encoding="utf-8")
    before = read_job_record(job["job_id"])["progress_revision"]
    update_job(job["job_id"], structured_result_path=str(job_dir(job["job_id"]) / "result.json"))
    assert _changed_since(job, session, before)["changed_job_ids"] == [job["job_id"]]
    page = read_result(job["job_id"], session["session_id"])
    assert page["content_format"] == "json" and page["content"] == {"ok": True}

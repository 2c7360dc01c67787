"""Revision helpers at their edges: what counts as progress and how revisions count (spec 04).

``test_records.py`` walks the progress fields through ``update_job``; these pin
``apply_job_fields`` field by field (deletion, terminal status, ``finished_at``),
``bump_progress`` and the tolerant revision readers, so a changed comparison or
default among the revision helpers of ``jobs.records`` fails a test
(``make mutate``).
"""

from __future__ import annotations

import pytest

from mmo_kernel import package_version
from mmo_kernel.jobs.records import (
    PROGRESS_FIELDS,
    REMOVE,
    JobRecord,
    apply_job_fields,
    bump_progress,
    control_revision,
    new_job_id,
    progress_revision,
    read_job_record,
    utc_now,
    write_job_record,
)


def record(**fields):
    return {"schema_version": 1, "package_version": package_version(), "job_id": "j1",
            "session_id": "s1", "agent": "w", "status": "running", "created_at": "t0",
            "progress_revision": 4, **fields}


@pytest.mark.parametrize("field", sorted(PROGRESS_FIELDS - {"status"}))
def test_each_progress_field_bumps_once_and_an_equal_value_does_not(field):
    base = record(**{field: "old"})
    moved = apply_job_fields(base, {field: "new"})
    assert moved[field] == "new" and moved["progress_revision"] == 5
    assert apply_job_fields(base, {field: "old"})["progress_revision"] == 4
    removed = apply_job_fields(base, {field: REMOVE})
    assert field not in removed and removed["progress_revision"] == 5
    assert apply_job_fields(record(), {field: REMOVE})["progress_revision"] == 4
    assert apply_job_fields(record(), {field: None})["progress_revision"] == 4


def test_other_fields_change_without_progress_and_none_deletes():
    base = record(task="t", usage={"a": 1})
    updated = apply_job_fields(base, {"usage": {"a": 2}, "task": None, "warning": "w",
                                      "error": REMOVE})
    assert updated == {**record(usage={"a": 2}), "warning": "w"}
    assert base == record(task="t", usage={"a": 1})  # the input is not changed
    several = apply_job_fields(base, {"active_turn_id": "t1", "last_turn_id": "t0"})
    assert several["progress_revision"] == 5  # one bump for one update


def test_a_missing_or_null_progress_revision_counts_from_zero():
    assert apply_job_fields(record(progress_revision=None), {"status": "waiting"})[
        "progress_revision"] == 1
    bare = {k: v for k, v in record().items() if k != "progress_revision"}
    assert apply_job_fields(bare, {"status": "waiting"})["progress_revision"] == 1
    assert "progress_revision" not in apply_job_fields(bare, {"task": "x"})


def test_a_terminal_status_is_kept_and_stamped_once():
    done = apply_job_fields(record(), {"status": "completed"})
    assert done["status"] == "completed" and done["finished_at"]
    assert apply_job_fields(record(), {"status": "failed", "finished_at": "given"})[
        "finished_at"] == "given"
    assert "finished_at" not in apply_job_fields(record(), {"status": "waiting"})
    terminal = record(status="cancelled", finished_at="f1")
    later = apply_job_fields(terminal, {"status": "running", "finished_at": "f2", "error": "e"})
    assert (later["status"], later["finished_at"], later["error"]) == ("cancelled", "f1", "e")
    assert later["progress_revision"] == 4  # the ignored status is no progress


def test_bump_progress_moves_the_recorded_revision_by_one(mmo_env):
    job_id = new_job_id("w")
    write_job_record({**record(job_id=job_id), "created_at": utc_now()})
    assert bump_progress(job_id)["progress_revision"] == 5
    assert bump_progress(job_id)["progress_revision"] == 6
    assert read_job_record(job_id)["progress_revision"] == 6
    fresh = new_job_id("w")
    write_job_record({**record(job_id=fresh, progress_revision=None), "created_at": utc_now()})
    assert read_job_record(fresh)["progress_revision"] == 0
    assert bump_progress(fresh)["progress_revision"] == 1


@pytest.mark.parametrize(("value", "expected"), [(7, 7), (0, 0), (None, 0), (True, 0),
                                                 ("3", 0), (2.0, 0)])
def test_progress_revision_reads_only_an_exact_integer(value, expected):
    assert progress_revision({"progress_revision": value}) == expected
    assert progress_revision({}) == 0


@pytest.mark.parametrize(("value", "expected"), [(3, 3), (0, 0), (None, 0)])
def test_control_revision_is_zero_before_the_first_control(value, expected):
    assert control_revision({"control_revision": value}) == expected
    assert control_revision({}) == 0
    assert JobRecord.model_construct(control_revision=value).revision == expected

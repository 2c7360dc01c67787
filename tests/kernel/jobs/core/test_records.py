"""Job records: ids, the tolerant strict reader, updates, progress revisions, listing."""

from __future__ import annotations

import json
import os
import re

import pytest

from mmo_kernel import package_version
from mmo_kernel.errors import StateError
from mmo_kernel.jobs.listing import iter_job_records, list_jobs, load_job
from mmo_kernel.jobs.records import (
    REMOVE,
    TERMINAL_JOB_STATUSES,
    job_dir,
    new_job_id,
    public_job,
    read_job_record,
    update_job,
    utc_now,
    write_job_record,
)


def minimal(job_id: str, **extra) -> dict:
    return {"schema_version": 1, "package_version": package_version(), "job_id": job_id,
            "session_id": "s1", "agent": "worker", "status": "completed",
            "created_at": utc_now(), **extra}


def hand_write(job_id: str, doc: dict) -> None:
    directory = job_dir(job_id)
    directory.mkdir(parents=True)
    (directory / "metadata.json").write_text(json.dumps(doc))


def test_job_ids_sort_by_time_and_live_under_state_jobs(mmo_env):
    job_id = new_job_id("Routine Engineer")
    assert re.fullmatch(r"\d{8}-\d{6}-routine-engineer-[0-9a-f]{6}", job_id)
    assert job_dir(job_id) == mmo_env.state_dir / "jobs" / job_id
    with pytest.raises(FileNotFoundError, match="not an MMO job id"):
        job_dir("../escape")


def test_job_dir_refuses_a_symlinked_jobs_directory(mmo_env, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, mmo_env.state_dir / "jobs")
    with pytest.raises(StateError, match="cannot traverse symlink"):
        job_dir(new_job_id("w"))
    with pytest.raises(StateError):
        write_job_record(minimal(new_job_id("w")))
    assert list(elsewhere.iterdir()) == []


def test_a_hand_written_minimal_record_is_readable(mmo_env):
    hand_write("job-1", minimal("job-1"))
    assert read_job_record("job-1")["status"] == "completed"
    assert load_job("job-1")["agent"] == "worker"


@pytest.mark.parametrize("mutate, error, phrase", [
    (lambda d: d.pop("created_at"), ValueError, "missing required fields: created_at"),
    (lambda d: d.update(depth="1"), ValueError, "depth"),
    (lambda d: d.update(status="done"), ValueError, "status"),
    (lambda d: d.update(control_revision=True), ValueError, "control_revision"),
    (lambda d: d.update(timeout_seconds=30), ValueError, "retired fields are not supported: "
                                                          "timeout_seconds"),
    (lambda d: d.update(output_schema_path="/x.json"), ValueError, "output_schema_path"),
    (lambda d: d.update(schema_version=2), ValueError, "unsupported job state schema"),
    (lambda d: d.update(package_version="0.0.0-other"), ValueError,
     "persistent job package must be"),
])
def test_invalid_records_are_refused_by_name(mmo_env, mutate, error, phrase):
    doc = minimal("job-1")
    mutate(doc)
    hand_write("job-1", doc)
    with pytest.raises(error, match=re.escape(phrase)):
        read_job_record("job-1")
    with pytest.raises(RuntimeError, match="invalid job state"):
        list_jobs()


def test_unknown_job_is_file_not_found(mmo_env):
    with pytest.raises(FileNotFoundError, match="no MMO job"):
        load_job(new_job_id("w"))


def test_records_omit_unset_fields_and_none_removes(mmo_env):
    job_id = new_job_id("w")
    write_job_record({**minimal(job_id, status="running"), "task": None, "warning": "w"})
    raw = json.loads((job_dir(job_id) / "metadata.json").read_text())
    assert "task" not in raw and None not in raw.values()
    assert "warning" not in update_job(job_id, warning=None)
    assert update_job(job_id, error="e", task="t")["error"] == "e"
    updated = update_job(job_id, error=REMOVE)
    assert "error" not in updated and updated["task"] == "t"


def test_terminal_jobs_never_change_status_again(mmo_env):
    job_id = new_job_id("w")
    write_job_record(minimal(job_id, status="running"))
    done = update_job(job_id, status="cancelled", cancel_reason="enough")
    assert done["status"] == "cancelled" and "finished_at" in done
    later = update_job(job_id, status="completed", warning="late host write")
    assert later["status"] == "cancelled" and later["finished_at"] == done["finished_at"]
    assert later["warning"] == "late host write"
    assert "cancelled" in TERMINAL_JOB_STATUSES


def test_progress_revision_moves_on_status_turns_controls_and_results_only(mmo_env):
    job_id = new_job_id("w")
    rev = write_job_record(minimal(job_id, status="queued"))["progress_revision"]
    assert rev == 0
    steps = [dict(status="running"), dict(active_turn_id="t1"),
             dict(last_turn_id="t1", active_turn_id=None), dict(control_revision=1),
             dict(last_control_status="applied"), dict(result_path="result.md")]
    for fields in steps:
        rev_before = rev
        rev = update_job(job_id, **fields)["progress_revision"]
        assert rev == rev_before + 1, fields
    assert update_job(job_id, usage={"input_tokens": 5})["progress_revision"] == rev
    assert update_job(job_id, status="running")["progress_revision"] == rev  # no change


def test_public_job_adds_runtime_current(mmo_env):
    from mmo_app_server.runtime import runtime_digest

    record = write_job_record(minimal(new_job_id("w")))
    assert public_job(record)["runtime_current"] is True
    assert public_job({**record, "host_runtime_digest": runtime_digest()})["runtime_current"]
    stale = public_job({**record, "host_runtime_digest": "0" * 64})
    assert stale["runtime_current"] is False
    assert {k: v for k, v in stale.items() if k != "runtime_current"} == {
        **record, "host_runtime_digest": "0" * 64}


def test_list_jobs_newest_first_and_by_session(mmo_env):
    first = write_job_record(minimal(new_job_id("a"), session_id="s1"))
    second = write_job_record(minimal(new_job_id("b"), session_id="s2"))
    third = write_job_record(minimal(new_job_id("c"), session_id="s1"))
    assert [r["job_id"] for r in list_jobs()] == [third["job_id"], second["job_id"],
                                                   first["job_id"]]
    assert [r["job_id"] for r in list_jobs("s1")] == [third["job_id"], first["job_id"]]
    assert [r["job_id"] for r in iter_job_records("s2")] == [second["job_id"]]


def test_control_revision_is_zero_until_the_first_control(mmo_env):
    from mmo_kernel.jobs.records import JobRecord, control_revision

    fresh = read_job_record(write_job_record(minimal(new_job_id("w")))["job_id"])
    assert control_revision(fresh) == 0 and JobRecord.model_validate(fresh).revision == 0
    controlled = update_job(fresh["job_id"], control_revision=3)
    assert control_revision(controlled) == 3
    assert JobRecord.model_validate(read_job_record(fresh["job_id"])).revision == 3

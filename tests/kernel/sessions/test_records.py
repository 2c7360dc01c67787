"""Session and run records: strict reading, atomic transitions, terminal immutability."""

from __future__ import annotations

import json
import os

import pytest

from mmo_kernel import package_version
from mmo_kernel.sessions.records import (
    iter_session_records,
    new_record_id,
    read_run_record,
    read_session_record,
    session_dir,
    session_file,
    utc_now,
    write_run_record,
    write_session_record,
)
from mmo_kernel.sessions.state import (
    finish_session,
    reconcile,
    taint_session,
    transition,
    update_session,
)


def make_session(status: str = "running", **fields) -> dict:
    sid = new_record_id("demo")
    run_id = new_record_id("run")
    now = utc_now()
    record = write_session_record({
        "session_id": sid, "status": status, "profile_id": "demo", "snapshot_hash": "ab" * 32,
        "cwd": "/tmp", "session_kind": "noninteractive", "root_agent": "lead",
        "created_at": now, "run_created_at": now, "current_run_id": run_id, "run_sequence": 1,
        "root_mcp_token_hash": "00" * 32, **fields,
    })
    write_run_record({"run_id": run_id, "session_id": sid, "sequence": 1, "kind": "initial",
                      "status": status, "created_at": now, "root_mcp_token_hash": "00" * 32})
    session_file(sid, "capabilities.json").write_text("{}")
    return record


def rewrite(sid: str, **changes) -> None:
    path = session_file(sid, "session.json")
    doc = json.loads(path.read_text())
    doc.update(changes)
    path.write_text(json.dumps(doc))


def test_round_trip_and_enumeration_newest_first():
    first = make_session()
    second = make_session()
    assert read_session_record(first["session_id"])["status"] == "running"
    ids = [r["session_id"] for r in iter_session_records()]
    assert ids == sorted([first["session_id"], second["session_id"]], reverse=True)


@pytest.mark.parametrize("bad", [True, "1", None, 2, 1.0])
def test_schema_version_must_be_the_exact_int(bad):
    sid = make_session()["session_id"]
    rewrite(sid, schema_version=bad)
    with pytest.raises(ValueError, match="unsupported session state schema"):
        read_session_record(sid)
    with pytest.raises(RuntimeError, match="invalid session state"):
        iter_session_records()


def test_a_bad_field_is_one_line_naming_the_file_not_a_pydantic_dump():
    sid = make_session()["session_id"]
    rewrite(sid, status=5)
    with pytest.raises(ValueError) as caught:
        read_session_record(sid)
    message = str(caught.value)
    assert message.startswith(str(session_file(sid, "session.json")))
    assert "status" in message and "\n" not in message
    assert "validation error for" not in message


def test_foreign_package_version_is_rejected_in_place():
    sid = make_session()["session_id"]
    rewrite(sid, package_version="0.0.1")
    before = session_file(sid, "session.json").read_bytes()
    expected = f"persistent session package must be {package_version()}"
    with pytest.raises(ValueError, match=expected):
        read_session_record(sid)
    assert session_file(sid, "session.json").read_bytes() == before


def test_retired_and_unknown_fields_are_rejected():
    sid = make_session()["session_id"]
    rewrite(sid, timeout_seconds=5)
    with pytest.raises(ValueError, match="retired fields"):
        read_session_record(sid)
    sid2 = make_session()["session_id"]
    rewrite(sid2, surprise=1)
    with pytest.raises(ValueError, match="surprise"):
        read_session_record(sid2)


@pytest.mark.parametrize("sequence, kind, message", [
    (True, "initial", "sequence must be exactly 1"),
    (2, "initial", "sequence must be exactly 1"),
    (1, "replacement", "run kind must be initial"),
])
def test_run_records_are_strict(sequence, kind, message):
    record = make_session()
    path = session_file(record["session_id"], "runs", record["current_run_id"], "run.json")
    doc = json.loads(path.read_text())
    doc.update(sequence=sequence, kind=kind)
    path.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=message):
        read_run_record(record["session_id"], record["current_run_id"])


def test_symlinked_runs_directory_is_refused(tmp_path):
    record = make_session()
    runs = session_file(record["session_id"], "runs")
    target = tmp_path / "elsewhere"
    runs.rename(target)
    os.symlink(target, runs)
    with pytest.raises(RuntimeError, match="cannot traverse symlink"):
        read_run_record(record["session_id"], record["current_run_id"])


def test_unknown_or_malformed_session_ids_are_not_found():
    with pytest.raises(FileNotFoundError):
        read_session_record("20260101-000000-nothing-abcdef")
    with pytest.raises(FileNotFoundError):
        session_dir("../../etc")


def test_terminal_session_never_changes_status_again():
    sid = make_session()["session_id"]
    cancelled = transition(sid, "cancelled")
    assert cancelled["status"] == "cancelled" and cancelled["current_run_id"] is None
    assert not session_file(sid, "capabilities.json").exists()
    run = read_run_record(sid, cancelled["last_run_id"])
    assert run["status"] == "cancelled" and "finished_at" in run
    assert finish_session(sid, 0)["status"] == "cancelled"
    with pytest.raises(RuntimeError, match="terminal immutable session"):
        update_session(sid, status="running")
    assert update_session(sid, last_active_at="2030-01-01T00:00:00+00:00")["status"] == "cancelled"


def test_late_finish_of_a_detached_run_leaves_it_detached():
    record = make_session(status="detached")
    after = finish_session(record["session_id"], 0, expected_run_id=record["current_run_id"])
    assert after["status"] == "detached"
    assert finish_session(record["session_id"], 1, error="boom")["status"] == "failed"


def test_taint_is_durable_and_audited():
    record = make_session()
    taint_session(record["session_id"], "out-of-scope mutation", job_id="j1")
    again = read_session_record(record["session_id"])
    assert again["tainted"] is True and again["taint_reasons"][-1]["job_id"] == "j1"
    audit = session_file(record["session_id"], "audit.jsonl").read_text().splitlines()
    event = json.loads(audit[-1])
    assert event["event"] == "session_tainted" and event["run_id"] == record["current_run_id"]


def test_running_session_without_host_reconciles_to_suspended():
    record = make_session(root_pid=999_999_999 % 4_000_000, root_start_token="1.0")
    after = reconcile(read_session_record(record["session_id"]))
    assert after["status"] == "suspended"


def test_stale_starting_session_reconciles_to_failed():
    old = "2020-01-01T00:00:00+00:00"
    record = make_session(status="starting")
    rewrite(record["session_id"], created_at=old, run_created_at=old)
    after = reconcile(read_session_record(record["session_id"]))
    assert after["status"] == "failed"
    fresh = make_session(status="starting")
    assert reconcile(read_session_record(fresh["session_id"]))["status"] == "starting"

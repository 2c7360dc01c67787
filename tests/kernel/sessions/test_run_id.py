"""The run a session's events belong to: the active run, else the last one, else none."""

from __future__ import annotations

import pytest

from mmo_kernel.sessions.records import (
    SessionRecord,
    new_record_id,
    read_session_record,
    session_run_id,
    utc_now,
    write_run_record,
    write_session_record,
)
from mmo_kernel.sessions.state import transition


def _base() -> dict:
    now = utc_now()
    return {"session_id": new_record_id("demo"), "status": "running", "profile_id": "demo",
            "snapshot_hash": "ab" * 32, "cwd": "/tmp", "session_kind": "noninteractive",
            "root_agent": "lead", "created_at": now, "run_created_at": now, "run_sequence": 1,
            "root_mcp_token_hash": "00" * 32}


@pytest.mark.parametrize("runs, expected", [
    ({"current_run_id": "run-now", "last_run_id": "run-before"}, "run-now"),
    ({"current_run_id": "run-now"}, "run-now"),
    ({"current_run_id": None, "last_run_id": "run-before"}, "run-before"),
    ({"last_run_id": "run-before"}, "run-before"),
    ({}, None),
    ({"current_run_id": None, "last_run_id": None}, None),
])
def test_run_id_prefers_the_current_run_then_the_last_then_none(runs, expected):
    record = write_session_record({**_base(), **runs})
    assert SessionRecord.model_validate(record).run_id == expected
    assert session_run_id(record) == expected
    assert session_run_id(runs) == expected, "a partial dict needs no other field"


def test_run_id_stays_the_same_run_when_the_session_ends():
    run_id = new_record_id("run")
    record = write_session_record({**_base(), "current_run_id": run_id})
    write_run_record({"run_id": run_id, "session_id": record["session_id"], "sequence": 1,
                      "kind": "initial", "status": "running", "created_at": utc_now(),
                      "root_mcp_token_hash": "00" * 32})
    assert session_run_id(read_session_record(record["session_id"])) == run_id
    ended = transition(record["session_id"], "completed")
    assert ended["current_run_id"] is None and ended["last_run_id"] == run_id
    stored = read_session_record(record["session_id"])
    assert session_run_id(stored) == run_id
    assert SessionRecord.model_validate(stored).run_id == run_id

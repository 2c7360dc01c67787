"""Compact JSONL logs and audit events; torn lines after a crash."""

import os
import stat
from datetime import UTC, datetime, timedelta

import pytest

from mmo_kernel.errors import StateError
from mmo_kernel.state.audit import append_audit, append_jsonl, read_jsonl


def test_lines_are_compact_one_object_each_and_private(tmp_path):
    log = tmp_path / "events.jsonl"
    append_jsonl(log, {"direction": "sent", "message": {"id": 1, "text": "a b\nc"}})
    append_jsonl(log, {"é": [1, 2]})
    assert log.read_bytes() == (
        b'{"direction":"sent","message":{"id":1,"text":"a b\\nc"}}\n'
        + '{"é":[1,2]}\n'.encode()
    )
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    assert read_jsonl(log) == [{"direction": "sent", "message": {"id": 1, "text": "a b\nc"}},
                               {"é": [1, 2]}]


def test_an_existing_loose_log_is_made_private(tmp_path):
    log = tmp_path / "audit.jsonl"
    log.write_text("", encoding="utf-8")
    os.chmod(log, 0o644)
    append_jsonl(log, {"a": 1})
    assert stat.S_IMODE(log.stat().st_mode) == 0o600


def test_audit_event_carries_event_time_and_run(tmp_path):
    log = tmp_path / "audit.jsonl"
    record = append_audit(log, "session_tainted", "run-1", reason="manual")
    [line] = read_jsonl(log)
    assert line == record
    assert list(line) == ["event", "at", "run_id", "actor", "actor_name", "reason"]
    assert line["event"] == "session_tainted" and line["run_id"] == "run-1"
    at = datetime.fromisoformat(line["at"])
    assert at.utcoffset() == timedelta(0)
    assert abs(datetime.now(UTC) - at) < timedelta(seconds=30)


@pytest.mark.parametrize("event,run_id,fields,message", [
    ("", "r", {}, "non-empty string"),
    ("x", "", {}, "needs a non-empty run_id"),
    ("x", None, {}, "needs a non-empty run_id"),
    ("x", "r", {"at": "yesterday"}, "cannot override at"),
])
def test_bad_audit_events_write_nothing(tmp_path, event, run_id, fields, message):
    log = tmp_path / "audit.jsonl"
    with pytest.raises(ValueError, match=message):
        append_audit(log, event, run_id, **fields)
    assert not log.exists()


def test_a_torn_last_line_is_skipped_and_later_appends_survive(tmp_path):
    log = tmp_path / "audit.jsonl"
    append_audit(log, "run_started", "r1")
    with open(log, "ab") as handle:
        handle.write(b'{"event":"agent_star')
    assert [e["event"] for e in read_jsonl(log)] == ["run_started"]
    assert [e["event"] for e in read_jsonl(log, strict=True)] == ["run_started"]
    append_audit(log, "agent_finished", "r1")
    assert [e["event"] for e in read_jsonl(log)] == ["run_started", "agent_finished"]
    assert b'{"event":"agent_star\n' in log.read_bytes()


def test_strict_reading_names_a_bad_middle_line(tmp_path):
    log = tmp_path / "events.jsonl"
    log.write_bytes(b'{"a":1}\n[1]\n{"b":2}\n')
    assert read_jsonl(log) == [{"a": 1}, {"b": 2}]
    with pytest.raises(ValueError, match="events.jsonl: line 2 is not a JSON object"):
        read_jsonl(log, strict=True)


def test_missing_log_reads_empty(tmp_path):
    assert read_jsonl(tmp_path / "none.jsonl") == []


def test_symlinked_log_is_refused(tmp_path):
    target = tmp_path / "target"
    link = tmp_path / "audit.jsonl"
    link.symlink_to(target)
    with pytest.raises(StateError, match="log cannot traverse symlink"):
        append_jsonl(link, {"a": 1})
    assert not target.exists()


def test_non_json_values_are_refused_before_writing(tmp_path):
    log = tmp_path / "audit.jsonl"
    with pytest.raises(TypeError):
        append_jsonl(log, {"when": datetime.now(UTC)})
    assert not log.exists()

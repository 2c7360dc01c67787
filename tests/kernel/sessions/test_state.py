"""Session state updates that race with their caller (a host publishing after a detach)."""

from __future__ import annotations

from mmo_kernel.sessions.records import (
    new_record_id,
    read_session_record,
    utc_now,
    write_session_record,
)
from mmo_kernel.sessions.state import update_session


def _session(status: str) -> str:
    now = utc_now()
    return write_session_record({
        "session_id": new_record_id("demo"), "status": status, "profile_id": "demo",
        "snapshot_hash": "ab" * 32, "cwd": "/tmp", "session_kind": "noninteractive",
        "root_agent": "lead", "created_at": now})["session_id"]


def test_a_host_publishing_running_never_overwrites_a_detach_written_meanwhile():
    """A root host that loaded ``starting`` and publishes after the wall detached it."""
    sid = _session("detached")
    after = update_session(sid, status="running", status_if=("starting",), started_at=utc_now())
    assert after["status"] == "detached" and "started_at" in after
    assert read_session_record(sid)["status"] == "detached"


def test_a_starting_session_becomes_running():
    sid = _session("starting")
    assert update_session(sid, status="running", status_if=("starting",))["status"] == "running"

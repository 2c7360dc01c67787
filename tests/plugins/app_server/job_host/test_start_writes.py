"""What a starting job host puts on record, and when (issue 15: fewer writes on a job's
critical path, each still on record before anything relies on it)."""

from __future__ import annotations

from mmo_app_server.runtime import runtime_digest
from support.waiting import wait_until

from mmo_kernel import package_version
from mmo_kernel.jobs.records import read_job_record

from .conftest import finish, spawn

DELAY = "FAKE_CODEX_APP_SERVER_INITIALIZE_DELAY"


def test_the_app_server_is_on_record_before_its_handshake_and_the_socket_with_the_thread(
        session, monkeypatch):
    """While the app-server's ``initialize`` is held, the record names the app-server
    (a cancel kills it) and the host's code, but no control socket yet: controls wait
    for a host with a thread. The finished record has all of it."""
    monkeypatch.setenv(DELAY, "1.5")
    job_id = spawn(session, "strict_turn", "Report on the repo")

    def app_server_on_record():
        record = read_job_record(job_id)
        return record if record.get("app_server_pid") else None

    starting = wait_until(app_server_on_record, 20, "the app-server on record", poll=0.02)
    assert starting["status"] == "running"
    assert starting["host_package_version"] == package_version()
    assert starting["host_runtime_digest"] == runtime_digest()
    assert starting["app_server_start_token"] and starting["command"]
    assert not starting.get("app_server_thread_id")
    assert not starting.get("control_socket_ready") and not starting.get("control_socket_path")
    record = finish(session, job_id)
    assert record["status"] == "completed"
    assert record["control_socket_ready"] is True and record["control_socket_path"]
    assert record["app_server_thread_id"] and record["usage"]["input_tokens"] > 0
    assert not record.get("active_turn_id") and record["last_turn_id"]

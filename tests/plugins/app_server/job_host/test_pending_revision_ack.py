"""The real job host acknowledges exactly the pending revision it applied (docs/jobs.md).

The requests go straight to the host's control socket (no kernel ``control_job``, whose
own acknowledgement would hide the host's): the record is first marked ``pending`` the
way the kernel does. A host whose control outlived its caller — here its app-server is
stopped (SIGSTOP) while the host is inside the handler, and the record moves on to a
newer pending revision meanwhile — must not mark that newer revision ``applied``.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.waiting import Background, wait_until

from mmo_kernel.hosts.control_socket import send_control_request
from mmo_kernel.jobs.cancel import cancel_job
from mmo_kernel.jobs.records import read_job_record, update_job
from mmo_kernel.state.processes import process_matches

from .conftest import finish, spawn


def _working(session, task="Slow work FAKE_SLEEP=600") -> dict:
    """A job whose host is ready for controls and whose turn is in progress."""
    job_id = spawn(session, "plain", task)
    return wait_until(lambda: (r := read_job_record(job_id)).get("control_socket_ready")
                      and r.get("active_turn_id") and r, timeout=60,
                      what="a ready host with an active turn")


def _mark_pending(job_id: str, revision: int, action: str) -> None:
    """What the kernel records before it sends a control (docs/jobs.md, step 1)."""
    update_job(job_id, control_revision=revision, last_control_action=action,
               last_control_status="pending")


def _steer(record: dict, expected: int) -> dict:
    return send_control_request(record["control_socket_path"], {
        "action": "steer", "expected_revision": expected, "revision": expected + 1,
        "input": "Wrap up now."}, timeout=60)


def _sent(record: dict, method: str) -> bool:
    rows = [json.loads(line) for line in Path(record["events_path"]).read_text().splitlines()]
    return any(r["direction"] == "sent" and r["message"].get("method") == method for r in rows)


@pytest.fixture
def working(session) -> Iterator[Callable[[], dict]]:
    """Start working jobs; any still running at the end is cancelled and its host awaited."""
    started: list[dict] = []

    def start() -> dict:
        started.append(_working(session))
        return started[-1]

    yield start
    for record in started:
        cancel_job(record["job_id"], session["session_id"], caller_agent="lead")
        wait_until(lambda r=record: not process_matches(r["runner_pid"], r["runner_start_token"]),
                   what="the job host to exit")


def test_the_host_itself_acknowledges_the_pending_revision_it_applied(session, working):
    record = working()
    revision = record.get("control_revision", 0)
    _mark_pending(record["job_id"], revision + 1, "steer")
    reply = _steer(record, revision)
    assert reply["result"]["turn_id"] == record["active_turn_id"]
    acknowledged = read_job_record(record["job_id"])
    assert acknowledged["control_revision"] == revision + 1
    assert acknowledged["last_control_status"] == "applied"
    assert finish(session, record["job_id"])["status"] == "completed"  # the steer ended it


def test_a_late_reply_never_acknowledges_a_newer_pending_revision(session, working):
    record = working()
    revision = record.get("control_revision", 0)
    _mark_pending(record["job_id"], revision + 1, "steer")
    os.killpg(record["app_server_pgid"], signal.SIGSTOP)
    try:
        late = Background(_steer, record, revision)
        # the host consumed the revision and is inside the handler, waiting on its app-server
        wait_until(lambda: _sent(record, "turn/steer"), what="the host to send turn/steer")
        _mark_pending(record["job_id"], revision + 2, "interrupt")  # the caller moved on
    finally:
        os.killpg(record["app_server_pgid"], signal.SIGCONT)
    assert late.join()["result"]["turn_id"] == record["active_turn_id"]
    after = read_job_record(record["job_id"])
    assert after["control_revision"] == revision + 2
    assert after["last_control_action"] == "interrupt"
    assert after["last_control_status"] == "pending"
    assert finish(session, record["job_id"])["last_control_status"] == "pending"

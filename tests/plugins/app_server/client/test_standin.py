"""The session helper against the deterministic Codex stand-in (behaviour markers)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from mmo_app_server.approvals import ApprovalPolicy
from mmo_app_server.client import AppServerClient
from mmo_app_server.errors import TransportLost
from mmo_app_server.events import jsonl_recorder
from mmo_app_server.session import AppServerSession

from mmo_kernel.state.audit import read_jsonl


@pytest.fixture
def standin(mmo_env: Any, mmo_process_guard: Any, mmo_standin: Path, tmp_path: Path) -> Any:
    workspace = tmp_path / "workspace"
    workspace.mkdir()

    def open_session(**kwargs: Any) -> AppServerSession:
        client = AppServerClient.spawn([str(mmo_standin), "app-server"], cwd=workspace,
                                       env=dict(os.environ),
                                       stderr_path=tmp_path / "stderr.log", **kwargs)
        session = AppServerSession(client)
        client.initialize()
        return session

    return open_session


def test_notifications_before_the_response_are_buffered(standin: Any) -> None:
    session = standin()
    try:
        thread_id = session.start_thread()["thread"]["id"]
        outcome = session.run_turn(thread_id, "hello FAKE_NOTIFY_BEFORE_RESPONSE", timeout=15)
    finally:
        session.client.close()
    assert outcome.status == "completed" and "FAKE_CODEX_OK" in (outcome.final_message or "")
    assert outcome.token_usage is not None


def test_interrupt_cuts_a_sleeping_turn_short(standin: Any) -> None:
    session = standin()
    try:
        thread_id = session.start_thread()["thread"]["id"]
        turn = session.start_turn(thread_id, "work FAKE_SLEEP=30")
        session.interrupt(thread_id, turn["id"])
        outcome = session.wait_turn_completed(turn["id"], timeout=10)
    finally:
        session.client.close()
    assert outcome.status == "interrupted"


def test_never_policy_declines_the_standins_approval(standin: Any, tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    session = standin(approvals=ApprovalPolicy(approval_policy="never"),
                      recorder=jsonl_recorder(events))
    try:
        thread_id = session.start_thread()["thread"]["id"]
        outcome = session.run_turn(thread_id, "run it FAKE_REQUEST_COMMAND_APPROVAL", timeout=15)
    finally:
        session.client.close()
    assert outcome.status == "completed"
    answers = [row["message"] for row in read_jsonl(events) if row["direction"] == "sent"
               and str(row["message"].get("id", "")).startswith("fake-approval-")]
    assert [answer["result"] for answer in answers] == [{"decision": "decline"}]


def test_crash_loses_transport_and_a_new_server_resumes_the_thread(standin: Any) -> None:
    session = standin()
    try:
        thread_id = session.start_thread()["thread"]["id"]
        turn = session.start_turn(thread_id, "go FAKE_APP_SERVER_CRASH_ONCE")
        with pytest.raises(TransportLost):
            session.wait_turn_completed(turn["id"], timeout=15)
    finally:
        session.client.close()
    recovered = standin()
    try:
        recovered.resume_thread(thread_id)
        turns = recovered.read_thread(thread_id)["turns"]
        again = recovered.run_turn(thread_id, "retry FAKE_APP_SERVER_CRASH_ONCE", timeout=15)
    finally:
        recovered.client.close()
    assert [t["status"] for t in turns] == ["interrupted"]
    assert again.status == "completed"

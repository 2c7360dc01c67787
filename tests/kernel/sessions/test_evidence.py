"""Partial results come from the last recorded agent message plus the stop reason."""

from __future__ import annotations

from mmo_kernel.hosts.evidence import final_message, last_agent_message, partial_text
from mmo_kernel.state.audit import append_jsonl


def row(message):
    return {"recorded_at": "t", "direction": "received", "message": message}


def test_last_agent_message_wins_and_other_items_are_ignored(tmp_path):
    events = tmp_path / "root-events.jsonl"
    append_jsonl(events, row({"method": "item/completed",
                              "params": {"item": {"type": "agentMessage", "text": "first"}}}))
    append_jsonl(events, row({"method": "item/completed",
                              "params": {"item": {"type": "commandExecution", "command": "ls"}}}))
    append_jsonl(events, row({"method": "item/completed",
                              "params": {"item": {"type": "agentMessage", "text": "second"}}}))
    append_jsonl(events, row({"id": 3, "result": {}}))
    assert last_agent_message(events) == "second"
    text = partial_text(events, "external harness wall expired")
    assert text.startswith("second") and text.rstrip().endswith("external harness wall expired")


def test_no_evidence_is_said_plainly(tmp_path):
    text = partial_text(tmp_path / "missing.jsonl", "requested operator input")
    assert "no agent message was recorded" in text and "requested operator input" in text


def test_final_message_of_a_turn():
    turn = {"items": [{"type": "userMessage"}, {"type": "agentMessage", "text": "done"}]}
    assert final_message(turn) == "done"
    assert final_message({"items": []}) is None

"""``FAKE_HOLD_UNTIL=<path>``: a turn holds until a file exists (the kill matrix's gate)."""

from __future__ import annotations

import pytest


@pytest.fixture
def client(spawn_standin):
    server = spawn_standin()
    server.initialize()
    return server


def _status(client, thread: str) -> list[str]:
    turns = client.call("thread/read", {"threadId": thread, "includeTurns": True})["thread"]
    return [t["status"] for t in turns["turns"]]


def test_the_turn_holds_until_the_file_appears_and_later_turns_inherit_it(client, tmp_path):
    gate = tmp_path / "gate"
    thread = client.start_thread()
    turn = client.start_turn(thread, f"work FAKE_HOLD_UNTIL={gate}")
    with pytest.raises(TimeoutError):
        client.turn_completed(turn, timeout=1.0)
    assert _status(client, thread) == ["inProgress"]
    gate.touch()
    assert client.turn_completed(turn)["status"] == "completed"
    # inherited from the thread's first input: the file exists now, so it does not hold
    assert client.run_turn(thread, "continue")["status"] == "completed"


def test_steer_cuts_a_hold_short(client, tmp_path):
    thread = client.start_thread()
    turn = client.start_turn(thread, f"work FAKE_HOLD_UNTIL={tmp_path / 'never'}")
    client.call("turn/steer", {"threadId": thread, "expectedTurnId": turn,
                               "input": [{"type": "text", "text": "finish now"}]})
    assert client.turn_completed(turn)["status"] == "completed"

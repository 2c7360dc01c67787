"""Folding an agent's event log: turns, open tool calls, the thread's tokens, the last message."""

from __future__ import annotations

import json

from mmo_kernel.views.activity import AgentActivity


def line(method: str, params: dict, at: str = "2026-12-01T10:00:00+00:00",
         direction: str = "received") -> bytes:
    """A line as the host records it (``recorded_at``, ``direction``, ``message``)."""
    return json.dumps({"recorded_at": at, "direction": direction,
                       "message": {"method": method, "params": params}},
                      separators=(",", ":")).encode()


def usage(total_in: int, total_out: int, last_in: int, last_out: int) -> dict:
    return {"tokenUsage": {"total": {"inputTokens": total_in, "outputTokens": total_out},
                           "last": {"inputTokens": last_in, "outputTokens": last_out}}}


def test_an_open_command_is_what_the_agent_does_and_tokens_are_the_thread_total():
    fold = AgentActivity()
    fold.feed([
        line("turn/started", {"turn": {"id": "t1"}}, "2026-12-01T10:00:00+00:00"),
        line("item/started", {"item": {"id": "c1", "type": "commandExecution",
                                       "command": "pytest -q tests/io"}},
             "2026-12-01T10:00:05+00:00"),
        line("item/commandExecution/outputDelta", {"delta": "x" * 10_000}),
        line("thread/tokenUsage/updated", usage(900, 40, 300, 10)),
    ])
    assert fold.turns == 1
    assert fold.doing() == {"kind": "command", "label": "$ pytest -q tests/io",
                            "since": fold.spans[-1].start}
    assert (fold.input_tokens, fold.output_tokens) == (900, 40)
    assert fold.lines_parsed == 3  # the output delta is skipped unparsed

    fold.feed([
        line("item/completed", {"item": {"id": "c1", "type": "commandExecution",
                                         "command": "pytest -q tests/io", "status": "completed"}},
             "2026-12-01T10:00:46+00:00"),
        line("item/completed", {"item": {"id": "m1", "type": "agentMessage",
                                         "text": "All  tests\npass."}}),
        line("turn/completed", {"turn": {"id": "t1", "status": "completed"}},
             "2026-12-01T10:01:00+00:00"),
    ])
    assert fold.doing() is None and fold.last_message == "All tests pass."
    turn, command = list(fold.spans)
    assert (turn.kind, turn.status, turn.end - turn.start) == ("turn", "completed", 60.0)
    assert (command.kind, command.status, command.end - command.start) == (
        "command", "completed", 41.0)


def test_a_turn_without_an_open_item_is_thinking_and_interrupted_items_are_closed():
    fold = AgentActivity()
    fold.feed([line("turn/started", {"turn": {"id": "t1"}}),
               line("item/started", {"item": {"id": "x", "type": "mcpToolCall",
                                              "server": "mmo_mesh", "tool": "agents_wait"}})])
    assert fold.doing()["label"] == "mmo_mesh.agents_wait"
    fold.feed([line("turn/completed", {"turn": {"status": "interrupted"}}),
               line("turn/started", {"turn": {"id": "t2"}})])
    assert fold.doing()["label"] == "thinking · turn 2"
    assert [s.status for s in fold.spans] == ["interrupted", "interrupted", None]


def test_sent_messages_torn_lines_and_unknown_methods_change_nothing():
    fold = AgentActivity()
    fold.feed([line("turn/started", {}, direction="sent"), b'{"recorded_at":"x","direc',
               line("thread/goal/updated", {"goal": {}}), b"not json at all"])
    assert (fold.turns, fold.lines_parsed, fold.doing()) == (0, 0, None)

"""Folding a run of log bytes finds exactly the lines a line-by-line fold would."""

from __future__ import annotations

import json

from mmo_kernel.views.activity import AgentActivity
from mmo_kernel.views.tail import LogTail


def line(method: str, params: dict, at: str = "2026-12-01T10:00:00+00:00",
         direction: str = "received") -> bytes:
    return json.dumps({"recorded_at": at, "direction": direction,
                       "message": {"method": method, "params": params}},
                      separators=(",", ":")).encode()


def test_only_a_lines_own_method_counts_and_lines_fold_in_log_order():
    nested = line("turn/started", {})  # an envelope inside another message's payload
    within = line("x", {"n": {"direction": "received", "message": {"method": "turn/started"}}},
                  at="1")
    assert within.rindex(b'"turn/started"') < 160
    chunk = b"\n".join([
        line("item/started", {"item": {"id": "c1", "type": "commandExecution",
                                       "command": "make"}}, "2026-12-01T10:00:01+00:00"),
        line("item/commandExecution/outputDelta", {"delta": nested.decode()}),
        within,  # a nested envelope within the first bytes: not this line's own method
        b"   ",
        line("turn/started", {}, direction="sent"),
        line("item/completed", {"item": {"id": "c1", "type": "commandExecution",
                                         "command": "make", "status": "failed"}},
             "2026-12-01T10:00:04+00:00"),
        b'{"recorded_at":"2026","direction":"received","message":{"method":"turn/started"',
        line("turn/started", {}, "2026-12-01T10:00:05+00:00"),
    ])
    fold = AgentActivity()
    fold.feed_chunk(chunk)
    assert (fold.turns, fold.lines_parsed) == (1, 3)  # the torn line is skipped
    command, turn = list(fold.spans)
    assert (command.label, command.status, command.end - command.start) == ("$ make", "failed",
                                                                             3.0)
    assert (turn.kind, fold.doing()["label"]) == ("turn", "thinking · turn 1")

    by_lines = AgentActivity()
    by_lines.feed(chunk.split(b"\n"))
    assert [s.as_dict() for s in by_lines.spans] == [s.as_dict() for s in fold.spans]
    assert by_lines.timeline(1) == fold.timeline(1) == [turn.as_dict()]


def test_a_closed_spans_dict_is_kept_and_an_open_ones_is_not():
    fold = AgentActivity()
    fold.feed([line("turn/started", {}), line("item/started", {"item": {
        "id": "w", "type": "webSearch", "query": "q"}})])
    first = fold.timeline(40)
    fold.feed([line("item/completed", {"item": {"id": "w", "type": "webSearch",
                                                "query": "q"}}, "2026-12-01T10:00:09+00:00")])
    second = fold.timeline(40)
    assert first[1]["end"] is None and second[1]["end"] is not None  # rebuilt once closed
    assert fold.timeline(40)[1] is second[1]


def test_a_chunk_holds_complete_lines_only_and_each_byte_is_read_once(tmp_path):
    log = tmp_path / "events.jsonl"
    log.write_bytes(b"one\ntwo\nthr")
    tail = LogTail(log)
    assert tail.read_chunk() == b"one\ntwo"
    assert tail.read_chunk() == b""
    with log.open("ab") as out:
        out.write(b"ee\nfour")
    assert tail.read_chunk() == b"three"
    assert tail.bytes_read == len(b"one\ntwo\nthree\nfour")

"""Runner-link frames and chunking (spec 12, "Runner link"): both ends share this code."""

from __future__ import annotations

import base64
import json
import secrets

import pytest

from mmo_kernel.project_tools.link import (
    CHUNK_THRESHOLD_BYTES,
    MAX_FRAME_BYTES,
    Call,
    Chunk,
    Hello,
    JobEvent,
    LinkProtocolError,
    Ping,
    Projects,
    Reassembler,
    Reply,
    Welcome,
    dump_frame,
    encode_frames,
    parse_frame,
)

PROJECT = {"id": "code", "name": "Code", "description": "", "vcs": "git"}


def big_reply(size: int, call_id: str = "mmo_call_1") -> Reply:
    return Reply(call_id=call_id, envelope={"success": True,
                                            "output": {"data": secrets.token_hex(size // 2)}})


@pytest.mark.parametrize("frame", [
    Hello(client_id="laptop", owner="alice", version="1", projects=[PROJECT],
          live_job_ids=["mmo_pjob_1"]),
    Welcome(heartbeat_secs=15), Ping(),
    Call(call_id="c", tool="read_files", arguments={"project": "code"}, user="alice",
         session=None, deadline_unix_ms=1),
    Reply(call_id="c", envelope={"success": False, "error": "gone",
                                 "output": {"error_kind": "file_not_found",
                                            "state_changed": False}}),
    Projects(projects=[PROJECT]),
    JobEvent(job_id="mmo_pjob_1", status="completed", exit_code=7),
])
def test_a_small_frame_is_one_frame_and_parses_back(frame):
    frames = encode_frames(frame)
    assert len(frames) == 1
    assert parse_frame(frames[0]) == frame
    assert json.loads(frames[0])["type"] == frame.type


def test_a_message_over_256_kib_travels_as_ordered_chunks_of_at_most_1_mib():
    reply = big_reply(2 * 1024 * 1024 + 5)

    frames = encode_frames(reply)

    chunks = [parse_frame(text) for text in frames]
    assert len(frames) > 2
    assert all(isinstance(chunk, Chunk) and chunk.call_id == reply.call_id for chunk in chunks)
    assert [chunk.seq for chunk in chunks] == list(range(len(chunks)))
    assert [chunk.final for chunk in chunks] == [False] * (len(chunks) - 1) + [True]
    assert all(len(text.encode()) <= MAX_FRAME_BYTES for text in frames)
    joined = b"".join(base64.b64decode(chunk.data_b64) for chunk in chunks)
    assert joined == dump_frame(reply).encode()
    reassembler = Reassembler()
    results = [reassembler.feed(chunk) for chunk in chunks]
    assert results[:-1] == [None] * (len(chunks) - 1)
    assert results[-1] == reply
    assert reassembler.pending_calls == []


def test_exactly_256_kib_is_not_chunked_and_one_byte_more_is():
    base = len(dump_frame(big_reply(0)).encode())
    fits = Reply(call_id="mmo_call_1", envelope={"success": True, "output": {
        "data": "x" * (CHUNK_THRESHOLD_BYTES - base)}})
    assert len(dump_frame(fits).encode()) == CHUNK_THRESHOLD_BYTES
    assert len(encode_frames(fits)) == 1
    over = Reply(call_id="mmo_call_1", envelope={"success": True, "output": {
        "data": "x" * (CHUNK_THRESHOLD_BYTES - base + 1)}})
    assert parse_frame(encode_frames(over)[0]).type == "chunk"


def test_interleaved_calls_reassemble_independently():
    first, second = big_reply(700_000, "a"), big_reply(900_000, "b")
    a_frames, b_frames = encode_frames(first), encode_frames(second)
    reassembler = Reassembler()
    done = []
    for pair in zip(a_frames, b_frames, strict=False):
        for text in pair:
            result = reassembler.feed(parse_frame(text))
            if result is not None:
                done.append(result)
    for text in b_frames[len(a_frames):]:
        result = reassembler.feed(parse_frame(text))
        if result is not None:
            done.append(result)
    assert sorted(done, key=lambda r: r.call_id) == [first, second]


def test_an_out_of_order_chunk_is_refused_and_its_pieces_forgotten():
    chunks = [parse_frame(text) for text in encode_frames(big_reply(1024 * 1024))]
    reassembler = Reassembler()
    reassembler.feed(chunks[0])
    with pytest.raises(LinkProtocolError, match=r"chunk 2 of call mmo_call_1 out of order "
                                                r"\(expected 1\)"):
        reassembler.feed(chunks[2])
    assert reassembler.pending_calls == []
    with pytest.raises(LinkProtocolError, match="expected 0"):
        reassembler.feed(chunks[1])  # no start any more


def test_a_chunked_message_over_the_bound_is_refused():
    chunks = [parse_frame(text) for text in encode_frames(big_reply(1024 * 1024))]
    reassembler = Reassembler(max_message_bytes=600 * 1024)
    reassembler.feed(chunks[0])
    with pytest.raises(LinkProtocolError, match="over 614400 bytes"):
        reassembler.feed(chunks[1])
    assert reassembler.pending_calls == []


def test_a_chunked_message_must_be_its_own_call_or_reply():
    reply = big_reply(600_000, "a")
    chunks = [parse_frame(text) for text in encode_frames(reply)]
    renamed = [chunk.model_copy(update={"call_id": "b"}) for chunk in chunks]
    reassembler = Reassembler()
    with pytest.raises(LinkProtocolError, match="not that call's call or reply"):
        for chunk in renamed:
            reassembler.feed(chunk)
    bad = Chunk(call_id="c", seq=0, data_b64="not base64!", final=True)
    with pytest.raises(LinkProtocolError, match="not base64"):
        reassembler.feed(bad)


@pytest.mark.parametrize("text, message", [
    ("not json", "frame is not JSON"),
    ("[1]", "not a JSON object with a string type"),
    ('{"type": "nope"}', "invalid nope frame"),
    ('{"type": "ping", "extra": 1}', "invalid ping frame: extra: Extra inputs are not permitted"),
    ('{"type": "hello", "protocol": 2, "client_id": "laptop", "owner": "alice", '
     '"version": "1", "projects": []}', "invalid hello frame: protocol"),
    ('{"type": "hello", "protocol": 1, "client_id": "Bad Id", "owner": "alice", '
     '"version": "1", "projects": []}', "invalid hello frame: client_id"),
    ('{"type": "reply", "call_id": "c", "envelope": {"ok": 1}}',
     "invalid reply frame: envelope: Value error, not a tool-result envelope"),
    ('{"type": "chunk", "call_id": "c", "seq": -1, "data_b64": "", "final": true}',
     "invalid chunk frame: seq"),
])
def test_a_frame_that_is_not_one_is_refused_in_one_line(text, message):
    with pytest.raises(LinkProtocolError) as raised:
        parse_frame(text)
    assert message in str(raised.value)
    assert "\n" not in str(raised.value)


def test_a_frame_over_1_mib_or_binary_is_refused():
    with pytest.raises(LinkProtocolError, match="frame over 1048576 bytes"):
        parse_frame(json.dumps({"type": "ping", "pad": "x" * MAX_FRAME_BYTES}))
    with pytest.raises(LinkProtocolError, match="binary frames"):
        parse_frame(b'{"type": "ping"}')


def test_only_calls_and_replies_may_be_chunked():
    projects = Projects(projects=[{"id": f"p{n}", "name": "x" * 300, "vcs": "none"}
                                  for n in range(1000)])
    with pytest.raises(LinkProtocolError, match="cannot be chunked"):
        encode_frames(projects)

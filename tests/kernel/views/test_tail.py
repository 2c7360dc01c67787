"""Tailing a log reads each appended byte once, holds back a torn line, restarts on a new file."""

from __future__ import annotations

import os

from mmo_kernel.views.tail import LogTail


def test_only_complete_new_lines_are_returned_and_each_byte_is_read_once(tmp_path):
    log = tmp_path / "events.jsonl"
    tail = LogTail(log)
    assert tail.read() == []  # no log yet
    log.write_bytes(b'{"a":1}\n{"b":')
    assert tail.read() == [b'{"a":1}']
    assert tail.read() == []
    with log.open("ab") as out:
        out.write(b'2}\n\n{"c":3}\n')
    assert tail.read() == [b'{"b":2}', b'{"c":3}']
    assert tail.bytes_read == log.stat().st_size


def test_a_bounded_read_catches_up_over_several_reads(tmp_path):
    log = tmp_path / "events.jsonl"
    log.write_bytes(b"".join(b'{"n":%d}\n' % i for i in range(100)))
    tail = LogTail(log)
    seen: list[bytes] = []
    while chunk := tail.read(max_bytes=64):
        seen += chunk
    assert seen == [b'{"n":%d}' % i for i in range(100)]
    assert tail.bytes_read == log.stat().st_size


def test_a_replaced_or_truncated_log_is_read_again_from_its_start(tmp_path):
    log = tmp_path / "events.jsonl"
    log.write_bytes(b"one\ntwo\n")
    tail = LogTail(log)
    assert tail.read() == [b"one", b"two"] and not tail.restarted
    replacement = tmp_path / "new"
    replacement.write_bytes(b"three\n")
    os.replace(replacement, log)
    assert tail.read() == [b"three"] and tail.restarted
    log.write_bytes(b"")
    assert tail.read() == [] and tail.restarted
    log.write_bytes(b"four\n")
    assert tail.read() == [b"four"]


def test_a_symlinked_log_is_not_followed(tmp_path):
    target = tmp_path / "secret.txt"
    target.write_text("not a log\n")
    log = tmp_path / "events.jsonl"
    log.symlink_to(target)
    assert LogTail(log).read() == []

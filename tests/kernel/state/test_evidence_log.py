"""A host's event log: lines written at once, fsynced together before the next record.

A power loss cannot be produced here, so the order of fsyncs is observed by
wrapping ``os.fsync``; the kill -9 case is a real killed process.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

from mmo_kernel.state.audit import EvidenceLog, read_jsonl
from mmo_kernel.state.files import atomic_write_json


def _spy_fsync(monkeypatch) -> list[str]:
    seen: list[str] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        seen.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return seen


def test_lines_are_synced_once_before_the_next_record_and_at_close(tmp_path, monkeypatch):
    events, record = tmp_path / "events.jsonl", tmp_path / "metadata.json"
    log = EvidenceLog(events)
    seen = _spy_fsync(monkeypatch)
    for n in range(5):
        log.append({"n": n})
    assert seen == []  # no fsync per line
    assert [row["n"] for row in read_jsonl(events)] == [0, 1, 2, 3, 4]  # yet readable at once
    atomic_write_json(record, {"status": "running"})
    assert seen[0] == str(events)  # the log reached the disk before the record
    assert seen.count(str(events)) == 1
    seen.clear()
    atomic_write_json(record, {"status": "running", "again": True})
    assert str(events) not in seen  # nothing new: no fsync of the log
    log.append({"n": 5})
    log.close()
    assert seen.count(str(events)) == 1
    seen.clear()
    atomic_write_json(record, {"status": "completed"})
    assert str(events) not in seen  # a closed log is no longer a barrier
    log.append({"n": 6})  # a closed log reopens (the host restarts its app-server)
    log.close()
    assert [row["n"] for row in read_jsonl(events)] == list(range(7))


def test_a_killed_writer_loses_no_line_and_a_torn_line_stays_apart(tmp_path):
    events = tmp_path / "events.jsonl"
    events.write_bytes(b'{"old":1}\n{"torn":')  # a crash tore the last line earlier
    script = textwrap.dedent(f"""
        import os, signal
        from mmo_kernel.state.audit import EvidenceLog
        log = EvidenceLog({str(events)!r})
        for n in range(3):
            log.append({{"n": n, "key": "sk-evidence-secret-123456"}})
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    env = {**os.environ, "EVIDENCE_API_KEY": "sk-evidence-secret-123456"}  # a secret-looking name
    done = subprocess.run([sys.executable, "-c", script], env=env, timeout=60)
    assert done.returncode == -signal.SIGKILL
    lines = events.read_bytes().split(b"\n")
    assert lines[:2] == [b'{"old":1}', b'{"torn":']
    assert [row["n"] for row in read_jsonl(events) if "n" in row] == [0, 1, 2]
    assert b"sk-evidence-secret" not in events.read_bytes()  # redacted as append_jsonl does

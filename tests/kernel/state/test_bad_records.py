"""Bad records and a full disk are reported in one line naming the file (issue 13, item 10).

A wrongly typed field names the file and the field; a write that finds the disk full
says which file it could not write, keeps the old record and leaves nothing
half-written. The full disk is real when this process may mount a tiny tmpfs (root in
the sandbox); elsewhere the same guarantees are checked with ENOSPC injected at the
system calls (``os.fsync`` for record writes, ``os.write`` for log appends), the only
way to get a full disk there.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from mmo_kernel import package_version
from mmo_kernel.errors import StorageError
from mmo_kernel.jobs.records import job_dir, read_job_record
from mmo_kernel.sessions.records import (
    new_record_id,
    read_run_record,
    read_session_record,
    session_file,
    utc_now,
    write_run_record,
    write_session_record,
)
from mmo_kernel.state.audit import append_audit, read_jsonl

TMPFS_BYTES = 256 * 1024


def make_session(status: str = "running") -> dict[str, Any]:
    sid, run_id, now = new_record_id("demo"), new_record_id("run"), utc_now()
    record = write_session_record({
        "session_id": sid, "status": status, "profile_id": "demo", "snapshot_hash": "ab" * 32,
        "cwd": "/tmp", "session_kind": "noninteractive", "root_agent": "lead",
        "created_at": now, "run_created_at": now, "current_run_id": run_id, "run_sequence": 1,
        "root_mcp_token_hash": "00" * 32})
    write_run_record({"run_id": run_id, "session_id": sid, "sequence": 1, "kind": "initial",
                      "status": status, "created_at": now, "root_mcp_token_hash": "00" * 32})
    append_audit(session_file(sid, "audit.jsonl"), "run_started", run_id)
    return record


def rewrite(path: Path, **changes: Any) -> None:
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))


# ------------------------------------------------------------- bad fields --


def test_a_wrongly_typed_session_field_is_one_line_naming_the_file_and_the_field(mmo_env):
    sid = make_session()["session_id"]
    path = session_file(sid, "session.json")
    rewrite(path, created_at=5)
    with pytest.raises(ValueError) as caught:
        read_session_record(sid)
    assert str(caught.value) == f"{path}: field 'created_at': Input should be a valid string"


def test_nested_and_unknown_fields_are_named_by_their_key_path(mmo_env):
    sid = make_session()["session_id"]
    path = session_file(sid, "session.json")
    rewrite(path, homes={"lead": {"home": 7}}, surprise=True)
    with pytest.raises(ValueError) as caught:
        read_session_record(sid)
    assert str(caught.value) == (f"{path}: field 'homes.lead.home': Input should be a valid "
                                 "string; field 'surprise': unknown field")


def test_a_bad_run_record_names_its_run_json(mmo_env):
    record = make_session()
    path = session_file(record["session_id"], "runs", record["current_run_id"], "run.json")
    rewrite(path, created_at=[])
    with pytest.raises(ValueError) as caught:
        read_run_record(record["session_id"], record["current_run_id"])
    message = str(caught.value)
    assert message.startswith(f"{path}: ") and "field 'created_at'" in message
    assert "\n" not in message


def test_a_bad_job_record_names_its_metadata_json(mmo_env):
    job_id = new_record_id("worker")
    job_dir(job_id).mkdir(parents=True)
    path = job_dir(job_id) / "metadata.json"
    path.write_text(json.dumps({
        "schema_version": 1, "package_version": package_version(), "job_id": job_id,
        "session_id": "s1", "agent": "worker", "status": "completed", "created_at": utc_now(),
        "depth": "1"}))
    with pytest.raises(ValueError) as caught:
        read_job_record(job_id)
    assert str(caught.value) == f"{path}: field 'depth': Input should be a valid integer"


# -------------------------------------------------------------- full disk --


@dataclass
class FullDisk:
    """The state dir on a disk that ``fill()`` makes full and ``free()`` frees again."""

    root: Path
    real: bool
    monkeypatch: pytest.MonkeyPatch
    undo: list[Any] = field(default_factory=list)

    def fill(self) -> None:
        if self.real:
            fd = os.open(self.root / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
            try:
                while True:
                    os.write(fd, b"\0" * 4096)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
            finally:
                os.close(fd)
            return
        self._inject()

    def _inject(self) -> None:
        """A disk with a few bytes left: appends write what fits, then fail; fsync fails."""
        real_write, budget = os.write, [40]

        def write(fd: int, data: Any) -> int:
            if budget[0] <= 0:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            done = real_write(fd, bytes(data)[:budget[0]])
            budget[0] -= done
            return done

        def fsync(fd: int) -> None:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        self.monkeypatch.setattr(os, "write", write)
        self.monkeypatch.setattr(os, "fsync", fsync)

    def free(self) -> None:
        if self.real:
            (self.root / "filler").unlink()
        else:
            self.monkeypatch.undo()


@pytest.fixture
def full_disk(mmo_env, tmp_path, monkeypatch):
    disk = tmp_path / "disk"
    disk.mkdir(mode=0o700)
    real = os.geteuid() == 0 and subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={TMPFS_BYTES},mode=0700", "tmpfs", str(disk)],
        capture_output=True).returncode == 0
    state = disk / "state"
    state.mkdir(mode=0o700)
    monkeypatch.setenv("MMO_STATE_DIR", str(state))
    injected = pytest.MonkeyPatch()
    try:
        yield FullDisk(state, real, injected)
    finally:
        injected.undo()
        if real:
            from mmo_kernel.state import index

            index.close()  # this process's listing-index connection keeps the disk busy
            subprocess.run(["umount", str(disk)], check=True)


def leftovers(root: Path) -> list[Path]:
    """Temp files an interrupted atomic write would have left."""
    return [p for p in root.rglob("*") if p.name.endswith(".tmp")]


def test_a_full_disk_keeps_the_old_record_and_names_the_file(full_disk):
    from mmo_kernel.sessions.state import update_session

    sid = make_session()["session_id"]
    path = session_file(sid, "session.json")
    before = path.read_bytes()
    full_disk.fill()
    with pytest.raises(StorageError) as caught:
        update_session(sid, error="x" * 20000)
    full_disk.free()
    assert str(caught.value) == f"cannot write {path}: no space left on device"
    assert isinstance(caught.value, OSError) and caught.value.errno == errno.ENOSPC
    assert path.read_bytes() == before and read_session_record(sid)["status"] == "running"
    assert leftovers(full_disk.root) == []


def test_a_full_disk_never_leaves_a_torn_line_in_the_audit_log(full_disk):
    record = make_session()
    path = session_file(record["session_id"], "audit.jsonl")
    before = path.read_bytes()
    full_disk.fill()
    with pytest.raises(StorageError) as caught:  # longer than what fits: written in part
        append_audit(path, "agent_spawned", record["current_run_id"], note="y" * 20000)
    full_disk.free()
    assert str(caught.value) == f"cannot write {path}: no space left on device"
    assert path.read_bytes() == before  # the part that fitted was taken back
    append_audit(path, "run_resumed", record["current_run_id"])
    events = [e["event"] for e in read_jsonl(path, strict=True)]
    assert events == ["run_started", "run_resumed"]


def test_the_cli_says_which_file_a_full_disk_refused_in_one_line(full_disk, capsys):
    from mmo_kernel.cli import main

    sid = make_session()["session_id"]
    path = session_file(sid, "session.json")
    before = path.read_bytes()
    full_disk.fill()
    code = main(["cancel", sid])
    full_disk.free()
    err = capsys.readouterr().err
    assert code == 1
    assert err == f"mmo: error: cannot write {path}: no space left on device\n"
    assert path.read_bytes() == before and leftovers(full_disk.root) == []

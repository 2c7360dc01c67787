"""Gaps the mutation run found in ``state.files`` and ``state.redaction``.

See docs/mutation-survivors.md. Each test pins a behaviour no other test of the state
package checked: the byte-level path of the stream redactor (a child's output that is
not UTF-8), the error of a write that cannot even create its temporary file, and lock
files that outlive their holder (so every locker shares one inode).
"""

from __future__ import annotations

import errno
import os
import stat
import subprocess
import tempfile

import pytest

from mmo_kernel.errors import StorageError
from mmo_kernel.state.files import atomic_write_bytes, lifecycle_lock, runtime_lock
from mmo_kernel.state.redaction import Redactor

NOT_UTF8 = b"\xff\xfe"


def test_non_utf8_output_has_every_known_value_replaced_by_its_own_marker():
    redactor = Redactor({"sk-live-abcdef123456": "OPENAI_API_KEY",
                         "ghp_zyx987654321abc": "GH_TOKEN"})
    line = NOT_UTF8 + b" key=sk-live-abcdef123456 then ghp_zyx987654321abc " + NOT_UTF8 + b"\n"
    assert redactor.stream(line) == (NOT_UTF8 + b" key=[redacted:OPENAI_API_KEY] then "
                                     b"[redacted:GH_TOKEN] " + NOT_UTF8 + b"\n")
    again = NOT_UTF8 + b"ghp_zyx987654321abc"  # the compiled pattern is reused, not stale
    assert redactor.stream(again) == NOT_UTF8 + b"[redacted:GH_TOKEN]"


def test_in_non_utf8_output_the_longest_value_wins_over_its_prefix():
    redactor = Redactor({"abcd1234wxyz": "SHORT_TOKEN", "abcd1234wxyz5678efgh": "LONG_TOKEN"})
    assert redactor.stream(NOT_UTF8 + b" abcd1234wxyz5678efgh " + NOT_UTF8) == (
        NOT_UTF8 + b" [redacted:LONG_TOKEN] " + NOT_UTF8)
    assert redactor.stream(NOT_UTF8 + b" abcd1234wxyz-") == NOT_UTF8 + b" [redacted:SHORT_TOKEN]-"


def test_lock_files_stay_after_release_so_every_locker_shares_one_inode(mmo_env, tmp_path):
    with runtime_lock() as path:
        inode = os.stat(path).st_ino
    assert os.stat(path).st_ino == inode  # removing it would let two holders lock two files
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    session = tmp_path / "session"
    session.mkdir()
    with lifecycle_lock(session) as held:
        pass
    assert held.is_file()


@pytest.fixture
def no_inodes_left(tmp_path):
    """A directory where no file can be created (a tmpfs out of inodes when this process
    may mount one, as root in the sandbox; else ``mkstemp`` fails with ENOSPC injected,
    the only way to run out of inodes there)."""
    disk = tmp_path / "disk"
    disk.mkdir(mode=0o700)
    real = os.geteuid() == 0 and subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1M,nr_inodes=8,mode=0700", "tmpfs", str(disk)],
        capture_output=True).returncode == 0
    injected = pytest.MonkeyPatch()
    try:
        if real:
            for n in range(64):
                try:
                    (disk / f"filler-{n}").touch()
                except OSError as exc:
                    assert exc.errno == errno.ENOSPC
                    break
        else:
            def mkstemp(*args, **kwargs):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            injected.setattr(tempfile, "mkstemp", mkstemp)
        yield disk
    finally:
        injected.undo()
        if real:
            subprocess.run(["umount", str(disk)], check=True)


def test_a_record_that_cannot_even_get_a_temp_file_names_itself(no_inodes_left):
    record = no_inodes_left / "session.json"
    with pytest.raises(StorageError) as caught:
        atomic_write_bytes(record, b"{}\n")
    assert str(caught.value) == f"cannot write {record}: no space left on device"
    assert not record.exists()


def test_an_io_error_syncing_the_directory_after_the_rename_names_the_record(tmp_path,
                                                                          monkeypatch):
    """The rename is only durable once its directory is synced; an I/O error there (which
    cannot be produced on a healthy disk: injected) is the same one-line StorageError."""
    from mmo_kernel.state import files

    def broken_sync(path):
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(files, "_fsync_dir", broken_sync)
    record = tmp_path / "session.json"
    with pytest.raises(StorageError) as caught:
        atomic_write_bytes(record, b"{}\n")
    assert str(caught.value) == f"cannot write {record}: input/output error"

"""State-dir primitives at their edges: modes, formats, each refusal's message (spec 03).

``test_state_files.py`` and ``test_state_locks.py`` cover the rules; these pin
what an atomic write leaves (mode, bytes, no temp file, also after a failure),
redaction on and off, every ``read_json`` / ``safe_path`` message and the lock
paths, so a changed default, flag or phrase in ``state.files`` fails a test
(``make mutate``).
"""

from __future__ import annotations

import json
import os
import stat
import threading
from pathlib import Path, PurePosixPath

import pytest

from mmo_kernel.errors import StateError
from mmo_kernel.state.files import (
    LockBusy,
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_text,
    ensure_state_layout,
    lifecycle_lock,
    read_json,
    runtime_lock,
    safe_path,
)

SECRET = "sk-edge-test-0123456789abcdef"


def mode_of(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.fixture
def folder(tmp_path) -> Path:
    path = tmp_path / "records"
    path.mkdir()
    return path


def test_atomic_writes_use_the_given_mode_and_leave_only_the_file(folder):
    target = folder / "data.bin"
    atomic_write_bytes(target, b"\x00\xff raw")
    assert target.read_bytes() == b"\x00\xff raw" and mode_of(target) == 0o600
    atomic_write_bytes(target, b"again", mode=0o644)
    assert target.read_bytes() == b"again" and mode_of(target) == 0o644
    atomic_write_text(folder / "t.txt", "é ✓\n", mode=0o640)
    assert (folder / "t.txt").read_bytes() == "é ✓\n".encode()
    assert mode_of(folder / "t.txt") == 0o640
    atomic_write_text(folder / "d.txt", "x")
    assert mode_of(folder / "d.txt") == 0o600
    atomic_write_json(folder / "j.json", {"z": "é", "a": [1, {"c": None}]}, mode=0o644)
    assert (folder / "j.json").read_text(encoding="utf-8") == (
        '{\n  "a": [\n    1,\n    {\n      "c": null\n    }\n  ],\n  "z": "\\u00e9"\n}\n')
    assert mode_of(folder / "j.json") == 0o644
    atomic_write_json(folder / "k.json", [])
    assert mode_of(folder / "k.json") == 0o600
    assert sorted(p.name for p in folder.iterdir()) == ["d.txt", "data.bin", "j.json", "k.json",
                                                         "t.txt"]


def test_a_failed_atomic_write_keeps_the_old_file_and_no_temp(folder):
    target = folder / "keep.json"
    atomic_write_bytes(target, b"old")
    with pytest.raises(OverflowError):
        atomic_write_bytes(target, b"new", mode=2**80)  # fails after the temp file exists
    assert target.read_bytes() == b"old"
    assert [p.name for p in folder.iterdir()] == ["keep.json"]
    with pytest.raises(FileNotFoundError):
        atomic_write_bytes(folder / "missing" / "x", b"y")
    assert [p.name for p in folder.iterdir()] == ["keep.json"]


def test_secrets_are_redacted_unless_the_content_is_the_users(folder, monkeypatch):
    monkeypatch.setenv("MMO_EDGE_TEST_API_KEY", SECRET)
    marker = "[redacted:MMO_EDGE_TEST_API_KEY]"
    atomic_write_bytes(folder / "a", f"key={SECRET}".encode())
    assert (folder / "a").read_text() == f"key={marker}"
    atomic_write_bytes(folder / "b", f"key={SECRET}".encode(), redact=False)
    assert (folder / "b").read_text() == f"key={SECRET}"
    atomic_write_text(folder / "c", SECRET)
    assert (folder / "c").read_text() == marker
    atomic_write_text(folder / "d", SECRET, redact=False)
    assert (folder / "d").read_text() == SECRET
    atomic_write_json(folder / "e", {SECRET: [SECRET]})
    assert json.loads((folder / "e").read_text()) == {marker: [marker]}
    atomic_write_json(folder / "f", {"k": SECRET}, redact=False)
    assert json.loads((folder / "f").read_text()) == {"k": SECRET}


def test_read_json_messages_name_the_path(tmp_path):
    real = tmp_path / "real.json"
    real.write_text('{"ok": 1}')
    assert read_json(real) == {"ok": 1} and read_json(str(real)) == {"ok": 1}
    link = tmp_path / "link.json"
    link.symlink_to(real)
    with pytest.raises(StateError) as info:
        read_json(link)
    assert str(info.value) == f"record cannot traverse symlink {link}"
    folder = tmp_path / "dir.json"
    folder.mkdir()
    with pytest.raises(ValueError) as info:
        read_json(folder)
    assert str(info.value) == f"{folder}: unreadable record (Is a directory)"
    bad = tmp_path / "bad.json"
    bad.write_bytes(b"\xff")
    with pytest.raises(ValueError) as info:
        read_json(bad)
    assert str(info.value).startswith(f"{bad}: unreadable JSON record (")
    bad.write_text("[1,")
    with pytest.raises(ValueError) as info:
        read_json(bad)
    assert str(info.value).startswith(f"{bad}: unreadable JSON record (Expecting")
    with pytest.raises(FileNotFoundError):
        read_json(tmp_path / "absent.json")


def test_safe_path_messages_name_what_and_where(tmp_path):
    root = tmp_path / "root"
    (root / "a").mkdir(parents=True)
    (root / "file").write_text("x")
    with pytest.raises(StateError) as info:
        safe_path(root, "a", "/etc", what="job file")
    assert str(info.value) == f"job file cannot traverse outside {root}: absolute path '/etc'"
    with pytest.raises(StateError) as info:
        safe_path(root, "a/../b")
    assert str(info.value) == f"path cannot traverse outside {root}: 'a/../b'"
    with pytest.raises(StateError) as info:
        safe_path(root, "file", "below")
    assert str(info.value) == f"path cannot traverse non-directory {root / 'file'}"
    os.symlink(root / "a", root / "link")
    with pytest.raises(StateError) as info:
        safe_path(root, "link", "x", what="record")
    assert str(info.value) == f"record cannot traverse symlink {root / 'link'}"


def test_safe_path_joins_clean_components(tmp_path):
    assert safe_path(tmp_path, "a//b/./c", PurePosixPath("d"), "") == tmp_path / "a/b/c/d"
    assert safe_path(tmp_path) == tmp_path
    assert safe_path(tmp_path, ".", "./") == tmp_path
    (tmp_path / "x").mkdir()
    os.symlink("/nowhere", tmp_path / "x" / "dangling")
    # nothing is checked beyond the first missing component
    assert safe_path(tmp_path, "missing", "dangling") == tmp_path / "missing" / "dangling"
    with pytest.raises(StateError, match="cannot traverse symlink"):
        safe_path(tmp_path, "x", "dangling")


def test_the_layout_is_the_state_dir(mmo_env):
    assert ensure_state_layout() == mmo_env.state_dir
    assert ensure_state_layout() == mmo_env.state_dir  # idempotent


def test_the_locks_yield_their_private_lock_files(mmo_env, tmp_path):
    with runtime_lock() as path:
        assert path == mmo_env.state_dir / "runtime.lock"
    assert path.exists() and mode_of(path) == 0o600  # the lock file is kept
    session = mmo_env.state_dir / "sessions" / "s1"
    session.mkdir(parents=True)
    with lifecycle_lock(session) as held:
        assert held == session / "lifecycle.lock"
    assert held.exists() and mode_of(held) == 0o600
    outside = tmp_path / "elsewhere" / "s2"
    outside.mkdir(parents=True)
    with lifecycle_lock(outside) as held:
        assert held == outside / "lifecycle.lock"


def test_a_lifecycle_lock_under_a_symlinked_state_subdir_is_refused(mmo_env, tmp_path):
    real = tmp_path / "real-sessions"
    (real / "s1").mkdir(parents=True)
    os.symlink(real, mmo_env.state_dir / "sessions")
    with pytest.raises(StateError) as info:
        with lifecycle_lock(mmo_env.state_dir / "sessions" / "s1"):
            pass
    assert str(info.value) == (
        f"lifecycle lock cannot traverse symlink {mmo_env.state_dir / 'sessions'}")
    assert not (real / "s1" / "lifecycle.lock").exists()


def test_a_busy_lock_names_itself_and_the_timeout(mmo_env):
    held, release = threading.Event(), threading.Event()

    def hold():
        with runtime_lock():
            held.set()
            release.wait()

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        held.wait()
        with pytest.raises(LockBusy) as info:
            with runtime_lock(timeout=0.05):
                pass
        assert str(info.value) == (f"runtime lock {mmo_env.state_dir / 'runtime.lock'} is held "
                                   "by another process; gave up after 0.05 s")
    finally:
        release.set()
        thread.join()


def test_a_symlinked_lock_of_a_session_dir_outside_the_state_dir_is_refused(mmo_env, tmp_path):
    outside = tmp_path / "elsewhere" / "s3"
    outside.mkdir(parents=True)
    (outside / "lifecycle.lock").symlink_to(tmp_path / "target.lock")
    with pytest.raises(StateError) as info:
        with lifecycle_lock(outside):
            pass
    assert str(info.value) == f"lifecycle lock cannot traverse symlink {outside / 'lifecycle.lock'}"
    assert not (tmp_path / "target.lock").exists()

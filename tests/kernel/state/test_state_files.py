"""Atomic writes, JSON reads, safe paths and the state-dir layout."""

import os
import stat

import pytest

from mmo_kernel.errors import StateError
from mmo_kernel.state.files import atomic_write_json, ensure_state_layout, read_json, safe_path
from mmo_kernel.state.paths import STATE_SUBDIRS


def mode_of(path):
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_layout_creates_private_folders(mmo_env):
    root = ensure_state_layout()
    assert root == mmo_env.state_dir
    assert mode_of(root) == 0o700
    for name in STATE_SUBDIRS:
        assert (root / name).is_dir() and mode_of(root / name) == 0o700
    assert sorted(p.name for p in root.iterdir()) == sorted(STATE_SUBDIRS)


def test_layout_refuses_a_symlinked_subfolder(mmo_env, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o755)
    before = mode_of(elsewhere)
    (mmo_env.state_dir / "sessions").symlink_to(elsewhere)
    with pytest.raises(StateError, match="state layout cannot traverse symlink .*sessions"):
        ensure_state_layout()
    assert mode_of(elsewhere) == before
    assert list(elsewhere.iterdir()) == []


def test_atomic_json_is_private_and_leaves_no_temp(tmp_path):
    folder = tmp_path / "records"
    folder.mkdir()
    target = folder / "record.json"
    atomic_write_json(target, {"b": 1, "a": [True]})
    atomic_write_json(target, {"b": 2})
    assert read_json(target) == {"b": 2}
    assert target.read_text(encoding="utf-8") == '{\n  "b": 2\n}\n'
    assert mode_of(target) == 0o600
    assert [p.name for p in folder.iterdir()] == ["record.json"]


def test_read_json_failures_name_the_path(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_json(tmp_path / "missing.json")
    broken = tmp_path / "broken.json"
    broken.write_text('{"half": ', encoding="utf-8")
    with pytest.raises(ValueError, match="broken.json: unreadable JSON"):
        read_json(broken)
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe")
    with pytest.raises(ValueError, match="binary.json"):
        read_json(binary)
    folder = tmp_path / "folder.json"
    folder.mkdir()
    with pytest.raises(ValueError, match="folder.json: unreadable record"):
        read_json(folder)


def test_read_json_refuses_a_symlinked_record(tmp_path):
    real = tmp_path / "real.json"
    real.write_text("{}", encoding="utf-8")
    link = tmp_path / "session.json"
    link.symlink_to(real)
    with pytest.raises(StateError, match="record cannot traverse symlink .*session.json"):
        read_json(link)


def test_safe_path_accepts_plain_and_not_yet_existing_paths(tmp_path):
    (tmp_path / "sessions" / "s1").mkdir(parents=True)
    assert safe_path(tmp_path, "sessions", "s1", "run.json") == tmp_path / "sessions/s1/run.json"
    assert safe_path(tmp_path, "sessions/s1/runs/r1") == tmp_path / "sessions/s1/runs/r1"
    assert safe_path(tmp_path, "new", "deeper") == tmp_path / "new" / "deeper"


def test_safe_path_refuses_a_symlinked_directory(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "root" / "s1").mkdir(parents=True)
    (tmp_path / "root" / "s1" / "runs").symlink_to(outside)
    with pytest.raises(StateError) as caught:
        safe_path(tmp_path / "root", "s1", "runs", "r1", "run.json", what="run record")
    assert str(caught.value) == f"run record cannot traverse symlink {tmp_path / 'root/s1/runs'}"


def test_safe_path_refuses_a_symlinked_file_even_if_dangling(tmp_path):
    (tmp_path / "lifecycle.lock").symlink_to(tmp_path / "nowhere")
    with pytest.raises(StateError, match="lifecycle lock cannot traverse symlink"):
        safe_path(tmp_path, "lifecycle.lock", what="lifecycle lock")


@pytest.mark.parametrize("parts", [("..", "x"), ("a/../../x",), ("/etc/passwd",)])
def test_safe_path_refuses_escaping_root(tmp_path, parts):
    with pytest.raises(StateError, match="record cannot traverse outside"):
        safe_path(tmp_path, *parts, what="record")


def test_safe_path_refuses_a_file_used_as_a_folder(tmp_path):
    (tmp_path / "plain").write_text("x", encoding="utf-8")
    with pytest.raises(StateError, match="cannot traverse non-directory"):
        safe_path(tmp_path, "plain", "child", "leaf")

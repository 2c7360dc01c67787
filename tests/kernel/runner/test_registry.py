"""The project registry (spec 12): accepted projects, and every skip rule with one warning."""

from __future__ import annotations

import logging
import os
import subprocess
from pathlib import Path

import pytest

from mmo_kernel.runner.config import load_config
from mmo_kernel.runner.registry import Registry


@pytest.fixture(autouse=True)
def _env(mmo_env, mmo_process_guard):
    yield mmo_env


@pytest.fixture
def layout(tmp_path: Path):
    """``allowed`` (the policy's root), ``outside`` and the registry dir ``reg``."""
    allowed, outside, reg = tmp_path / "allowed", tmp_path / "outside", tmp_path / "reg"
    for directory in (allowed, outside, reg):
        directory.mkdir()
    config = tmp_path / "runner.toml"
    config.write_text(f'''server_url = "http://127.0.0.1:1"
token = "mmo_rt_0123456789abcdef"
client_id = "laptop"
owner = "alice"
project_registry_dir = "{reg}"
[policy]
allowed_roots = ["{allowed}"]
''')
    os.chmod(config, 0o600)
    return allowed, outside, reg, load_config(config)


def project(reg: Path, name: str, text: str) -> Path:
    path = reg / f"{name}.toml"
    path.write_text(text, encoding="utf-8")
    return path


def warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "mmo.runner" and r.levelno == logging.WARNING]


def test_valid_projects_are_registered_without_their_paths(layout):
    allowed, _, reg, config = layout
    (allowed / "code").mkdir()
    subprocess.run(["git", "init", "-q", str(allowed / "code")], check=True)
    (allowed / "data").mkdir()
    project(reg, "code", f'id = "code"\npath = "{allowed / "code"}"\nname = "Code"\n'
                         'description = "a git repo"\n')
    project(reg, "data", f'id = "data"\npath = "{allowed / "data"}/"\n')
    registry = Registry(config)
    assert registry.rescan() is True
    assert registry.wire() == [
        {"id": "code", "name": "Code", "description": "a git repo", "vcs": "git"},
        {"id": "data", "name": "data", "description": "", "vcs": "none"}]
    assert registry.projects()["data"].root == (allowed / "data").resolve()
    assert registry.rescan() is False  # nothing changed


def test_each_bad_file_is_skipped_with_one_warning_and_never_listed(layout, caplog):
    allowed, outside, reg, config = layout
    (allowed / "ok").mkdir()
    (allowed / "real").mkdir()
    (allowed / "linked").symlink_to(allowed / "real")
    (allowed / "a").mkdir()
    (allowed / "b").mkdir()
    (allowed / "escape").symlink_to(outside)  # a parent symlink: realpath leaves the root
    (outside / "sub").mkdir()
    files = {
        "broken": project(reg, "broken", "id = \n"),
        "unknown-key": project(reg, "unknown-key",
                               f'id = "x"\npath = "{allowed / "ok"}"\ncolour = 1\n'),
        "bad-id": project(reg, "bad-id", f'id = "Bad Id"\npath = "{allowed / "ok"}"\n'),
        "missing": project(reg, "missing", f'id = "gone"\npath = "{allowed / "nope"}"\n'),
        "outside": project(reg, "outside", f'id = "out"\npath = "{outside}"\n'),
        "via-link": project(reg, "via-link",
                            f'id = "esc"\npath = "{allowed / "escape" / "sub"}"\n'),
        "symlinked": project(reg, "symlinked", f'id = "lnk"\npath = "{allowed / "linked"}"\n'),
        "dup-a": project(reg, "dup-a", f'id = "dup"\npath = "{allowed / "a"}"\n'),
        "dup-b": project(reg, "dup-b", f'id = "dup"\npath = "{allowed / "b"}"\n'),
        "relative": project(reg, "relative", 'id = "rel"\npath = "allowed/ok"\n'),
    }
    project(reg, "good", f'id = "good"\npath = "{allowed / "ok"}"\n')
    (reg / "notes.txt").write_text("not a project file")
    registry = Registry(config)
    with caplog.at_level(logging.WARNING, logger="mmo.runner"):
        registry.rescan()
    assert [p["id"] for p in registry.wire()] == ["good"]
    lines = warnings(caplog)
    assert all("\n" not in line for line in lines)
    for name, file in files.items():
        assert sum(str(file) in line for line in lines) == 1, (name, lines)
    assert len(lines) == len(files)
    by_file = {name: next(line for line in lines if str(file) in line)
               for name, file in files.items()}
    assert "outside every policy.allowed_roots" in by_file["outside"]
    assert "outside every policy.allowed_roots" in by_file["via-link"]
    assert "symlink" in by_file["symlinked"]
    assert "does not exist" in by_file["missing"]
    assert "duplicate id 'dup'" in by_file["dup-a"] and "duplicate id 'dup'" in by_file["dup-b"]
    assert "unknown key 'colour'" in by_file["unknown-key"]

    caplog.clear()  # a rescan of the same files warns no more
    with caplog.at_level(logging.WARNING, logger="mmo.runner"):
        assert registry.rescan() is False
    assert warnings(caplog) == []


def test_a_rescan_sees_added_fixed_and_removed_projects(layout):
    allowed, _, reg, config = layout
    (allowed / "one").mkdir()
    registry = Registry(config)
    registry.rescan()
    assert registry.wire() == []
    first = project(reg, "one", f'id = "one"\npath = "{allowed / "one"}"\n')
    assert registry.rescan() is True and [p["id"] for p in registry.wire()] == ["one"]
    project(reg, "again", f'id = "one"\npath = "{allowed / "one"}"\n')
    assert registry.rescan() is True and registry.wire() == []  # duplicate: both gone
    (reg / "again.toml").unlink()
    assert registry.rescan() is True and [p["id"] for p in registry.wire()] == ["one"]
    subprocess.run(["git", "init", "-q", str(allowed / "one")], check=True)
    assert registry.rescan() is True and registry.wire()[0]["vcs"] == "git"
    first.unlink()
    assert registry.rescan() is True and registry.wire() == []


def test_a_missing_registry_dir_means_no_projects(layout, caplog):
    _, _, reg, config = layout
    reg.rmdir()
    registry = Registry(config)
    with caplog.at_level(logging.WARNING, logger="mmo.runner"):
        registry.rescan()
    assert registry.wire() == [] and len(warnings(caplog)) == 1

"""One way to find Codex for every command: env, settings, the checkout's pinned CLI, PATH."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mmo_kernel.config.settings import load_settings, resolve_codex_binary, set_setting
from mmo_kernel.hosts.codex_cli import PINNED_CODEX_VERSION

MMO = str(Path(sys.executable).with_name("mmo"))
TRIPLES = {"x86_64": ("codex-linux-x64", "x86_64-unknown-linux-musl"),
           "aarch64": ("codex-linux-arm64", "aarch64-unknown-linux-musl")}


def executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\necho codex-cli 0.0.0\n", encoding="utf-8")
    os.chmod(path, 0o755)
    return path


def npm_install(root: Path) -> tuple[Path, Path]:
    """A node_modules layout as npm leaves it: the launcher and the native binary it wraps."""
    import platform

    package, triple = TRIPLES.get(platform.machine(), TRIPLES["x86_64"])
    modules = root / "node_modules"
    native = executable(modules / "@openai" / package / "vendor" / triple / "bin" / "codex")
    launcher = executable(modules / "@openai" / "codex" / "bin" / "codex.js")
    (modules / ".bin").mkdir()
    (modules / ".bin" / "codex").symlink_to(launcher)
    return launcher, native


@pytest.fixture
def no_codex_on_path(monkeypatch, tmp_path):
    """PATH without any codex (but with what the test itself needs)."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", f"{empty}{os.pathsep}/usr/bin{os.pathsep}/bin")
    return empty


def test_the_environment_wins_over_everything(tmp_path, monkeypatch, no_codex_on_path):
    chosen = executable(tmp_path / "env" / "codex")
    load_settings()
    set_setting("codex_bin", str(executable(tmp_path / "settings" / "codex")))
    monkeypatch.setenv("MMO_CODEX_BIN", str(chosen))
    assert resolve_codex_binary(project_root=tmp_path / "checkout") == chosen.resolve()


def test_settings_win_over_the_pinned_cli(tmp_path, no_codex_on_path):
    _, pinned = npm_install(tmp_path / "checkout" / ".codex-cli")
    configured = executable(tmp_path / "settings" / "codex")
    load_settings()
    set_setting("codex_bin", str(configured))
    assert resolve_codex_binary(project_root=tmp_path / "checkout") == configured.resolve()


def test_the_checkouts_pinned_cli_wins_over_path(tmp_path, monkeypatch, no_codex_on_path):
    _, pinned = npm_install(tmp_path / "checkout" / ".codex-cli")
    executable(no_codex_on_path / "codex")
    assert resolve_codex_binary(project_root=tmp_path / "checkout") == pinned


def test_codex_on_path_is_resolved_past_the_npm_launcher(tmp_path, monkeypatch, no_codex_on_path):
    _, native = npm_install(tmp_path / "global")
    monkeypatch.setenv("PATH", f"{tmp_path / 'global' / 'node_modules' / '.bin'}{os.pathsep}"
                               f"{os.environ['PATH']}")
    assert resolve_codex_binary(project_root=tmp_path / "no-checkout") == native


def test_nothing_found_says_how_to_fix_it(tmp_path, no_codex_on_path):
    with pytest.raises(FileNotFoundError) as missing:
        resolve_codex_binary(project_root=tmp_path / "no-checkout")
    message = str(missing.value)
    assert "MMO_CODEX_BIN" in message and "mmo settings set codex_bin" in message
    assert f"@openai/codex@{PINNED_CODEX_VERSION}" in message


def test_mmo_run_refuses_a_missing_codex_in_one_line_with_the_fix(tmp_path, no_codex_on_path,
                                                                  mmo_git_workspace):
    """Refused before any session exists."""
    done = subprocess.run([MMO, "run", "adaptive-engineering", "hello", "--cwd",
                           str(mmo_git_workspace)],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120,
                          env={**os.environ, "MMO_CODEX_BIN": str(tmp_path / "nowhere" / "codex")})
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mmo: error: codex executable")
    assert "MMO_CODEX_BIN" in lines[0] and "Traceback" not in done.stderr
    listed = subprocess.run([MMO, "sessions", "--json"], capture_output=True, text=True,
                            stdin=subprocess.DEVNULL, timeout=60)
    assert listed.returncode == 0, listed.stderr
    assert '"session_id"' not in listed.stdout


def test_the_demo_uses_a_codex_named_on_path(tmp_path, monkeypatch, no_codex_on_path):
    """`MMO_CODEX_BIN=codex mmo demo` used to fail with `does not exist`."""
    from mmo_kernel.demo.run import STANDIN_NAME, choose_codex

    standin = Path(sys.executable).with_name(STANDIN_NAME)
    (no_codex_on_path / "codex").symlink_to(standin)
    monkeypatch.setenv("MMO_CODEX_BIN", "codex")
    path, _ = choose_codex(tmp_path / "no-checkout")
    assert path == standin.resolve()
    monkeypatch.delenv("MMO_CODEX_BIN")
    assert choose_codex(tmp_path / "no-checkout")[0] == standin.resolve()

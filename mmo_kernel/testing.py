"""pytest fixtures for MMO's suite and for third-party plugin authors.

Loaded by pytest through the ``pytest11`` entry point ``mmo``, so importing
it must stay cheap: heavy modules are imported inside the fixtures.

Fixtures: ``mmo_env`` (private state/config dirs and a user ``CODEX_HOME``),
``mmo_workspace``, ``mmo_git_workspace``, ``mmo_process_guard`` and
``mmo_standin``. The stand-in's own fixtures (``standin_home``,
``standin_workspace``, ``spawn_standin``) come from its package's ``pytest11``
entry point ``mmo_codex_standin``. To guard every test of a suite, add to its ``conftest.py``::

    @pytest.fixture(autouse=True)
    def _no_leftover_processes(mmo_process_guard):
        yield
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

DUMMY_AUTH = '{"OPENAI_API_KEY": null, "tokens": null, "last_refresh": null}\n'
GUARD_ENV = "MMO_TEST_PROCESS_GUARD"
"""Marker every guarded test's children inherit, so orphans can be found too."""
STANDIN_NAME = "mmo-codex-standin"
GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "MMO Test",
    "GIT_AUTHOR_EMAIL": "mmo-test@localhost",
    "GIT_COMMITTER_NAME": "MMO Test",
    "GIT_COMMITTER_EMAIL": "mmo-test@localhost",
}


@dataclass(frozen=True)
class MmoEnv:
    """The private directories ``mmo_env`` set up for one test."""

    root: Path
    state_dir: Path
    config_dir: Path
    codex_home: Path


def _private_dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(path, 0o700)
    return path


@pytest.fixture
def mmo_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> MmoEnv:
    """Point MMO at private tmp state/config dirs and a user CODEX_HOME with auth.json.

    ``MMO_CODEX_BIN`` is cleared so the caller's shell never leaks into a test,
    and the XDG variables point into the tmp dir so nothing falls back to
    the real home.
    """
    root = _private_dir(tmp_path / "mmo-env")
    env = MmoEnv(
        root=root,
        state_dir=_private_dir(root / "state"),
        config_dir=_private_dir(root / "config"),
        codex_home=_private_dir(root / "codex-home"),
    )
    auth = env.codex_home / "auth.json"
    auth.write_text(DUMMY_AUTH, encoding="utf-8")
    os.chmod(auth, 0o600)
    monkeypatch.setenv("MMO_STATE_DIR", str(env.state_dir))
    monkeypatch.setenv("MMO_CONFIG_DIR", str(env.config_dir))
    monkeypatch.setenv("CODEX_HOME", str(env.codex_home))
    monkeypatch.setenv("XDG_STATE_HOME", str(_private_dir(root / "xdg-state")))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(_private_dir(root / "xdg-config")))
    monkeypatch.delenv("MMO_CODEX_BIN", raising=False)
    # Codex's login shells source $HOME/.bashrc; a private HOME keeps the user's
    # shell start-up (and anything it spawns) out of the test.
    monkeypatch.setenv("HOME", str(_private_dir(root / "home")))
    return env


@pytest.fixture
def mmo_workspace(tmp_path: Path) -> Path:
    """An empty workspace directory for one test."""
    return _private_dir(tmp_path / "workspace")


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True)


@pytest.fixture
def mmo_git_workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git repository on branch ``main`` with one commit (``README.md``).

    Identity comes from ``GIT_AUTHOR_*``/``GIT_COMMITTER_*`` and the global
    and system git config are masked for the test, so the user's git config
    is neither read nor written.
    """
    for name, value in GIT_IDENTITY.items():
        monkeypatch.setenv(name, value)
    empty_config = tmp_path / "gitconfig-global"
    empty_config.write_text("", encoding="utf-8")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(empty_config))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    repo = _private_dir(tmp_path / "git-workspace")
    _git(repo, "init", "-q", "-b", "main")
    (repo / "README.md").write_text("# test workspace\n", encoding="utf-8")
    _git(repo, "add", "README.md")
    _git(repo, "commit", "-q", "-m", "initial commit")
    return repo


@dataclass
class ProcessGuard:
    """Tracks the processes a test starts; see ``mmo_process_guard``."""

    marker: str
    baseline: set[tuple[int, float]] = field(default_factory=set)
    allowed: set[int] = field(default_factory=set)

    def allow(self, pid: int) -> None:
        """Let ``pid`` outlive the test (e.g. a deliberately shared server)."""
        self.allowed.add(pid)

    def leftovers(self) -> list[Any]:
        """Live processes the test started and left behind."""
        import psutil

        found: dict[int, Any] = {}
        for proc in _descendants() + _marked(self.marker):
            try:
                key = (proc.pid, proc.create_time())
                if key in self.baseline or proc.pid in self.allowed:
                    continue
                if proc.status() != psutil.STATUS_ZOMBIE:
                    found[proc.pid] = proc
            except psutil.Error:
                continue
        return [p for p in found.values() if not _retired_warm_host(p)]


EXIT_GRACE_SECONDS = 10.0
"""How long a process may take to end on its own after the test (a host that finished its
job retires and exits a moment later; on a loaded machine that moment is longer)."""


def _still_running(guard: ProcessGuard, grace_seconds: float) -> list[Any]:
    """The guard's leftovers once they had ``grace_seconds`` to exit by themselves."""
    import time

    deadline = time.monotonic() + grace_seconds
    left = guard.leftovers()
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = guard.leftovers()
    return left


def _descendants() -> list[Any]:
    import psutil

    try:
        return psutil.Process().children(recursive=True)
    except psutil.Error:
        return []


def _marked(marker: str) -> list[Any]:
    """Processes of this user whose environment carries the guard marker."""
    import psutil

    me, uid = os.getpid(), os.getuid()
    needle = f"{GUARD_ENV}={marker}".encode()
    found = []
    for proc in psutil.process_iter():
        if proc.pid == me:
            continue
        try:
            with open(f"/proc/{proc.pid}/environ", "rb") as handle:
                if needle in handle.read().split(b"\0") and proc.uids().real == uid:
                    found.append(proc)
        except (OSError, psutil.Error):
            continue
    return found


def _retired_warm_host(proc: Any) -> bool:
    """A warm host (``mmo_kernel.hosts.warm_host``) whose children all ended is no
    leftover: it would exit after its idle time. Stop it now; its live children (and it,
    while they run) still count."""
    import psutil

    try:
        if proc.name() != "mmo-warm-host":
            return False
        if any(child.status() != psutil.STATUS_ZOMBIE for child in proc.children()):
            return False
        proc.terminate()
        return _ends(proc, 10.0)
    except psutil.Error:
        return True  # it ended meanwhile


def _ends(proc: Any, seconds: float) -> bool:
    """Whether ``proc`` exits within ``seconds`` (a zombie has: only its parent can reap it)."""
    import time

    import psutil

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.02)
    return False


def _describe(proc: Any) -> str:
    try:
        return f"pid {proc.pid} ({' '.join(' '.join(proc.cmdline()).split())[:160]})"
    except Exception:  # noqa: BLE001 - the process may vanish while we describe it
        return f"pid {proc.pid}"


@pytest.fixture
def mmo_process_guard(monkeypatch: pytest.MonkeyPatch):
    """Fail the test if it leaves processes alive; kill them first.

    Children are found two ways: descendants of the test process, and any
    process whose environment carries this test's ``MMO_TEST_PROCESS_GUARD``
    marker (which finds detached hosts that were re-parented to init).
    """
    guard = ProcessGuard(marker=uuid.uuid4().hex)
    for proc in _descendants():
        try:
            guard.baseline.add((proc.pid, proc.create_time()))
        except Exception:  # noqa: BLE001 - vanished between listing and reading
            continue
    monkeypatch.setenv(GUARD_ENV, guard.marker)
    yield guard
    left = _still_running(guard, EXIT_GRACE_SECONDS)
    if left:
        names = ", ".join(_describe(p) for p in left)
        from mmo_kernel.state.processes import kill_processes

        kill_processes(left, wait_seconds=5)
        pytest.fail(f"test left processes running (killed now): {names}", pytrace=False)


@pytest.fixture
def mmo_standin(monkeypatch: pytest.MonkeyPatch) -> Path:
    """Select the deterministic Codex stand-in (``MMO_CODEX_BIN``) for this test."""
    path = Path(sys.executable).parent / STANDIN_NAME
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.fail(
            f"{STANDIN_NAME} is not installed next to {sys.executable}; "
            "run `pip install -e .` in the project venv",
            pytrace=False,
        )
    monkeypatch.setenv("MMO_CODEX_BIN", str(path))
    return path


__all__ = [
    "MmoEnv", "mmo_env", "mmo_git_workspace", "mmo_process_guard", "mmo_standin", "mmo_workspace",
]

"""The pytest fixtures MMO ships (``mmo_kernel.testing``)."""

import os
import stat
import subprocess
import sys
import time

import psutil

from mmo_kernel.state import paths
from mmo_kernel.testing import GUARD_ENV

pytest_plugins = ["pytester"]


def alive(pid):
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_mmo_env_points_everything_at_private_tmp_dirs(mmo_env, tmp_path):
    assert mmo_env.root.is_relative_to(tmp_path)
    assert paths.state_dir() == mmo_env.state_dir
    assert paths.config_dir() == mmo_env.config_dir
    assert paths.user_codex_home() == mmo_env.codex_home
    for folder in (mmo_env.state_dir, mmo_env.config_dir, mmo_env.codex_home):
        assert folder.is_dir() and stat.S_IMODE(folder.stat().st_mode) == 0o700
    auth = mmo_env.codex_home / "auth.json"
    assert auth.is_file() and stat.S_IMODE(auth.stat().st_mode) == 0o600
    assert "MMO_CODEX_BIN" not in os.environ
    assert os.environ["XDG_STATE_HOME"].startswith(str(mmo_env.root))


def test_mmo_workspace_is_an_empty_folder(mmo_workspace):
    assert mmo_workspace.is_dir() and list(mmo_workspace.iterdir()) == []


def test_mmo_git_workspace_has_one_commit_with_a_fixed_identity(mmo_git_workspace):
    def git(*args):
        return subprocess.run(["git", *args], cwd=mmo_git_workspace, check=True,
                              capture_output=True, text=True).stdout.strip()

    assert git("log", "--format=%an <%ae>|%cn <%ce>") == (
        "MMO Test <mmo-test@localhost>|MMO Test <mmo-test@localhost>")
    assert git("rev-parse", "--abbrev-ref", "HEAD") == "main"
    assert git("status", "--porcelain") == ""
    assert git("ls-files") == "README.md"
    global_config = os.environ["GIT_CONFIG_GLOBAL"]
    assert global_config.startswith(str(mmo_git_workspace.parent))
    assert open(global_config, encoding="utf-8").read() == ""


def test_mmo_standin_selects_the_console_script_next_to_python(mmo_standin):
    assert mmo_standin == __import__("pathlib").Path(sys.executable).parent / "mmo-codex-standin"
    assert os.environ["MMO_CODEX_BIN"] == str(mmo_standin)
    assert os.access(mmo_standin, os.X_OK)


def test_process_guard_marks_the_environment_children_inherit(mmo_process_guard):
    assert os.environ[GUARD_ENV] == mmo_process_guard.marker


INNER = '''
import os, subprocess, sys
from pathlib import Path

from mmo_kernel.state.processes import spawn_detached

PIDS = Path(os.environ["PID_FILE"])
SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]
ORPHANER = [sys.executable, "-c",
            "import subprocess, sys\\n"
            "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\\n"
            "print(child.pid, flush=True)"]


def test_leaves_a_child(mmo_process_guard):
    proc = subprocess.Popen(SLEEPER)
    PIDS.write_text(str(proc.pid))


def test_leaves_an_orphan(mmo_process_guard, tmp_path):
    out = tmp_path / "out"
    pid, _ = spawn_detached(ORPHANER, cwd=tmp_path, env=dict(os.environ), stdout=out)
    import time
    from mmo_kernel.state.processes import process_alive
    while not out.read_text().strip() or process_alive(pid):
        time.sleep(0.02)
    PIDS.write_text(out.read_text().strip())


def test_cleans_up(mmo_process_guard):
    proc = subprocess.Popen(SLEEPER)
    proc.kill()
    proc.wait()


def test_starts_a_short_lived_child(mmo_process_guard):
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1)"],
                            start_new_session=True)
    PIDS.write_text(str(proc.pid))


def test_allows(mmo_process_guard):
    proc = subprocess.Popen(SLEEPER, start_new_session=True)
    mmo_process_guard.allow(proc.pid)
    PIDS.write_text(str(proc.pid))
'''


def run_inner(pytester, monkeypatch, name):
    pid_file = pytester.path / "pid"
    monkeypatch.setenv("PID_FILE", str(pid_file))
    pytester.makepyfile(test_inner=INNER)
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:xdist",
                                "-p", "no:hypothesispytest", "-k", name)
    return result, int(pid_file.read_text()) if pid_file.exists() else None


def test_guard_kills_and_reports_a_leftover_child(pytester, monkeypatch):
    result, pid = run_inner(pytester, monkeypatch, "test_leaves_a_child")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines([f"*test left processes running (killed now): pid {pid} (*"])
    assert not alive(pid)


def test_a_child_that_exits_by_itself_soon_after_the_test_is_no_leftover(pytester,
                                                                         monkeypatch):
    # a job host retires a moment after its job ended: that is no leak
    result, pid = run_inner(pytester, monkeypatch, "test_starts_a_short_lived_child")
    result.assert_outcomes(passed=1)
    assert not alive(pid)


def test_guard_finds_an_orphan_reparented_away_from_the_test(pytester, monkeypatch):
    result, pid = run_inner(pytester, monkeypatch, "test_leaves_an_orphan")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines([f"*test left processes running (killed now): pid {pid} (*"])
    deadline = time.monotonic() + 5
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not alive(pid)


def test_guard_passes_a_tidy_test(pytester, monkeypatch):
    result, _ = run_inner(pytester, monkeypatch, "test_cleans_up")
    result.assert_outcomes(passed=1)


def test_guard_lets_allowed_processes_live(pytester, monkeypatch):
    result, pid = run_inner(pytester, monkeypatch, "test_allows")
    try:
        result.assert_outcomes(passed=1)
        assert alive(pid)
    finally:
        psutil.Process(pid).kill()
        psutil.Process(pid).wait(timeout=5)

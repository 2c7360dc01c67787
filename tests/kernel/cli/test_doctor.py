"""``mmo doctor``: one line per check, --json, exit 1 when something blocks a run."""

from __future__ import annotations

import json
import os
import socket
import subprocess

from .conftest import MMO

CHECK_NAMES = ["codex", "git", "sandbox", "state dir", "config dir", "gateway port", "catalog",
               "routes"]


def doctor(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([MMO, "doctor", *args], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=120, env={**os.environ, **env})


def checks(done: subprocess.CompletedProcess[str]) -> dict[str, dict[str, str]]:
    report = json.loads(done.stdout)
    assert [c["name"] for c in report["checks"]] == CHECK_NAMES
    return {c["name"]: c for c in report["checks"]}


def test_a_ready_machine_passes_with_one_line_per_check(mmo_standin):
    done = doctor()
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1 + len(CHECK_NAMES)
    assert [line.split("  ")[0].strip() for line in lines[1:]] == CHECK_NAMES
    report = doctor("--json")
    assert report.returncode == 0 and json.loads(report.stdout)["ok"] is True
    found = checks(report)
    assert found["codex"]["status"] == "ok" and "stand-in" in found["codex"]["detail"]
    assert "local_scripted" in found["routes"]["detail"]


def test_a_missing_codex_blocks_and_says_how_to_fix_it(tmp_path):
    done = doctor("--json", MMO_CODEX_BIN=str(tmp_path / "no-codex"))
    assert done.returncode == 1
    report = json.loads(done.stdout)
    assert report["ok"] is False
    codex = checks(done)["codex"]
    assert codex["status"] == "fail" and "MMO_CODEX_BIN" in codex["detail"]


def test_a_gateway_port_taken_by_another_program_blocks(mmo_standin, mmo_env):
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        (mmo_env.config_dir / "settings.toml").write_text(
            f"schema_version = 1\ngateway_port = {port}\n", encoding="utf-8")
        done = doctor("--json")
    assert done.returncode == 1
    gateway = checks(done)["gateway port"]
    assert gateway["status"] == "fail" and str(port) in gateway["detail"]


def test_an_unusable_state_dir_fails_its_check_and_the_others_still_run(mmo_standin, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    done = doctor("--json", MMO_STATE_DIR=str(blocker / "state"))
    assert done.returncode == 1
    found = checks(done)
    assert found["state dir"]["status"] == "fail"
    assert str(blocker) in found["state dir"]["detail"]
    assert found["git"]["status"] in ("ok", "warn") and found["catalog"]["status"] == "ok"
    assert "Traceback" not in done.stderr


def test_a_broken_fragment_is_a_warning_naming_it_and_its_routes_are_not_available(
        mmo_standin, mmo_env):
    fragments = mmo_env.config_dir / "catalog.d"
    fragments.mkdir(parents=True, exist_ok=True)
    (fragments / "broken.toml").write_text("schema_version = 1\n[routes.oops\n", encoding="utf-8")
    done = doctor("--json")
    assert done.returncode == 0, done.stdout  # local_scripted still works: nothing blocks
    found = checks(done)
    assert found["catalog"]["status"] == "warn" and "broken.toml" in found["catalog"]["detail"]
    assert "local_scripted" in found["routes"]["detail"]

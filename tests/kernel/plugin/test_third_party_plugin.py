"""A separately distributed plugin, installed with pip, extends MMO like a built-in one."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.plugin_fixtures import ECHO_FRAGMENT, EXAMPLE_ROUTE, pip_install

MMO = Path(sys.executable).with_name("mmo")


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory) -> Path:
    """pip-install the fixture distribution into a private target dir."""
    target = pip_install(EXAMPLE_ROUTE, tmp_path_factory.mktemp("site"),
                         tmp_path_factory.mktemp("build"))
    assert list(target.glob("mmo_example_route-1.2.3.dist-info"))
    return target


def run_mmo(args: list[str], site: Path | None, env: dict[str, str]) -> subprocess.CompletedProcess:
    full_env = {**os.environ, **env}
    if site is not None:
        full_env["PYTHONPATH"] = str(site)
    return subprocess.run([str(MMO), *args], capture_output=True, text=True, env=full_env,
                          stdin=subprocess.DEVNULL, timeout=60)


def test_installed_plugin_appears_in_mmo_plugins(plugin_site, tmp_path):
    env = {"MMO_STATE_DIR": str(tmp_path / "state"), "MMO_CONFIG_DIR": str(tmp_path / "config")}
    before = json.loads(run_mmo(["plugins", "--json"], None, env).stdout)
    assert "example_echo" not in before["drivers"]["route_drivers"]

    result = run_mmo(["plugins", "--json"], plugin_site, env)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert "example_echo" in report["drivers"]["route_drivers"]
    plugin = next(p for p in report["plugins"] if p["name"] == "example_route")
    assert plugin == {
        "name": "example_route",
        "distribution": "mmo-example-route",
        "version": "1.2.3",
        "drivers": {"route_drivers": ["example_echo"]},
    }
    table = run_mmo(["plugins"], plugin_site, env).stdout
    assert "example_route" in table and "route_drivers: example_echo" in table




def _team_on_echo(tmp_path: Path) -> Path:
    """A copy of a built-in team whose root runs on the third-party route."""
    import tomllib

    from mmo_kernel.profiles.loading import locate_profile

    source = locate_profile("access-efficient-escalation-lab").folder
    team = tmp_path / "echo-team"
    shutil.copytree(source, team)
    text = (team / "profile.toml").read_text()
    doc = tomllib.loads(text)
    root = doc["root_agent"]
    old_model = doc["agents"][root]["model"]
    text = text.replace('id = "access-efficient-escalation-lab"', 'id = "echo-team"')
    text = text.replace(f'model = "{old_model}"', 'model = "echo__echo_small"', 1)
    text = "\n".join(line for line in text.splitlines()
                     if not line.startswith(("reasoning", "allowed_reasoning_efforts")))
    (team / "profile.toml").write_text(text)
    return team


def test_a_profile_compiles_with_a_route_on_the_plugins_driver(plugin_site, tmp_path):
    config = tmp_path / "config"
    (config / "catalog.d").mkdir(parents=True)
    (config / "catalog.d" / "echo.toml").write_text(ECHO_FRAGMENT)
    team = _team_on_echo(tmp_path)
    env = {"MMO_STATE_DIR": str(tmp_path / "state"), "MMO_CONFIG_DIR": str(config)}
    script = ("import json, sys; from mmo_kernel.profiles.snapshots import compile_profile; "
              "print(json.dumps(compile_profile(sys.argv[1])['manifest']))")
    without = subprocess.run([sys.executable, "-c", script, str(team)], capture_output=True,
                             text=True, env={**os.environ, **env}, stdin=subprocess.DEVNULL)
    assert without.returncode != 0 and "example_echo" in without.stderr
    compiled = subprocess.run([sys.executable, "-c", script, str(team)], capture_output=True,
                              text=True, env={**os.environ, **env, "PYTHONPATH": str(plugin_site)},
                              stdin=subprocess.DEVNULL)
    assert compiled.returncode == 0, compiled.stderr
    manifest = json.loads(compiled.stdout)
    assert manifest["profile_id"] == "echo-team"
    assert "echo__echo_small" in manifest["route_ids"].values()


@pytest.mark.real_codex
def test_a_session_on_the_plugins_route_runs_a_turn_through_its_driver(
        plugin_site, mmo_env, mmo_git_workspace, monkeypatch, tmp_path):
    """`mmo run` on the third-party route: the home points Codex at the gateway, the real
    Codex sends its model request there, and the example driver's answer is the result."""
    import tomllib

    from support.real_codex import codex_binary

    from mmo_kernel.gateway import stop_gateway

    monkeypatch.setenv("MMO_CODEX_BIN", str(codex_binary()))
    (mmo_env.config_dir / "catalog.d").mkdir(exist_ok=True)
    (mmo_env.config_dir / "catalog.d" / "echo.toml").write_text(ECHO_FRAGMENT)
    team = _team_on_echo(tmp_path)
    try:
        proc = run_mmo(["run", str(team), "Say hello back.", "--cwd", str(mmo_git_workspace),
                        "--wall", "60", "--json"], plugin_site, {})
    finally:
        stop_gateway()
    assert proc.returncode == 0, proc.stderr or proc.stdout[-3000:]
    outcome = json.loads(proc.stdout)
    assert outcome["status"] == "completed", outcome["session"].get("error")
    # the words only the example driver puts together: its route's greeting, the user's input
    assert outcome["result"] == "Ahoy from the echo route! You said: Say hello back."

    session = outcome["session"]
    root_home = session["homes"]["escalation_lead"]
    config = tomllib.loads(Path(root_home["config_toml"]).read_text())
    assert config["model"] == "echo__echo_small"
    assert config["model_provider"] == "mmo_echo"
    assert config["model_providers"]["mmo_echo"] == {
        "name": "Echo", "base_url": f"{session['gateway_url']}/routes/echo/v1",
        "wire_api": "responses", "http_headers": {
            "X-MMO-Session": session["session_id"], "X-MMO-Agent": "escalation_lead"}}

    log = [json.loads(line) for line in
           (mmo_env.state_dir / "gateway" / "requests.jsonl").read_text().splitlines()]
    assert [(r["route"], r["model"], r["status"]) for r in log] == [
        ("echo", "echo__echo_small", 200)]
    # the kernel's attribution headers reached the gateway through the plugin's provider block
    assert (log[0]["session_id"], log[0]["job_id"]) == (session["session_id"], None)
    # Codex charged the root exactly the usage the driver reported
    assert session["root_usage"]["total_tokens"] == log[0]["usage"]["total_tokens"] > 0


def test_a_route_fault_on_the_plugins_route_is_refused_by_name(plugin_site, mmo_env, mmo_standin,
                                                                mmo_git_workspace, tmp_path):
    """The example driver takes no ``fault=``: injecting one on its route is refused
    with one line naming the route and the driver, not a TypeError."""
    (mmo_env.config_dir / "catalog.d").mkdir(exist_ok=True)
    (mmo_env.config_dir / "catalog.d" / "echo.toml").write_text(ECHO_FRAGMENT)
    team = _team_on_echo(tmp_path)
    script = ("import sys; from mmo_kernel.api import create_session; "
              "create_session(sys.argv[1], cwd=sys.argv[2], route_faults={'echo': 'rate_limit'})")
    try:
        proc = subprocess.run([sys.executable, "-c", script, str(team), str(mmo_git_workspace)],
                              capture_output=True, text=True, stdin=subprocess.DEVNULL,
                              env={**os.environ, "PYTHONPATH": str(plugin_site)}, timeout=60)
    finally:
        from mmo_kernel.gateway import stop_gateway

        stop_gateway()
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert "TypeError" not in proc.stderr
    assert "rate_limit" in last and "route echo" in last and "example_echo" in last, last

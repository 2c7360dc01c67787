"""A separately distributed plugin, installed with pip, extends MMO like a built-in one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "mmo-example-route"
MMO = Path(sys.executable).with_name("mmo")


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory) -> Path:
    """pip-install the fixture distribution into a private target dir."""
    target = tmp_path_factory.mktemp("site")
    build = tmp_path_factory.mktemp("build")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "--no-index", "--target", str(target), str(FIXTURE)],
        check=True, stdin=subprocess.DEVNULL, cwd=build,
        env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )
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


ECHO_FRAGMENT = """
schema_version = 1
[routes.echo]
name = "Echo"
driver = "example_echo"
api_operator = "me"
access_product = "local"
options = { greeting = "hi" }

[models.echo__echo_small]
route = "echo"
upstream_id = "echo-small"
maker = "me"
"""


def _team_on_echo(tmp_path: Path) -> Path:
    """A copy of a built-in team whose root runs on the third-party route."""
    import shutil
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

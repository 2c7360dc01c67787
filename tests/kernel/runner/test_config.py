"""runner.toml (spec 12): defaults, and every bad input refused in one line naming the file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mmo_kernel.runner.config import ConfigError, load_config, team_bindings, team_profile

TOKEN = "mmo_rt_" + "s3cr3t" * 6
BASE = f'''server_url = "http://127.0.0.1:8765"
token = "{TOKEN}"
client_id = "laptop"
owner = "alice"
'''
MMO = Path(sys.executable).with_name("mmo")


@pytest.fixture(autouse=True)
def _env(mmo_env, mmo_process_guard):
    yield mmo_env


def write(tmp_path: Path, text: str, mode: int = 0o600) -> Path:
    path = tmp_path / "runner.toml"
    path.write_text(text, encoding="utf-8")
    os.chmod(path, mode)
    return path


def refused(path: Path) -> str:
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    message = str(caught.value)
    assert "\n" not in message and TOKEN not in message
    return message


def test_a_minimal_config_gets_the_spec_defaults(tmp_path, mmo_env):
    config = load_config(write(tmp_path, BASE))
    assert (config.client_id, config.owner, config.transport) == ("laptop", "alice", "websocket")
    assert config.project_registry_dir == mmo_env.config_dir / "projects.d"
    assert config.offline is False and config.allow_insecure_transport is False
    policy = config.policy
    assert policy.allowed_roots == () and policy.allowed_executables == ()
    assert policy.allow_raw_shell is False and policy.max_concurrent_jobs == 8
    assert policy.python == sys.executable
    assert team_profile(config) == "adaptive-engineering" and team_bindings(config) is None
    assert config.runner_url == "ws://127.0.0.1:8765/api/runners/ws"
    assert TOKEN not in repr(config)  # a logged config never shows the token


def test_every_key_is_read(tmp_path):
    roots = tmp_path / "projects"
    roots.mkdir()
    (tmp_path / "link").symlink_to(roots)
    config = load_config(write(tmp_path, BASE + f'''transport = "websocket"
project_registry_dir = "reg"
team_profile = "job-lab"
offline = true
allow_insecure_transport = false
[policy]
allowed_roots = ["{tmp_path / 'link'}"]
allow_raw_shell = true
allowed_executables = ["/usr/bin/git"]
python = "/usr/bin/python3"
max_concurrent_jobs = 2
'''))
    assert config.project_registry_dir == tmp_path / "reg"  # relative to the config file
    assert config.policy.allowed_roots == (roots.resolve(),)  # realpath
    assert config.policy.allowed_executables == (Path("/usr/bin/git"),)
    assert (config.policy.python, config.policy.max_concurrent_jobs) == ("/usr/bin/python3", 2)
    assert config.policy.allow_raw_shell is True
    assert team_profile(config) == "job-lab"
    assert team_bindings(config) == {"*": "local_scripted"}


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o644])
def test_a_config_readable_by_group_or_others_is_refused(tmp_path, mode):
    assert "runner config must not be readable by others" in refused(write(tmp_path, BASE, mode))


@pytest.mark.parametrize(("extra", "names"), [
    ('colour = "blue"\n', "'colour'"),
    ('[policy]\nallowed_rots = ["/tmp"]\n', "'policy.allowed_rots'"),
])
def test_an_unknown_key_is_named(tmp_path, extra, names):
    path = write(tmp_path, BASE + extra)
    message = refused(path)
    assert message == f"{path}: unknown key {names}"


@pytest.mark.parametrize(("text", "needle"), [
    (BASE.replace('owner = "alice"\n', ""), "missing required key 'owner'"),
    (BASE + 'transport = "sse"\n', "'transport'"),
    (BASE.replace('"laptop"', '"Laptop!"'), "'client_id'"),
    (BASE.replace('"alice"', '"-alice"'), "'owner'"),
    (BASE.replace(TOKEN, "not-a-runner-token-value"), "'token'"),
    (BASE + "offline = \"yes\"\n", "'offline'"),
    (BASE + "[policy]\nmax_concurrent_jobs = 0\n", "'policy.max_concurrent_jobs'"),
    (BASE + '[policy]\nallowed_roots = ["relative/dir"]\n', "'policy.allowed_roots'"),
    (BASE + '[policy]\nallowed_executables = ["git"]\n', "'policy.allowed_executables'"),
    (BASE.replace("http://127.0.0.1:8765", "ftp://host"), "'server_url'"),
    (BASE.replace("http://127.0.0.1:8765", "http://127.0.0.1:8765/mcp"), "'server_url'"),
    ("server_url = [", "invalid TOML"),
])
def test_bad_values_are_one_line_naming_the_file_and_key(tmp_path, text, needle):
    path = write(tmp_path, text)
    message = refused(path)
    assert message.startswith(f"{path}: ") and needle in message
    assert "not-a-runner-token-value" not in message


def test_plain_http_to_a_remote_host_needs_allow_insecure_transport(tmp_path):
    remote = BASE.replace("http://127.0.0.1:8765", "http://mmo.example.com:8765")
    assert "allow_insecure_transport" in refused(write(tmp_path, remote))
    config = load_config(write(tmp_path, remote + "allow_insecure_transport = true\n"))
    assert config.server_url == "http://mmo.example.com:8765"
    secure = load_config(write(tmp_path, BASE.replace("http://127.0.0.1:8765",
                                                      "https://mmo.example.com")))
    assert secure.runner_url == "wss://mmo.example.com/api/runners/ws"


def test_mmo_runner_exits_1_with_the_one_line_error(tmp_path):
    path = write(tmp_path, BASE, 0o644)
    proc = subprocess.run([str(MMO), "runner", "--config", str(path)], capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "runner config must not be readable by others" in lines[0]
    assert TOKEN not in proc.stderr + proc.stdout
    missing = subprocess.run([str(MMO), "runner", "--config", str(tmp_path / "nope.toml")],
                             capture_output=True, text=True, timeout=120,
                             stdin=subprocess.DEVNULL)
    assert missing.returncode == 1 and "nope.toml" in missing.stderr


def test_an_unknown_team_profile_stops_the_runner_at_start(tmp_path):
    path = write(tmp_path, BASE + 'team_profile = "no-such-team"\n')
    proc = subprocess.run([str(MMO), "runner", "--config", str(path)], capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == 1
    [line] = proc.stderr.strip().splitlines()
    assert str(path) in line and "'team_profile'" in line and "no-such-team" in line

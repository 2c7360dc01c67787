"""An agent's process gets no credential it does not need; its shell gets none at all, and
no way to the config dir (issue 13, item 8). Real Codex applies the policy in
tests/e2e/test_secrets_scan.py."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import pytest

from mmo_kernel.sessions.agent_env import agent_environment
from mmo_kernel.sessions.create import create_session

OFFLINE = {"*": "local_scripted"}
ACME = """schema_version = 1
[routes.acme_widget]
name = "Acme"
driver = "codex_custom"
api_operator = "acme"
access_product = "acme_api"
wire_protocol = "openai_chat"
base_url = "https://example.invalid/v1"
credential_env = "ACME_WIDGET_PASSPHRASE"
env_http_headers = { "X-Acme" = "ACME_HEADER_PASS" }
"""


def build(environ, needed=()):
    return agent_environment(codex_home="/h/agent", identity={"MMO_CALLER_AGENT": "lead"},
                             needed_credentials=needed, environ=environ)


def test_credentials_named_by_the_catalog_or_credentials_env_are_dropped_unless_needed(mmo_env):
    (mmo_env.config_dir / "catalog.d").mkdir()
    (mmo_env.config_dir / "catalog.d" / "10-acme.toml").write_text(ACME)
    credentials = mmo_env.config_dir / "credentials.env"
    credentials.write_text("WIDGET_LOGIN=from-file-1234\n")
    os.chmod(credentials, 0o600)
    environ = {"PATH": "/bin", "ACME_HEADER_PASS": "header-1234", "WIDGET_LOGIN": "env-1234",
               "ACME_WIDGET_PASSPHRASE": "pass-1234"}
    env = build(environ)
    assert env["PATH"] == "/bin"
    for name in ("ACME_HEADER_PASS", "WIDGET_LOGIN", "ACME_WIDGET_PASSPHRASE"):
        assert name not in env
    assert build(environ, needed=["ACME_HEADER_PASS"])["ACME_HEADER_PASS"] == "header-1234"


def test_no_variable_but_mmo_config_dir_points_into_the_config_dir(mmo_env):
    inside = str(mmo_env.config_dir / "tool-mcp.d")
    env = build({"PATH": "/bin", "MY_TOOL_HOME": inside, "SEARCH": f"/opt:{inside}/x",
                 "ELSEWHERE": str(mmo_env.root / "config-other")})
    assert "MY_TOOL_HOME" not in env and "SEARCH" not in env
    assert env["ELSEWHERE"] == str(mmo_env.root / "config-other")
    # the host this environment also starts reads the config dir; the shell never sees it
    assert env["MMO_CONFIG_DIR"] == str(mmo_env.config_dir)


@pytest.mark.usefixtures("mmo_standin")
def test_every_home_keeps_credentials_capabilities_and_the_config_dir_out_of_the_shell(
        mmo_workspace, mmo_env):
    from mmo_kernel.gateway.process import stop_gateway

    try:
        record = create_session("adaptive-engineering", cwd=mmo_workspace, bindings=OFFLINE)
    finally:
        stop_gateway()
    for home in record["homes"].values():
        config = tomllib.loads(Path(home["config_toml"]).read_text())
        policy = config["shell_environment_policy"]
        assert policy["inherit"] == "all" and policy["ignore_default_excludes"] is False
        for pattern in ("*KEY*", "*TOKEN*", "*SECRET*", "*PASSWORD*", "MMO_CONFIG_DIR",
                        "MMO_CALLER_*", "MMO_NATIVE_CALLER_*"):
            assert pattern in policy["exclude"]
        needed = home["route_envs"] + home["direct_header_envs"] + home["tool_mcp_envs"]
        assert set(needed) <= set(policy["exclude"])
        # the mesh server still gets the config dir: in its own fixed env (spec 07)
        mesh = config["mcp_servers"]["mmo_mesh"]
        assert mesh["env"]["MMO_CONFIG_DIR"] == str(mmo_env.config_dir)


def test_the_credentials_an_agent_needs_are_in_its_process_but_excluded_from_its_shell():
    from mmo_kernel.sessions.homes import shell_environment_policy

    policy = shell_environment_policy(["ACME_HEADER_PASS", "TOOLS_LOGIN", "ACME_HEADER_PASS"])
    assert policy["exclude"][-2:] == ["ACME_HEADER_PASS", "TOOLS_LOGIN"]

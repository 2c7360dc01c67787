"""A third-party stdio MCP server declared in tool-mcp.d, reached by real Codex natively."""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path

import pytest

from mmo_kernel.api import run_root_exec

from .conftest import OFFLINE, PROJECT_ROOT, TOOL_LAB, completed_items, script

pytestmark = pytest.mark.real_codex
SERVER = PROJECT_ROOT / "tests" / "fixtures" / "tool_mcp_server.py"


@pytest.fixture
def declared(mmo_env):
    folder = mmo_env.config_dir / "tool-mcp.d"
    folder.mkdir()
    (folder / "tools.toml").write_text(
        "schema_version = 1\n\n[tool_mcp_servers.tools]\n"
        f'transport = "stdio"\ncommand = {json.dumps(sys.executable)}\n'
        f"args = [{json.dumps(str(SERVER))}]\n"
        'enabled_tools = ["echo", "add", "getenv"]\n'
        'default_tools_approval_mode = "approve"\n')
    return folder


def test_opted_in_agent_calls_the_tool_server_through_native_mcp(workspace, declared):
    prompt = script('mcp tools.echo {"text": "ping"}', 'mcp tools.add {"a": 2, "b": 3}',
                    "say echo={{step1}} sum={{step2.sum}}")
    out = run_root_exec(TOOL_LAB, workspace, prompt, 60, bindings=OFFLINE)
    assert out["status"] == "completed", out["result"]
    assert out["result"] == "echo=ping sum=5"
    # declared but not opted into: Codex is told to keep `getenv` from the model
    config = tomllib.loads(Path(out["session"]["homes"]["lead"]["config_toml"]).read_text())
    assert config["mcp_servers"]["tools"]["enabled"] is True
    assert "getenv" in config["mcp_servers"]["tools"]["disabled_tools"]
    helper = tomllib.loads(Path(out["session"]["homes"]["helper"]["config_toml"]).read_text())
    assert helper["mcp_servers"]["tools"]["enabled"] is False
    calls = completed_items(out["events_path"], "mcpToolCall")
    assert [(c["server"], c["tool"], c["status"]) for c in calls] == [
        ("tools", "echo", "completed"), ("tools", "add", "completed")]

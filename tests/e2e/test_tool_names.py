"""How each tool bridge names a hyphenated MCP server and tool, on the real Codex CLI.

Real servers use hyphens (``server-everything``, ``get-tiny-image``). The
names a model must call differ by bridge; docs/tool-bridges.md states them.
"""

from __future__ import annotations

import json
import sys

import pytest

from mmo_kernel.api import run_root_exec

from .conftest import FIXTURE_PROFILES, OFFLINE, PROJECT_ROOT, script

pytestmark = pytest.mark.real_codex
SERVER = PROJECT_ROOT / "tests" / "fixtures" / "tool_mcp_server.py"


@pytest.fixture
def hyphenated(mmo_env, tmp_path):
    """Tool server ``time-server`` with the tool ``get-time`` (answers as ``echo``)."""
    folder = mmo_env.config_dir / "tool-mcp.d"
    folder.mkdir()
    log = tmp_path / "requests.jsonl"
    (folder / "tools.toml").write_text(
        '''schema_version = 1\n\n[tool_mcp_servers."time-server"]\ntransport = "stdio"\n'''
        f"command = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(str(SERVER))}, \"--alias\", \"get-time=echo\", "
        f"\"--log\", {json.dumps(str(log))}]\n"
        'enabled_tools = ["get-time"]\ndefault_tools_approval_mode = "approve"\n')
    return log


def _profile(tmp_path, bridge: str):
    import shutil

    folder = tmp_path / f"profile-{bridge}"
    shutil.copytree(FIXTURE_PROFILES / "root-bridge-lab", folder)
    toml = folder / "profile.toml"
    toml.write_text(toml.read_text().replace(
        'tool_mcp_servers = { fixture = { enabled_tools = ["image", "document"], '
        'bridge = "switchyard" } }',
        f'tool_mcp_servers = {{ "time-server" = {{ enabled_tools = ["get-time"], '
        f'bridge = "{bridge}" }} }}'))
    return folder


def _called(log) -> list[str]:
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    return [r["params"]["name"] for r in rows if r.get("method") == "tools/call"]


@pytest.mark.parametrize(("bridge", "call"), [
    ("native_mcp", 'mcp time_server.get_time {"text": "now"}'),
    # a scripted `tool` step counts a non-JSON answer as failed: `try` keeps its text
    ("switchyard", 'try tool mmo_mcp__time-server__get-time {"text": "now"}'),
])
def test_each_bridge_names_hyphens_as_documented(workspace, hyphenated, tmp_path, bridge, call):
    out = run_root_exec(_profile(tmp_path, bridge), workspace,
                        script(call, "say got {{step1}}"), 60, bindings=OFFLINE)
    assert out["status"] == "completed", out["result"]
    assert out["result"] == "got now"
    assert _called(hyphenated) == ["get-time"]  # the server sees its own name


def test_native_mcp_does_not_offer_the_hyphenated_spelling(workspace, hyphenated, tmp_path):
    out = run_root_exec(_profile(tmp_path, "native_mcp"), workspace,
                        script('mcp time-server.get-time {"text": "now"}', "say never"), 60,
                        bindings=OFFLINE)
    assert "Codex did not offer MCP server 'time-server'" in out["result"]
    assert "time_server" in out["result"]

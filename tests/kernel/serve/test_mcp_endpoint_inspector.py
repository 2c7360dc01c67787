"""The MCP Inspector CLI (the official TypeScript SDK's reference client) against ``POST
/mcp`` of a real server: listing, a dispatched call and a refused token.

The Inspector is pinned and installed by ``make setup`` into the git-ignored
``.mcp-inspector/`` (like the Codex CLI in ``.codex-cli/``).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from support.mcp_http import RecordingRouter
from support.serve import running_server

# one server (and runner) per module: its tests stay on one xdist worker
pytestmark = pytest.mark.xdist_group("test_mcp_endpoint_inspector")

INSPECTOR_VERSION = "2.12.0"
PROJECT_ROOT = Path(__file__).resolve().parents[3]
INSPECTOR = PROJECT_ROOT / ".mcp-inspector" / "node_modules" / ".bin" / "mcp-inspector"
DIRECT = ["list_projects", "work_on_project", "read_files", "edit_project_files", "run_script",
          "run_process", "observe_jobs", "wait_for_job_readiness", "review_changes",
          "finish_coding_task", "call_project_tool"]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    assert INSPECTOR.exists(), (
        f"the MCP Inspector {INSPECTOR_VERSION} is not installed under {INSPECTOR.parents[2]}; "
        f"run `make setup` (or `npm install --prefix .mcp-inspector "
        f"@modelcontextprotocol/inspector@{INSPECTOR_VERSION}`) from the project root")
    state = tmp_path_factory.mktemp("mcp-inspector") / "serve"
    with running_server(state) as (url, app):
        app.state.store.create_user("alice")
        pat = app.state.store.create_token("alice", "inspector", ["read"])["token"]
        yield url, app, pat


def _inspect(url: str, token: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(INSPECTOR), "--cli", url + "/mcp", "--transport", "http", *args,
         "--header", f"Authorization: Bearer {token}"],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=180)


def test_the_inspector_lists_and_calls_through_the_dispatcher(mmo_env, server):
    url, app, pat = server
    app.state.router = router = RecordingRouter()
    listed = _inspect(url, pat, "--method", "tools/list")
    assert listed.returncode == 0, listed.stderr
    assert [tool["name"] for tool in json.loads(listed.stdout)["tools"]] == DIRECT

    called = _inspect(url, pat, "--method", "tools/call", "--tool-name", "call_project_tool",
                      "--tool-arg", "tool=get_goal", 'arguments={"goal_id": "g1"}')
    assert called.returncode == 0, called.stderr
    result = json.loads(called.stdout)
    assert result["isError"] is False
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]
    assert router.calls == [("alice", "call_project_tool",
                             {"tool": "get_goal", "arguments": {"goal_id": "g1"}})]


def test_the_inspector_is_refused_without_a_valid_token(mmo_env, server):
    url, app, _ = server
    app.state.router = router = RecordingRouter()
    refused = _inspect(url, "mmo_pat_not-a-token", "--method", "tools/list")
    assert refused.returncode != 0
    assert "tools" not in refused.stdout and "auth" in (refused.stdout + refused.stderr).lower()
    assert router.calls == []

"""The official MCP Python SDK (a client nobody here wrote) against ``POST /mcp`` of a real
server on a real socket: the stateless 2026-07-28 form, the 2025-11-25 handshake and the
SDK's default auto-negotiation all reach the same tools and UI resources."""

from __future__ import annotations

import asyncio
import warnings

import httpx2 as httpx
import pytest
from mcp import Client
from mcp.client.extension import advertise
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from support.mcp_http import RecordingRouter
from support.serve import running_server

from mmo_kernel.project_tools.envelope import failure, success

# one server (and runner) per module: its tests stay on one xdist worker
pytestmark = pytest.mark.xdist_group("test_mcp_endpoint_sdk")

DIRECT = {"list_projects", "work_on_project", "read_files", "edit_project_files", "run_script",
          "run_process", "observe_jobs", "wait_for_job_readiness", "review_changes",
          "finish_coding_task", "call_project_tool"}
UI = advertise("io.modelcontextprotocol/ui", {"mimeTypes": ["text/html;profile=mcp-app"]})


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    state = tmp_path_factory.mktemp("mcp-sdk") / "serve"
    with running_server(state) as (url, app):
        app.state.store.create_user("alice")
        pat = app.state.store.create_token("alice", "sdk", ["read"])["token"]
        yield url, app, pat


@pytest.fixture
def served(mmo_env, server):
    url, app, pat = server

    def reply(principal, tool, arguments):
        if tool == "call_project_tool" and arguments.get("tool") == "get_goal":
            return failure("goal_not_found", "unknown goal")
        return success({"user": principal.username, "tool": tool})

    app.state.router = RecordingRouter(reply)
    return url, app, pat


async def _session(url: str, token: str, mode: str, ui: bool = False) -> dict:
    http = httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"},
                             timeout=httpx.Timeout(60.0))
    seen: dict = {}
    async with http, Client(streamable_http_client(url + "/mcp", http_client=http), mode=mode,
                            extensions=[UI] if ui else None, cache=None) as client:
        seen["version"] = client.protocol_version
        if mode == "legacy":  # ping is gone from 2026-07-28 (the SDK refuses to send it)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", MCPDeprecationWarning)  # warned in any mode
                await client.send_ping()
        seen["tools"] = {tool.name: tool for tool in (await client.list_tools()).tools}
        called = await client.call_tool("list_projects", {})
        seen["called"] = (called.is_error, called.structured_content)
        dispatched = await client.call_tool("call_project_tool",
                                            {"tool": "get_goal", "arguments": {"goal_id": "g"}})
        seen["dispatched"] = (dispatched.is_error, dispatched.structured_content)
        try:
            await client.call_tool("no_such_tool", {})
        except MCPError as exc:
            seen["unknown"] = (exc.error.code, exc.error.message)
        resources = (await client.list_resources()).resources
        seen["resources"] = {str(r.uri): r.mime_type for r in resources}
        read = await client.read_resource("ui://mmo/goal-plan")
        seen["html"] = read.contents[0].text
    return seen


@pytest.mark.parametrize("mode,version", [("2026-07-28", "2026-07-28"),
                                          ("legacy", "2025-11-25"),
                                          ("auto", "2026-07-28")])
def test_the_official_sdk_reaches_every_surface(served, mode, version):
    url, app, pat = served
    seen = asyncio.run(_session(url, pat, mode))
    assert seen["version"] == version
    assert set(seen["tools"]) == DIRECT
    assert seen["tools"]["read_files"].annotations.read_only_hint is True
    assert seen["called"] == (False, {"success": True,
                                      "output": {"user": "alice", "tool": "list_projects"}})
    error, envelope = seen["dispatched"]
    assert error is True and envelope["output"]["error_kind"] == "goal_not_found"
    assert seen["unknown"] == (-32602, "unknown tool")
    assert seen["resources"] == {"ui://mmo/goal-plan": "text/html;profile=mcp-app",
                                 "ui://mmo/work-result": "text/html;profile=mcp-app"}
    assert "<html" in seen["html"]
    assert [call[1] for call in app.state.router.calls] == ["list_projects", "call_project_tool"]


def test_a_ui_capable_sdk_client_sees_the_app_only_tool(served):
    url, _, pat = served
    seen = asyncio.run(_session(url, pat, "2026-07-28", ui=True))
    assert set(seen["tools"]) == DIRECT | {"get_work_result_state"}
    meta = seen["tools"]["get_work_result_state"].meta
    assert meta["ui"] == {"resourceUri": "ui://mmo/work-result", "visibility": ["app"]}


def test_the_sdk_sees_a_bad_token_as_unauthorized(served):
    url, _, _ = served
    with pytest.raises(BaseException) as caught:
        asyncio.run(_session(url, "mmo_pat_wrong", "2026-07-28"))
    errors = _leaves(caught.value)
    assert [(e.error.code, e.error.message) for e in errors if isinstance(e, MCPError)] == [
        (-32001, "unauthorized")]


def _leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside (nested) exception groups of the SDK's task groups."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]

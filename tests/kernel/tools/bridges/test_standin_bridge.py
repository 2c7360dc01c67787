"""End to end: the stand-in app-server calls a bridged tool; the fixture MCP server answers."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from mmo_app_server.client import AppServerClient
from mmo_app_server.events import jsonl_recorder
from mmo_app_server.session import AppServerSession
from mmo_switchyard.driver import SwitchyardBridge

from mmo_kernel.lifecycle.smoke import _successful_mcp_tools
from mmo_kernel.profiles.schema import ToolMcpOptIn
from mmo_kernel.state.audit import read_jsonl


def _completed_dynamic_items(events: Path) -> list[dict[str, Any]]:
    return [row["message"]["params"]["item"] for row in read_jsonl(events)
            if row["message"].get("method") == "item/completed"
            and row["message"]["params"]["item"]["type"] == "dynamicToolCall"]


def test_a_dynamic_tool_call_is_answered_by_the_real_mcp_server(
        mmo_standin: Path, stdio_server: Any, tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    events = tmp_path / "events.jsonl"
    servers = {"fixture": stdio_server()}
    opt_ins = {"fixture": ToolMcpOptIn(bridge="switchyard", enabled_tools=["echo", "fail"])}
    bridge = SwitchyardBridge()
    client = AppServerClient.spawn([str(mmo_standin), "app-server"], cwd=workspace,
                                   env=dict(os.environ), stderr_path=tmp_path / "stderr.log",
                                   recorder=jsonl_recorder(events),
                                   request_handler=bridge.handle_request)
    try:
        session = AppServerSession(client)
        client.initialize(experimental_api=True)
        tools = bridge.dynamic_tools(servers, opt_ins)
        thread_id = session.start_thread({"dynamicTools": tools})["thread"]["id"]
        echoed = session.run_turn(
            thread_id, 'please FAKE_DYNAMIC_TOOL_CALL mmo_mcp__fixture__echo {"text":"hi"}',
            timeout=15)
        failed = session.run_turn(
            thread_id, "now FAKE_DYNAMIC_TOOL_CALL mmo_mcp__fixture__fail {}", timeout=15)
    finally:
        client.close()
        bridge.close()
    assert echoed.status == "completed" and failed.status == "completed"
    ok, bad = _completed_dynamic_items(events)
    assert ok["tool"] == "mmo_mcp__fixture__echo" and ok["status"] == "completed"
    assert ok["success"] is True and ok["contentItems"] == [{"type": "inputText", "text": "hi"}]
    assert bad["status"] == "failed" and bad["success"] is False
    assert "(tool mmo_mcp__fixture__echo: hi)" in (echoed.final_message or "")
    # the real log is smoke evidence: only the successful bridged call counts
    aliases = bridge.alias_table(servers, opt_ins)
    assert _successful_mcp_tools(events, aliases) == {"fixture.echo"}
    assert _successful_mcp_tools(events, {}) == set()

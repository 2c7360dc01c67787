"""The switchyard bridge: dynamic tool specs, alias table and forwarded calls (real servers)."""

from __future__ import annotations

import base64
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
from kernel.tools.bridges.helpers import requests_logged
from mmo_switchyard.driver import SwitchyardBridge

from mmo_kernel.plugin.manager import get_driver
from mmo_kernel.profiles.schema import ToolMcpOptIn
from mmo_kernel.tools.mcp_client import McpError
from mmo_kernel.tools.servers import ToolServer


def opt(**fields: Any) -> ToolMcpOptIn:
    return ToolMcpOptIn.model_validate({"bridge": "switchyard", **fields})


def call(bridge: SwitchyardBridge, tool: str, arguments: Any) -> dict[str, Any]:
    return bridge.handle_tool_call({"threadId": "t", "turnId": "u", "callId": "c",
                                    "namespace": None, "tool": tool, "arguments": arguments})


def _stdio(name: str, tools: list[str]) -> ToolServer:
    return ToolServer(name=name, transport="stdio", command="/bin/true", enabled_tools=tools)


def test_the_plugin_registers_the_switchyard_driver() -> None:
    assert isinstance(get_driver("tool_bridges", "switchyard"), SwitchyardBridge)


def test_alias_table_maps_dynamic_names_back_without_starting_anything() -> None:
    servers = {"repo.search": _stdio("repo.search", ["query", "stats"]),
               "web": _stdio("web", ["fetch"])}
    table = SwitchyardBridge.alias_table(servers, {"repo.search": opt(enabled_tools=["query"]),
                                                   "web": opt()})
    assert table == {"mmo_mcp__repo_search__query": "repo.search.query",
                     "mmo_mcp__web__fetch": "web.fetch"}


@pytest.mark.parametrize(("servers", "opt_ins", "message"), [
    ({"a.b": _stdio("a.b", ["c"]), "a_b": _stdio("a_b", ["c"])}, {"a.b": None, "a_b": None},
     "a.b.c and a_b.c would both be dynamic tool mmo_mcp__a_b__c"),
    ({"web": _stdio("web", ["fetch"])}, {"ghost": None},
     "tool MCP server 'ghost' is not declared in tool-mcp.d"),
    ({"web": _stdio("web", ["fetch"])}, {"web": "opt-in:scrape"},
     r"tools \['scrape'\] are not enabled tools of tool MCP server 'web'"),
    ({"web": _stdio("web", ["fetch something"])}, {"web": None},
     "cannot be a dynamic tool"),
    ({"w" * 60: _stdio("w" * 60, ["fetch"])}, {"w" * 60: None}, "at most 64 characters"),
])
def test_unroutable_or_undeclared_tools_are_refused_by_name(
        servers: dict[str, Any], opt_ins: dict[str, Any], message: str) -> None:
    resolved = {k: (opt(enabled_tools=[v.split(":")[1]]) if isinstance(v, str) else opt())
                for k, v in opt_ins.items()}
    bridge = SwitchyardBridge()
    with pytest.raises(ValueError, match=message):
        bridge.dynamic_tools(servers, resolved)
    assert bridge._clients == {}  # nothing was started


def test_dynamic_tools_carry_the_servers_schemas_for_opted_tools_only(stdio_server: Any) -> None:
    servers = {"fixture": stdio_server(), "other": stdio_server("other")}
    with SwitchyardBridge() as bridge:
        specs = bridge.dynamic_tools(servers, {"fixture": opt(enabled_tools=["echo", "add"])})
    assert [s["name"] for s in specs] == ["mmo_mcp__fixture__echo", "mmo_mcp__fixture__add"]
    assert specs[0]["type"] == "function"
    assert specs[0]["inputSchema"] == {"type": "object", "properties": {"text": {"type": "string"}},
                                       "required": ["text"]}
    assert "Echo the text back." in specs[0]["description"]


def test_calls_are_forwarded_to_one_lazily_started_reused_server(
        stdio_server: Any, tmp_path: Path) -> None:
    servers = {"fixture": stdio_server(log=True)}
    with SwitchyardBridge() as bridge:
        bridge.dynamic_tools(servers, {"fixture": opt()})
        echoed = call(bridge, "mmo_mcp__fixture__echo", {"text": "hi"})
        added = call(bridge, "mmo_mcp__fixture__add", {"a": 1, "b": 2})
    assert echoed == {"contentItems": [{"type": "inputText", "text": "hi"}], "success": True}
    assert added == {"contentItems": [{"type": "inputText", "text": "3"}], "success": True}
    assert [m["method"] for m in requests_logged(tmp_path)].count("initialize") == 1


def test_failures_come_back_as_unsuccessful_text_for_the_model(stdio_server: Any) -> None:
    with SwitchyardBridge() as bridge:
        bridge.dynamic_tools({"fixture": stdio_server()}, {"fixture": opt()})
        tool_error = call(bridge, "mmo_mcp__fixture__fail", {})
        rpc_error = call(bridge, "mmo_mcp__fixture__echo", {})
        unknown = call(bridge, "mmo_mcp__fixture__hidden", {})
        not_object = call(bridge, "mmo_mcp__fixture__echo", ["hi"])
    assert tool_error == {"success": False, "contentItems": [
        {"type": "inputText", "text": "the fixture tool failed on purpose"}]}
    assert not rpc_error["success"]
    assert "JSON-RPC error -32602" in rpc_error["contentItems"][0]["text"]
    assert not unknown["success"]
    assert "unknown dynamic tool 'mmo_mcp__fixture__hidden'" in unknown["contentItems"][0]["text"]
    assert not_object == {"success": False, "contentItems": [{
        "type": "inputText",
        "text": "arguments for mmo_mcp__fixture__echo must be a JSON object, got list"}]}


@pytest.mark.parametrize("preserve", [True, False])
def test_images_are_data_urls_only_where_the_route_preserves_tool_media(
        stdio_server: Any, preserve: bool) -> None:
    with SwitchyardBridge(preserve_tool_media=preserve) as bridge:
        bridge.dynamic_tools({"fixture": stdio_server()}, {"fixture": opt()})
        answer = call(bridge, "mmo_mcp__fixture__image", {})
    caption, picture = answer["contentItems"]
    assert answer["success"] and caption == {"type": "inputText", "text": "a tiny red dot"}
    if preserve:
        prefix = "data:image/png;base64,"
        assert picture["type"] == "inputImage" and picture["imageUrl"].startswith(prefix)
        assert base64.b64decode(picture["imageUrl"][len(prefix):]).startswith(b"\x89PNG")
    else:
        omitted = "[image omitted (image/png): this agent's route does not preserve tool media]"
        assert picture == {"type": "inputText", "text": omitted}


@pytest.mark.parametrize("preserve", [True, False])
def test_embedded_resources_keep_their_uri_and_mime_type(stdio_server: Any,
                                                         preserve: bool) -> None:
    with SwitchyardBridge(preserve_tool_media=preserve) as bridge:
        bridge.dynamic_tools({"fixture": stdio_server()}, {"fixture": opt()})
        answer = call(bridge, "mmo_mcp__fixture__document", {})
    text, label, picture = answer["contentItems"]
    assert text == {"type": "inputText",
                    "text": "[resource file:///notes/plan.md (text/markdown)]\n# Plan"}
    assert label == {"type": "inputText", "text": "[resource file:///pictures/dot.png (image/png)]"}
    assert picture["type"] == ("inputImage" if preserve else "inputText")
    if preserve:
        assert picture["imageUrl"].startswith("data:image/png;base64,")


def test_a_dead_server_fails_the_call_and_is_restarted_on_the_next(
        stdio_server: Any, tmp_path: Path) -> None:
    with SwitchyardBridge() as bridge:
        bridge.dynamic_tools({"fixture": stdio_server(log=True)}, {"fixture": opt()})
        crashed = call(bridge, "mmo_mcp__fixture__crash", {})
        again = call(bridge, "mmo_mcp__fixture__echo", {"text": "back"})
    assert not crashed["success"]
    assert "exited with status 3" in crashed["contentItems"][0]["text"]
    assert again["success"] and again["contentItems"][0]["text"] == "back"
    assert [m["method"] for m in requests_logged(tmp_path)].count("initialize") == 2


def test_close_stops_every_server_and_later_calls_fail(stdio_server: Any) -> None:
    bridge = SwitchyardBridge()
    bridge.dynamic_tools({"fixture": stdio_server(), "other": stdio_server("other")},
                         {"fixture": opt(), "other": opt(enabled_tools=["echo"])})
    pids = [client.pid for client in bridge._clients.values()]  # type: ignore[attr-defined]
    assert len(pids) == 2
    bridge.close()
    bridge.close()
    deadline = time.monotonic() + 5
    while any(psutil.pid_exists(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not any(psutil.pid_exists(p) for p in pids)
    late = call(bridge, "mmo_mcp__fixture__echo", {"text": "x"})
    assert not late["success"] and "switchyard bridge is closed" in late["contentItems"][0]["text"]


def test_an_optional_server_that_cannot_start_is_left_out_a_required_one_fails(
        stdio_server: Any) -> None:
    servers = {"fixture": stdio_server(),
               "ghost": ToolServer(name="ghost", transport="stdio", command="/nonexistent/mcp",
                                   enabled_tools=["x"])}
    with SwitchyardBridge() as bridge:
        specs = bridge.dynamic_tools(servers, {"fixture": opt(enabled_tools=["echo"]),
                                               "ghost": opt(required=False)})
        assert [s["name"] for s in specs] == ["mmo_mcp__fixture__echo"]
        assert "cannot start '/nonexistent/mcp'" in bridge.unavailable["ghost"]
    with SwitchyardBridge() as bridge, pytest.raises(McpError, match="cannot start"):
        bridge.dynamic_tools(servers, {"ghost": opt()})


def test_a_required_server_must_list_every_opted_tool(stdio_server: Any) -> None:
    server = stdio_server(enabled_tools=["echo", "teleport"])
    with SwitchyardBridge() as bridge, pytest.raises(
            McpError, match=r"tool MCP server fixture: does not list tools \['teleport'\]"):
        bridge.dynamic_tools({"fixture": server}, {"fixture": opt()})

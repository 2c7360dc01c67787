"""The MCP client against the real fixture server: stdio and streamable HTTP."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
from kernel.tools.bridges.helpers import FIXTURE_SERVER, requests_logged

from mmo_kernel.tools.mcp_client import (
    McpError,
    McpRpcError,
    McpTimeout,
    McpTransportError,
    connect,
)
from mmo_kernel.tools.servers import ToolServer


def _gone(pid: int, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.02)
    return False


def test_handshake_then_every_page_of_tools(stdio_server: Any, tmp_path: Path) -> None:
    with connect(stdio_server(log=True)) as client:
        tools = client.list_tools()
        assert client.server_info == {"name": "fixture", "version": "1"}
        assert client.protocol_version == "2025-06-18"
    assert [t.name for t in tools] == ["echo", "add", "image", "fail", "sleep", "crash",
                                       "getenv", "document", "hidden"]
    assert tools[0].inputSchema["properties"] == {"text": {"type": "string"}}
    methods = [m.get("method") for m in requests_logged(tmp_path)]
    assert methods[:2] == ["initialize", "notifications/initialized"]
    assert methods.count("tools/list") == 3  # pages of three, following nextCursor
    first = requests_logged(tmp_path)[0]["params"]
    assert first["protocolVersion"] == "2025-06-18" and first["clientInfo"]["name"] == "mmo"


def test_calls_return_text_structured_content_and_tool_errors(stdio_server: Any) -> None:
    with connect(stdio_server()) as client:
        echoed = client.call_tool("echo", {"text": "hi there"})
        added = client.call_tool("add", {"a": 2, "b": 40})
        failed = client.call_tool("fail", {})
    assert echoed.content == [{"type": "text", "text": "hi there"}] and not echoed.isError
    assert added.structuredContent == {"sum": 42}
    assert failed.isError and "failed on purpose" in failed.content[0]["text"]


def test_json_rpc_errors_carry_code_and_message(stdio_server: Any) -> None:
    with connect(stdio_server()) as client:
        with pytest.raises(McpRpcError) as unknown:
            client.call_tool("nope", {})
        with pytest.raises(McpRpcError) as bad_args:
            client.call_tool("echo", {})
        assert client.call_tool("echo", {"text": "still fine"}).content[0]["text"] == "still fine"
    assert unknown.value.code == -32602 and "unknown tool: nope" in str(unknown.value)
    assert "tool MCP server fixture" in str(unknown.value)
    assert bad_args.value.method == "tools/call"
    assert "invalid arguments" in bad_args.value.rpc_message


def test_a_silent_call_times_out_is_cancelled_and_the_client_keeps_working(
        stdio_server: Any, tmp_path: Path) -> None:
    with connect(stdio_server(log=True)) as client:
        # the tool would answer only after 120 s: the call ends at its own timeout instead
        with pytest.raises(McpTimeout, match="no answer within 0.3 s"):
            client.call_tool("sleep", {"seconds": 120}, timeout=0.3)
        assert client.call_tool("echo", {"text": "after"}).content[0]["text"] == "after"
    logged = requests_logged(tmp_path)
    cancelled = [m for m in logged if m.get("method") == "notifications/cancelled"]
    sleeping = [m for m in logged if (m.get("params") or {}).get("name") == "sleep"]
    assert [c["params"]["requestId"] for c in cancelled] == [sleeping[0]["id"]]


def test_server_death_fails_the_pending_call_and_every_later_one(stdio_server: Any) -> None:
    client = connect(stdio_server())
    try:
        # noticed at EOF: a transport error naming the exit, not the timeout's McpTimeout
        with pytest.raises(McpTransportError, match="exited with status 3"):
            client.call_tool("crash", {}, timeout=30)
        with pytest.raises(McpTransportError, match="exited with status 3"):
            client.call_tool("echo", {"text": "x"})
    finally:
        client.close()


def test_a_server_that_never_initializes_times_out_and_is_killed(stdio_server: Any) -> None:
    server = stdio_server("hung", "--hang-initialize", startup_timeout_sec=1)
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    with pytest.raises(McpTimeout, match="initialize got no answer within 1 s"):
        connect(server)
    spawned = {p.pid for p in psutil.Process().children(recursive=True)} - before
    assert all(_gone(pid) for pid in spawned)


def test_close_kills_the_servers_whole_process_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    script = f"sleep 300 & echo $! > {pidfile}; exec {sys.executable} {FIXTURE_SERVER}"
    server = ToolServer(name="shell", transport="stdio", command="/bin/sh", args=["-c", script],
                        enabled_tools=["echo"])
    client = connect(server)
    grandchild = int(pidfile.read_text())
    assert psutil.pid_exists(grandchild)
    client.close()
    client.close()  # idempotent
    assert _gone(grandchild) and _gone(client.pid)  # type: ignore[attr-defined]


def test_an_unstartable_command_is_a_clear_error() -> None:
    server = ToolServer(name="ghost", transport="stdio", command="/nonexistent/mcp-server",
                        enabled_tools=["x"])
    with pytest.raises(McpTransportError,
                       match=r"tool MCP server ghost: cannot start '/nonexistent/mcp-server'"):
        connect(server)


def test_stdio_servers_get_declared_env_vars_only(stdio_server: Any) -> None:
    env = {"PATH": "/usr/bin:/bin", "FIXTURE_TOKEN": "tok-123", "UNRELATED_SECRET": "nope"}
    with connect(stdio_server(env_vars=["FIXTURE_TOKEN"]), env) as client:
        token = client.call_tool("getenv", {"name": "FIXTURE_TOKEN"}).content[0]["text"]
        other = client.call_tool("getenv", {"name": "UNRELATED_SECRET"}).content[0]["text"]
    assert (token, other) == ("tok-123", "<unset>")


def _http(url: str, **fields: Any) -> ToolServer:
    return ToolServer.model_validate({"name": "remote", "transport": "streamable_http",
                                      "url": url, "enabled_tools": ["echo"], **fields})


@pytest.mark.parametrize("answer", ["json", "sse"])
def test_streamable_http_with_a_bearer_token(http_server: Any, answer: str) -> None:
    url = http_server(answer=answer, bearer="s3cret-token")
    server = _http(url, bearer_token_env_var="REMOTE_TOKEN")
    with connect(server, {"REMOTE_TOKEN": "s3cret-token"}) as client:
        names = [t.name for t in client.list_tools()]
        echoed = client.call_tool("echo", {"text": f"over {answer}"})
        with pytest.raises(McpRpcError, match="-32602"):
            client.call_tool("nope", {})
    assert names[:3] == ["echo", "add", "image"] and len(names) == 9
    assert echoed.content[0]["text"] == f"over {answer}"


def test_http_refusals_name_the_variable_but_never_the_token(http_server: Any) -> None:
    url = http_server(bearer="right-token")
    server = _http(url, bearer_token_env_var="REMOTE_TOKEN")
    with pytest.raises(McpTransportError) as refused:
        connect(server, {"REMOTE_TOKEN": "wrong-token"})
    assert "HTTP 401" in str(refused.value) and "REMOTE_TOKEN" in str(refused.value)
    assert "wrong-token" not in str(refused.value)
    with pytest.raises(McpError, match="environment variable REMOTE_TOKEN .* is not set"):
        connect(server, {})
    with pytest.raises(RuntimeError, match="tool MCP HTTP environment variable REMOTE_TOKEN"):
        connect(server, {"REMOTE_TOKEN": "bad\nvalue"})


def test_an_unreachable_http_server_is_a_transport_error() -> None:
    with pytest.raises(McpTransportError, match="cannot reach http://127.0.0.1:9/mcp"):
        connect(_http("http://127.0.0.1:9/mcp"))

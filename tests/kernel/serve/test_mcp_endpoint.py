"""``POST /mcp`` over real HTTP (spec 12 "MCP endpoint"): transport rules, auth, Origin,
protocol versions, routing headers, listing, the tool-call path and the 1 MiB bound.

The server is the real app (store, admin token, body limit) on a real socket; where a test
must see what ``tools/call`` hands the tool router, the router is a recording stand-in.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from support.mcp_http import UI_CAPABILITIES, RecordingRouter, mcp_call, post, stateless_request
from support.serve import admin_token, running_server

from mmo_kernel.project_tools.envelope import failure, success

# one server (and runner) per module: its tests stay on one xdist worker
pytestmark = pytest.mark.xdist_group("test_mcp_endpoint")

DIRECT = ["list_projects", "work_on_project", "read_files", "edit_project_files", "run_script",
          "run_process", "observe_jobs", "wait_for_job_readiness", "review_changes",
          "finish_coding_task", "call_project_tool"]
MiB = 1024 * 1024


@dataclass
class Served:
    url: str
    app: Any
    pat: str
    admin: str
    router: RecordingRouter


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """One real server for the module (starting one costs more than all its requests)."""
    state = tmp_path_factory.mktemp("mcp") / "serve"
    with running_server(state, allow_origins=["https://chat.example"]) as (url, app):
        app.state.store.create_user("alice")
        pat = app.state.store.create_token("alice", "t", ["read"])["token"]
        yield url, app, pat, admin_token(state)


@pytest.fixture
def served(mmo_env, server):
    url, app, pat, admin = server
    router = RecordingRouter()
    app.state.router = router
    yield Served(url, app, pat, admin, router)


def _error(reply) -> tuple[int, int, str]:
    return reply.status_code, reply.json()["error"]["code"], reply.json()["error"]["message"]


# --- transport ---------------------------------------------------------------------------

def test_get_and_delete_are_405_and_no_session_is_ever_issued(served):
    import httpx2 as httpx

    with httpx.Client() as client:
        assert client.get(served.url + "/mcp").status_code == 405
        assert client.delete(served.url + "/mcp",
                             headers={"Mcp-Session-Id": "x"}).status_code == 405
    reply = post(served.url, served.pat, {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                          "params": {"protocolVersion": "2025-06-18",
                                                     "capabilities": {},
                                                     "clientInfo": {"name": "t", "version": "1"}}},
                 {"Mcp-Session-Id": "client-made-up"})
    assert reply.status_code == 200 and "mcp-session-id" not in reply.headers


def test_reply_is_json_whatever_accept_says(served):
    body, headers = stateless_request("ping")
    reply = post(served.url, served.pat, body, {**headers, "Accept": "text/event-stream"})
    assert reply.status_code == 200
    assert reply.headers["content-type"].startswith("application/json")
    assert reply.json() == {"jsonrpc": "2.0", "id": body["id"], "result": {}}


def test_batch_is_refused_and_notifications_get_202(served):
    body, headers = stateless_request("ping")
    assert _error(post(served.url, served.pat, [body], headers))[:2] == (400, -32600)
    note = post(served.url, served.pat, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert note.status_code == 202 and note.content == b""
    assert _error(post(served.url, served.pat, None, content=b"{nope"))[:2] == (400, -32700)
    assert _error(post(served.url, served.pat, {"jsonrpc": "2.0", "id": None,
                                                "method": "ping"}))[:2] == (400, -32600)


def test_oversized_body_is_413(served):
    reply = post(served.url, served.pat, None, content=b" " * (8 * MiB + 1))
    assert reply.status_code == 413


# --- auth and Origin ---------------------------------------------------------------------

@pytest.mark.parametrize("who", ["none", "garbage", "admin", "runner", "revoked", "basic"])
def test_only_a_live_pat_is_accepted(served, who):
    store = served.app.state.store
    token = {"none": None, "garbage": "mmo_pat_nope", "admin": served.admin,
             "runner": store.create_runner_token("alice", "laptop", "r")["token"],
             "basic": None}.get(who)
    headers = {}
    if who == "revoked":
        made = store.create_token("alice", "old", ["read"])
        store.revoke_token(made["token_id"])
        token = made["token"]
    if who == "basic":
        headers["Authorization"] = f"Basic {served.pat}"
    body, routing = stateless_request("tools/list")
    reply = post(served.url, token, body, {**routing, **headers})
    assert reply.status_code == 401
    assert reply.headers["www-authenticate"] == 'Bearer realm="mmo"'
    assert reply.json()["error"] == {"code": -32001, "message": "unauthorized"}
    assert served.router.calls == []


@pytest.mark.parametrize("origin,status", [
    ("https://evil.example", 403),
    ("null", 403),
    ("https://chat.example", 200),  # --allow-origin
    ("SELF", 200),
    ("SELF-LOCALHOST", 200),
    ("http://localhost:1", 403),
])
def test_origin_guard(served, origin, status):
    port = served.url.rsplit(":", 1)[1]
    origin = {"SELF": served.url, "SELF-LOCALHOST": f"http://localhost:{port}"}.get(origin, origin)
    body, headers = stateless_request("ping")
    reply = post(served.url, served.pat, body, {**headers, "Origin": origin})
    assert reply.status_code == status


def test_origin_is_checked_before_the_token(served):
    body, headers = stateless_request("ping")
    reply = post(served.url, None, body, {**headers, "Origin": "https://evil.example"})
    assert reply.status_code == 403


# --- versions and routing headers --------------------------------------------------------

def _ping(served, meta_version=None, header_version=None, extra=None):
    params = {}
    if meta_version:
        params["_meta"] = {"io.modelcontextprotocol/protocolVersion": meta_version}
    headers = {"MCP-Protocol-Version": header_version} if header_version else {}
    return post(served.url, served.pat, {"jsonrpc": "2.0", "id": 7, "method": "ping",
                                         "params": params}, {**headers, **(extra or {})})


def test_protocol_version_resolution(served):
    assert _ping(served).status_code == 200  # neither: 2025-06-18
    assert _ping(served, header_version="2025-11-25").status_code == 200
    assert _ping(served, "2025-06-18", "2025-06-18").status_code == 200
    assert _error(_ping(served, "2025-06-18", "2025-11-25")) == (
        400, -32600, "protocol version mismatch")
    assert _error(_ping(served, header_version="2024-11-05")) == (
        400, -32600, "unsupported protocol version")
    assert _error(_ping(served, meta_version="2099-01-01")) == (
        400, -32600, "unsupported protocol version")


def test_2026_requires_matching_method_and_name_headers(served):
    meta = "2026-07-28"
    assert _error(_ping(served, meta, meta)) == (400, -32600, "MCP-Method header mismatch")
    assert _ping(served, meta, meta, {"MCP-Method": "ping"}).status_code == 200
    body, headers = stateless_request("tools/call", {"name": "list_projects", "arguments": {}})
    for name in (None, "read_files"):
        wrong = {k: v for k, v in headers.items() if k != "MCP-Name"}
        if name:
            wrong["MCP-Name"] = name
        assert _error(post(served.url, served.pat, body, wrong)) == (
            400, -32600, "MCP-Name header mismatch")
    assert served.router.calls == []
    assert post(served.url, served.pat, body, headers).status_code == 200


def test_older_revisions_check_routing_headers_only_when_present(served):
    assert _ping(served, "2025-11-25").status_code == 200
    assert _error(_ping(served, "2025-11-25", extra={"MCP-Method": "tools/list"}))[2] == \
        "MCP-Method header mismatch"
    call = {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": {"name": "list_projects", "arguments": {}}}
    assert _error(post(served.url, served.pat, call, {"MCP-Name": "read_files"}))[2] == \
        "MCP-Name header mismatch"
    assert post(served.url, served.pat, call).json()["result"]["isError"] is False


def test_initialize_answers_the_asked_version_or_2025_11_25(served):
    def initialize(version):
        reply = post(served.url, served.pat, {
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": version, "capabilities": {},
                       "clientInfo": {"name": "t", "version": "1"}}})
        return reply.json()["result"]

    assert initialize("2025-06-18")["protocolVersion"] == "2025-06-18"
    assert initialize("2024-11-05")["protocolVersion"] == "2025-11-25"
    result = initialize("2025-11-25")
    assert result["serverInfo"]["name"] == "mmo" and "tools" in result["capabilities"]


# --- tools/list and tools/call -----------------------------------------------------------

def test_tools_list_direct_tools_and_the_app_tool_for_ui_clients(served):
    plain = mcp_call(served.url, served.pat, "tools/list").json()["result"]["tools"]
    assert [t["name"] for t in plain] == DIRECT
    ui = mcp_call(served.url, served.pat, "tools/list",
                  capabilities=UI_CAPABILITIES).json()["result"]["tools"]
    assert [t["name"] for t in ui] == [*DIRECT, "get_work_result_state"]
    assert ui[-1]["_meta"]["ui"] == {"resourceUri": "ui://mmo/work-result",
                                     "visibility": ["app"]}
    assert all(isinstance(t["annotations"]["readOnlyHint"], bool) for t in ui)


def test_a_direct_call_reaches_the_router_and_comes_back_as_the_tool_result(served):
    served.router.reply = lambda p, tool, args: failure("project_not_found", "no such project")
    arguments = {"project": "~p9", "items": [{"path": "a.txt"}], "_mmo": {"record": "~s1"}}
    reply = mcp_call(served.url, served.pat, "tools/call",
                     {"name": "read_files", "arguments": arguments})
    result = reply.json()["result"]
    assert served.router.calls == [("alice", "read_files", arguments)]
    envelope = {"success": False, "error": "no such project",
                "output": {"error_kind": "project_not_found", "state_changed": False}}
    assert result["structuredContent"] == envelope and result["isError"] is True
    [text] = result["content"]
    assert text["type"] == "text" and json.loads(text["text"]) == envelope
    assert ", " not in text["text"] and '": ' not in text["text"]  # compact JSON


@pytest.mark.parametrize("name,ui", [("no_such_tool", False), ("get_goal", False),
                                     ("artifact_read", True), ("get_work_result_state", False)])
def test_tools_call_refuses_unlisted_tools_as_a_protocol_error(served, name, ui):
    reply = mcp_call(served.url, served.pat, "tools/call", {"name": name, "arguments": {}},
                     capabilities=UI_CAPABILITIES if ui else None)
    assert (reply.status_code, reply.json()["error"]) == (
        200, {"code": -32602, "message": "unknown tool"})
    assert served.router.calls == []


def test_the_app_only_tool_is_callable_by_a_ui_client(served):
    arguments = {"project": "~p1", "session_id": "~s1"}
    reply = mcp_call(served.url, served.pat, "tools/call",
                     {"name": "get_work_result_state", "arguments": arguments},
                     capabilities=UI_CAPABILITIES)
    assert reply.json()["result"]["isError"] is False
    assert served.router.calls == [("alice", "get_work_result_state", arguments)]
    assert served.router.ui_capable == [True]
    mcp_call(served.url, served.pat, "tools/call", {"name": "list_projects", "arguments": {}})
    assert served.router.ui_capable == [True, False]  # the router is told, per request


def test_the_dispatcher_forwards_and_refuses_unknown_names_as_a_tool_result(served):
    ok = {"tool": "get_goal", "arguments": {"goal_id": "g1"}, "_mmo": {"record": "~s2"}}
    reply = mcp_call(served.url, served.pat, "tools/call",
                     {"name": "call_project_tool", "arguments": ok})
    assert reply.json()["result"]["structuredContent"]["success"] is True
    assert served.router.calls == [("alice", "call_project_tool", ok)]
    for name, ui in (("no_such_tool", True), ("artifact_write", True),
                     ("get_work_result_state", False)):
        reply = mcp_call(served.url, served.pat, "tools/call",
                         {"name": "call_project_tool", "arguments": {"tool": name}},
                         capabilities=UI_CAPABILITIES if ui else None)
        result = reply.json()["result"]
        assert result["isError"] is True
        assert result["structuredContent"]["output"]["error_kind"] == "unknown_tool"
    assert len(served.router.calls) == 1


def test_non_object_arguments_are_a_failed_tool_result(served):
    reply = mcp_call(served.url, served.pat, "tools/call",
                     {"name": "list_projects", "arguments": [1]})
    result = reply.json()["result"]["structuredContent"]
    assert result["output"]["error_kind"] == "invalid_arguments"
    assert served.router.calls == []


def test_unknown_method_is_method_not_found(served):
    assert mcp_call(served.url, served.pat, "prompts/list").json()["error"]["code"] == -32601


# --- the 1 MiB response bound ------------------------------------------------------------

def _page(i: int, size: int) -> dict[str, Any]:
    text = (f"line {i}\n" * size)[:size]
    return {"path": f"f{i}.txt", "output": {
        "text": text, "read_revision": f"sha256:{i:064x}", "has_more": True, "start_line": 1,
        "end_line": 10, "total_lines": 99, "file_bytes": 10 * size, "next_cursor": 10}}


def test_a_read_beyond_1_mib_is_cut_by_items_and_continues_exactly(served):
    items = [{"path": f"f{i}.txt", "limit": 10} for i in range(5)]
    served.router.reply = lambda p, t, a: success({"items": [_page(i, 250_000) for i in range(5)]})
    reply = mcp_call(served.url, served.pat, "tools/call",
                     {"name": "read_files", "arguments": {"project": "~p1", "items": items}})
    assert len(reply.content) <= MiB
    output = reply.json()["result"]["structuredContent"]["output"]
    kept = len(output["items"])
    assert output["output_truncated"] is True and 1 <= kept < 5
    call = output["suggested_call"]
    assert call["tool"] == "read_files" and call["follow_up_kind"] == "mechanically_followable"
    assert call["arguments"]["project"] == "~p1"
    expected = [{"path": f"f{i}.txt", "limit": 10, "cursor": 10,
                 "expected_read_revision": f"sha256:{i:064x}"} for i in range(kept)]
    assert call["arguments"]["items"] == expected + items[kept:]


def test_any_other_oversized_output_is_cut_with_a_suggested_call(served):
    served.router.reply = lambda p, t, a: success({
        "job_id": "mmo_pjob_1", "status": "completed",
        "stdout": "é\"\n" * 600_000, "stderr": "x"})
    arguments = {"project": "~p1", "session_id": "~s1", "language": "python", "script": "x"}
    reply = mcp_call(served.url, served.pat, "tools/call", {
        "name": "call_project_tool", "arguments": {"tool": "run_script", "arguments": arguments}})
    assert len(reply.content) <= MiB
    output = reply.json()["result"]["structuredContent"]["output"]
    assert output["output_truncated"] is True and output["job_id"] == "mmo_pjob_1"
    assert output["stderr"] == "x" and 0 < len(output["stdout"]) < 1_800_000
    assert output["suggested_call"]["tool"] == "run_script"
    assert output["suggested_call"]["arguments"] == arguments
    assert output["suggested_call"]["follow_up_kind"] == "needs_judgement"


def test_an_output_within_the_bound_is_untouched(served):
    big = {"stdout": "y" * 400_000}
    served.router.reply = lambda p, t, a: success(big)
    reply = mcp_call(served.url, served.pat, "tools/call",
                     {"name": "list_projects", "arguments": {}})
    assert reply.json()["result"]["structuredContent"] == success(big)


# --- resources ---------------------------------------------------------------------------

def test_ui_resources_are_listed_and_readable_self_contained_html(served):
    listed = mcp_call(served.url, served.pat, "resources/list").json()["result"]["resources"]
    assert {r["uri"] for r in listed} == {"ui://mmo/goal-plan", "ui://mmo/work-result"}
    assert {r["mimeType"] for r in listed} == {"text/html;profile=mcp-app"}
    for uri in ("ui://mmo/goal-plan", "ui://mmo/work-result"):
        body, headers = stateless_request("resources/read", {"uri": uri})
        contents = post(served.url, served.pat, body, headers).json()["result"]["contents"]
        assert [(c["uri"], c["mimeType"]) for c in contents] == [(uri, "text/html;profile=mcp-app")]
        html = contents[0]["text"]
        assert html.startswith("<!doctype html>") and "ui/notifications/tool-result" in html
        assert "<script src" not in html and "http://" not in html and "https://" not in html
    body, headers = stateless_request("resources/read", {"uri": "ui://mmo/nope"})
    assert post(served.url, served.pat, body, headers).json()["error"]["code"] == -32002

"""Spec 12 "MCP endpoint" and "Tool results" from outside: the real ``mmo serve`` process
(started with ``--allow-origin``) and a real ``mmo runner`` process, driven by hand-written
HTTP/JSON-RPC requests to ``POST /mcp`` and by the official MCP SDK client in its
2026-07-28 and legacy (initialize handshake) modes.

One server and one runner serve the whole module; every test uses its own files and
sessions, so the order of the tests does not matter.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from typing import Any

import httpx2 as httpx
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from support.mcp_http import STATELESS, UI_CAPABILITIES, client, post, stateless_request
from support.serve import (
    admin_token,
    api,
    create_runner_token,
    create_user_and_pat,
    start_serve_process,
)
from support.tools_stack import Stack, base_env

# one server (and runner) per module: its tests stay on one xdist worker
pytestmark = pytest.mark.xdist_group("test_protocol")

ALLOWED_ORIGIN = "https://chatgpt.com"
VERSIONS = ("2025-06-18", "2025-11-25", "2026-07-28")
META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
DIRECT = ["list_projects", "work_on_project", "read_files", "edit_project_files", "run_script",
          "run_process", "observe_jobs", "wait_for_job_readiness", "review_changes",
          "finish_coding_task", "call_project_tool"]
UI_TOOL = "get_work_result_state"
UI_MIME = "text/html;profile=mcp-app"
HINTS = {"readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"}
SUGGESTED_KEYS = {"tool", "arguments", "follow_up_kind", "reason"}
FOLLOW_UP_KINDS = {"mechanically_followable", "needs_judgement"}
UNAUTHORIZED = {"code": -32001, "message": "unauthorized"}


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    root = tmp_path_factory.mktemp("protocol")
    server = start_serve_process(root / "serve", "--allow-origin", ALLOWED_ORIGIN,
                                 env=base_env(root / "serve-env"))
    world = Stack(root=root, server=server, admin="", pat="")
    try:
        world.admin = admin_token(root / "serve")
        world.pat = create_user_and_pat(server.url, world.admin, "alice")
        world.add_runner("laptop", {"code": {"git": True}})
        yield world
    finally:
        world.stop()


@pytest.fixture(scope="module")
def code(stack):
    return stack.project("laptop", "code")


# --- helpers -------------------------------------------------------------------------------

def compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def rpc(stack: Stack, method: str, params: dict[str, Any] | None = None, *,
        headers: dict[str, str] | None = None, token: str | None = "pat",
        capabilities: dict[str, Any] | None = None, version: str = STATELESS
        ) -> httpx.Response:
    """One request in the stateless 2026-07-28 form (headers may be overridden)."""
    body, sent = stateless_request(method, params, capabilities=capabilities, version=version)
    return post(stack.url, stack.pat if token == "pat" else token, body,
                {**sent, **(headers or {})})


def legacy(stack: Stack, body: dict[str, Any], headers: dict[str, str] | None = None,
           token: str | None = "pat") -> httpx.Response:
    """A hand-written request with exactly ``headers`` (no ``_meta`` added)."""
    return post(stack.url, stack.pat if token == "pat" else token, body, headers or {})


def result_of(reply: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC result of a 200 application/json reply."""
    assert reply.status_code == 200, reply.text
    assert reply.headers["content-type"].startswith("application/json"), reply.headers
    message = reply.json()
    assert message["jsonrpc"] == "2.0" and "error" not in message, message
    return message["result"]


def error_of(reply: httpx.Response, status: int) -> dict[str, Any]:
    assert reply.status_code == status, reply.text
    assert reply.headers["content-type"].startswith("application/json"), reply.headers
    message = reply.json()
    assert message["jsonrpc"] == "2.0" and "result" not in message, message
    return message["error"]


def envelope_of(result: dict[str, Any]) -> dict[str, Any]:
    """The ENVELOPE of a tool result, checking the result shape of spec 12 "Tool results"."""
    envelope = result["structuredContent"]
    assert result["content"] == [{"type": "text", "text": compact(envelope)}], result
    assert result["isError"] is (not envelope["success"])
    assert isinstance(envelope["output"], dict)
    if envelope["success"]:
        assert set(envelope) == {"success", "output"}, envelope
    else:
        assert set(envelope) == {"success", "output", "error"}, envelope
        assert envelope["output"]["state_changed"] in (False, True, "unknown")
        assert isinstance(envelope["error"], str) and envelope["error"]
        assert "\n" not in envelope["error"] and "Traceback" not in envelope["error"]
    suggested = envelope["output"].get("suggested_call")
    if suggested is not None:
        assert set(suggested) == SUGGESTED_KEYS, suggested
        assert suggested["follow_up_kind"] in FOLLOW_UP_KINDS
        assert isinstance(suggested["arguments"], dict) and suggested["reason"]
    return envelope


def call(stack: Stack, name: str, arguments: Any, **kw: Any) -> dict[str, Any]:
    """The envelope of one direct ``tools/call``."""
    return envelope_of(result_of(rpc(stack, "tools/call",
                                     {"name": name, "arguments": arguments}, **kw)))


def dispatch(stack: Stack, tool: str, arguments: dict[str, Any], *,
             mmo: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
    inner: dict[str, Any] = {"tool": tool, "arguments": arguments}
    if mmo is not None:
        inner["_mmo"] = mmo
    return call(stack, "call_project_tool", inner, **kw)


def ok(envelope: dict[str, Any]) -> dict[str, Any]:
    assert envelope["success"] is True, envelope
    return envelope["output"]


def failed(envelope: dict[str, Any], kind: str) -> dict[str, Any]:
    assert envelope["success"] is False, envelope
    assert envelope["output"]["error_kind"] == kind, envelope
    return envelope


def start(stack: Stack, code: str, instruction: str = "work") -> dict[str, Any]:
    return ok(call(stack, "work_on_project", {"project": code, "instruction": instruction}))


def handoff(stack: Stack, code: str, session: str) -> dict[str, Any]:
    return ok(dispatch(stack, "read_session_handoff",
                       {"project": code, "session_id": session, "include_workspace": False}))


def tool_names(result: dict[str, Any]) -> list[str]:
    return [tool["name"] for tool in result["tools"]]


# --- transport -----------------------------------------------------------------------------

def test_get_and_delete_are_405_and_post_is_the_endpoint(stack):
    for method in ("GET", "DELETE"):
        for headers in ({}, {"Authorization": f"Bearer {stack.pat}",
                             "Accept": "text/event-stream", "Mcp-Session-Id": "s-1"}):
            reply = client().request(method, stack.url + "/mcp", headers=headers)
            assert reply.status_code == 405, (method, reply.text)
            assert "mcp-session-id" not in reply.headers
            assert "text/event-stream" not in reply.headers.get("content-type", "")
    assert tool_names(result_of(rpc(stack, "tools/list"))) == DIRECT


def test_a_batch_is_refused_with_32600_and_runs_nothing(stack, code):
    root = stack.root_of("laptop", "code")
    one, headers = stateless_request("tools/call", {"name": "edit_project_files", "arguments": {
        "project": code, "changes": [{"kind": "create", "path": "batch.txt", "content": "x"}]}})
    for body in ([one], [one, one], []):
        error = error_of(post(stack.url, stack.pat, body, headers), 400)
        assert error["code"] == -32600
    assert not (root / "batch.txt").exists()


def test_a_body_that_is_not_one_json_request_gets_a_json_rpc_error(stack):
    """Garbage, and JSON nested too deep to parse, are JSON-RPC errors, never a 500."""
    deep = b"[" * 100_000 + b"]" * 100_000
    deep_object = b'{"a":' * 50_000 + b"1" + b"}" * 50_000
    for content, code in ((deep, -32700), (deep_object, -32700), (b"\xff\xfe", -32700),
                          (b"{", -32700), (b"42", -32600), (b'{"jsonrpc":"1.0","id":1}', -32600)):
        reply = post(stack.url, stack.pat, None, {}, content=content)
        assert error_of(reply, 400)["code"] == code, content[:20]
    for path in ("/api/tools/call", "/api/users/create"):
        reply = client().post(stack.url + path, content=deep,
                              headers={"Authorization": f"Bearer {stack.admin}"})
        assert reply.status_code == 400 and reply.json()["error"] == "invalid request"
    assert ok(call(stack, "list_projects", {}))["total_count"] == 1


@pytest.mark.parametrize("accept", ["text/event-stream", "application/json", "*/*",
                                    "text/event-stream, application/json", "text/html"])
def test_the_reply_is_one_json_body_whatever_accept_says(stack, accept):
    for method, params in (("tools/list", None),
                           ("tools/call", {"name": "list_projects", "arguments": {}})):
        body, headers = stateless_request(method, params)
        reply = post(stack.url, stack.pat, body, {**headers, "Accept": accept})
        assert reply.status_code == 200 and reply.headers["content-type"] == "application/json"
        message = json.loads(reply.content)  # one JSON value, not an SSE event stream
        assert message["id"] == body["id"] and "result" in message


def test_notifications_get_202_and_no_body(stack):
    for method in ("notifications/initialized", "notifications/cancelled"):
        body = {"jsonrpc": "2.0", "method": method, "params": {"requestId": 1}}
        for headers in ({}, {"MCP-Protocol-Version": STATELESS, "MCP-Method": method}):
            reply = legacy(stack, body, headers)
            assert reply.status_code == 202 and reply.content == b"", reply.text


def test_stateless_no_session_id_issued_and_any_sent_one_is_ignored(stack, code):
    init = legacy(stack, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}})
    assert result_of(init)["protocolVersion"] == "2025-11-25"
    assert "mcp-session-id" not in init.headers
    first = start(stack, code, "first")
    for bogus in ("bogus-session-1", "another-bogus", first["session_id"]):
        reply = rpc(stack, "tools/call", {"name": "work_on_project", "arguments": {
            "project": code, "instruction": "again"}}, headers={"Mcp-Session-Id": bogus})
        assert "mcp-session-id" not in reply.headers
        started = ok(envelope_of(result_of(reply)))
        # a sent session id never resumes anything: each request stands alone
        assert started["continuation"] == "started"
        assert started["session_id"] != first["session_id"]
    # and a request that never initialized works (no handshake needed)
    listed = legacy(stack, {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                            "params": {"name": "list_projects", "arguments": {}}},
                    {"Mcp-Session-Id": "never-issued"})
    assert ok(envelope_of(result_of(listed)))["total_count"] == 1


def test_a_bad_or_missing_bearer_is_401_with_the_bearer_challenge(stack):
    revocable = api(stack.url, stack.admin, "/api/tokens/create",
                    {"username": "alice", "name": "gone", "scopes": ["read"]}).json()
    assert result_of(rpc(stack, "tools/list", token=revocable["token"]))["tools"]
    assert api(stack.url, stack.admin, "/api/tokens/revoke",
               {"token_id": revocable["token_id"]}).status_code == 200
    runner_token = create_runner_token(stack.url, stack.admin, "alice", "spare")
    cases: list[tuple[str | None, dict[str, str]]] = [
        (None, {}), ("mmo_pat_" + "x" * 40, {}), (revocable["token"], {}), (stack.admin, {}),
        (runner_token, {}), (None, {"Authorization": f"Basic {stack.pat}"}),
        (None, {"Authorization": "Bearer"})]
    for token, headers in cases:
        for method, params in (("tools/list", None),
                               ("tools/call", {"name": "list_projects", "arguments": {}})):
            reply = rpc(stack, method, params, token=token, headers=headers)
            error = error_of(reply, 401)
            assert error == UNAUTHORIZED, (token, headers)
            assert reply.headers["www-authenticate"] == 'Bearer realm="mmo"'
    for secret in (stack.pat, stack.admin, runner_token):
        assert secret not in stack.server.stderr()


def test_origin_guard_of_the_real_server_honours_allow_origin(stack, code):
    port = stack.url.rsplit(":", 1)[1]
    for origin in (stack.url, f"http://localhost:{port}", ALLOWED_ORIGIN):
        assert tool_names(result_of(rpc(stack, "tools/list", headers={"Origin": origin})))
    before = start(stack, code, "before")["session_ref"]
    for origin in ("http://chatgpt.com", "https://evil.example",
                   f"http://127.0.0.1:{int(port) + 1}", f"https://127.0.0.1:{port}", "null"):
        for token in ("pat", None):  # refused before the token is even looked at
            reply = rpc(stack, "tools/call", {"name": "work_on_project", "arguments": {
                "project": code, "instruction": "rebound"}}, headers={"Origin": origin},
                token=token)
            assert reply.status_code == 403, (origin, reply.text)
    after = start(stack, code, "after")["session_ref"]
    # no refused request started a session: refs are issued one by one
    assert int(after[2:]) == int(before[2:]) + 1


# --- protocol versions and routing headers ---------------------------------------------------

def _list(meta: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 3, "method": "tools/list",
            "params": {"_meta": meta} if meta is not None else {}}


def test_protocol_version_from_meta_else_header_else_2025_06_18(stack):
    # nothing given: 2025-06-18 (no routing headers needed, no 2026 result fields)
    assert "resultType" not in result_of(legacy(stack, _list()))
    # the header alone picks the version: 2026-07-28 then needs MCP-Method
    assert error_of(legacy(stack, _list(), {"MCP-Protocol-Version": STATELESS}), 400) == {
        "code": -32600, "message": "MCP-Method header mismatch"}
    assert result_of(legacy(stack, _list(), {"MCP-Protocol-Version": STATELESS,
                                             "MCP-Method": "tools/list"}))["resultType"] == \
        "complete"
    assert "resultType" not in result_of(legacy(stack, _list(),
                                                {"MCP-Protocol-Version": "2025-11-25"}))
    # _meta alone picks it too
    assert error_of(legacy(stack, _list({META_VERSION: STATELESS})), 400)["message"] == \
        "MCP-Method header mismatch"
    assert "resultType" not in result_of(legacy(stack, _list({META_VERSION: "2025-11-25"})))
    # both, equal: fine; different: 400 mismatch (whichever is the supported one)
    for meta, header in (("2025-11-25", "2025-11-25"), (STATELESS, STATELESS)):
        assert result_of(legacy(stack, _list({META_VERSION: meta}), {
            "MCP-Protocol-Version": header, "MCP-Method": "tools/list"}))["tools"]
    for meta, header in (("2025-11-25", "2025-06-18"), (STATELESS, "2025-11-25"),
                         ("2025-06-18", STATELESS)):
        reply = legacy(stack, _list({META_VERSION: meta}),
                       {"MCP-Protocol-Version": header, "MCP-Method": "tools/list"})
        error = error_of(reply, 400)
        assert (error["code"], error["message"]) == (-32600, "protocol version mismatch")
        assert reply.json()["id"] == 3
    for body, headers in ((_list({META_VERSION: "2024-11-05"}), {}),
                          (_list(), {"MCP-Protocol-Version": "1999-01-01"}),
                          (_list({META_VERSION: "2099-01-01"}), {"MCP-Method": "tools/list"})):
        error = error_of(legacy(stack, body, headers), 400)
        assert (error["code"], error["message"]) == (-32600, "unsupported protocol version")


def test_initialize_is_answered_with_the_asked_version_or_2025_11_25(stack):
    for asked, answered in [*((v, v) for v in VERSIONS), ("2024-11-05", "2025-11-25"),
                            (None, "2025-11-25")]:
        params: dict[str, Any] = {"capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
        if asked is not None:
            params["protocolVersion"] = asked
        result = result_of(legacy(stack, {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                          "params": params}))
        assert result["protocolVersion"] == answered
        assert result["serverInfo"]["name"] == "mmo"
        assert {"tools", "resources"} <= set(result["capabilities"])


def test_ping_is_an_empty_result_in_every_version(stack):
    for version in VERSIONS:
        assert result_of(rpc(stack, "ping", version=version)) == {}
    assert result_of(legacy(stack, {"jsonrpc": "2.0", "id": 9, "method": "ping"})) == {}


def test_mcp_method_and_mcp_name_are_required_in_2026_and_checked_when_present_before(
        stack, code):
    root = stack.root_of("laptop", "code")
    create = {"name": "edit_project_files", "arguments": {"project": code, "changes": [
        {"kind": "create", "path": "headers.txt", "content": "x"}]}}
    method_mismatch = {"code": -32600, "message": "MCP-Method header mismatch"}
    name_mismatch = {"code": -32600, "message": "MCP-Name header mismatch"}
    for drop, expected in (("MCP-Method", method_mismatch), ("MCP-Name", name_mismatch)):
        body, headers = stateless_request("tools/call", create)
        del headers[drop]
        assert error_of(post(stack.url, stack.pat, body, headers), 400) == expected
    for header, value, expected in (("MCP-Method", "tools/list", method_mismatch),
                                    ("MCP-Name", "read_files", name_mismatch)):
        assert error_of(rpc(stack, "tools/call", create, headers={header: value}), 400) == \
            expected
    body, headers = stateless_request("tools/list")
    del headers["MCP-Method"]
    assert error_of(post(stack.url, stack.pat, body, headers), 400) == method_mismatch
    for version in ("2025-06-18", "2025-11-25"):
        message = {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": create}
        for header, value, expected in (("MCP-Method", "tools/list", method_mismatch),
                                        ("MCP-Name", "read_files", name_mismatch)):
            assert error_of(legacy(stack, message, {"MCP-Protocol-Version": version,
                                                    header: value}), 400) == expected
    assert not (root / "headers.txt").exists()  # no refused request ran its tool
    message = {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": create}
    ok(envelope_of(result_of(legacy(stack, message, {"MCP-Protocol-Version": "2025-11-25"}))))
    assert (root / "headers.txt").read_text() == "x"


def test_session_hints_in_meta_never_select_or_resume_a_session(stack, code):
    a = start(stack, code, "A")
    b = start(stack, code, "B")
    hints = {"openai/session": a["session_id"], "openai/subject": "user-1",
             "openai/conversation": a["session_ref"], "sessionId": a["session_id"]}
    params = {"name": "work_on_project", "arguments": {"project": code, "instruction": "C"},
              "_meta": hints}
    started = ok(envelope_of(result_of(rpc(stack, "tools/call", params))))
    assert started["continuation"] == "started"
    assert started["session_id"] not in (a["session_id"], b["session_id"])
    # a tool that needs a session is not given one by a hint
    run = {"name": "run_script", "arguments": {"project": code, "language": "python",
                                               "script": "print(1)"}, "_meta": hints}
    refused = failed(envelope_of(result_of(rpc(stack, "tools/call", run))), "invalid_arguments")
    assert "session_id" in refused["error"]
    # and a finish acts on its session_id, not on the hinted one
    finish = {"name": "finish_coding_task", "arguments": {
        "project": code, "session_id": b["session_id"], "summary": "B done"}, "_meta": hints}
    assert ok(envelope_of(result_of(rpc(stack, "tools/call", finish))))["session_id"] == \
        b["session_id"]
    state = {s: ok(dispatch(stack, UI_TOOL, {"project": code, "session_id": s},
                            capabilities=UI_CAPABILITIES))["work_result"]
             for s in (a["session_id"], b["session_id"])}
    assert state[b["session_id"]]["status"] == "finished"
    assert state[a["session_id"]]["status"] == "open"
    assert handoff(stack, code, a["session_id"])["recent_activity"] == []


# --- listing, UI capability, resources, unknown tools ----------------------------------------

def test_tools_list_is_exactly_the_direct_tools_with_schemas_and_explicit_hints(stack):
    for version in VERSIONS:
        for capabilities, expected in ((None, DIRECT), (UI_CAPABILITIES, [*DIRECT, UI_TOOL])):
            tools = result_of(rpc(stack, "tools/list", capabilities=capabilities,
                                  version=version))["tools"]
            assert [t["name"] for t in tools] == expected
            for tool in tools:
                assert tool["inputSchema"]["type"] == "object", tool["name"]
                assert set(tool["annotations"]) == HINTS, tool["name"]
                assert all(type(v) is bool for v in tool["annotations"].values())
                if tool["name"] == UI_TOOL:
                    assert tool["_meta"]["ui"] == {"resourceUri": "ui://mmo/work-result",
                                                   "visibility": ["app"]}
                else:
                    assert "ui" not in tool.get("_meta", {}), tool["name"]
    by_name = {t["name"]: t for t in result_of(rpc(stack, "tools/list"))["tools"]}
    assert by_name["read_files"]["annotations"]["readOnlyHint"] is True
    assert by_name["edit_project_files"]["annotations"]["readOnlyHint"] is False
    assert set(by_name["call_project_tool"]["inputSchema"]["required"]) == {"tool"}


@pytest.mark.parametrize("capabilities", [
    None, {}, {"extensions": {"io.modelcontextprotocol/ui": {"mimeTypes": ["text/html"]}}},
    {"extensions": {"io.modelcontextprotocol/ui": {}}},
    {"extensions": {"io.modelcontextprotocol/ui": {"mimeTypes": UI_MIME}}},
    {"experimental": {"io.modelcontextprotocol/ui": {"mimeTypes": [UI_MIME]}}}])
def test_the_app_only_tool_is_unknown_to_a_client_that_is_not_ui_capable(stack, code,
                                                                          capabilities):
    session = start(stack, code, "ui")["session_id"]
    assert UI_TOOL not in tool_names(result_of(rpc(stack, "tools/list",
                                                   capabilities=capabilities)))
    reply = rpc(stack, "tools/call", {"name": UI_TOOL, "arguments": {
        "project": code, "session_id": session}}, capabilities=capabilities)
    assert error_of(reply, 200) == {"code": -32602, "message": "unknown tool"}
    failed(dispatch(stack, UI_TOOL, {"project": code, "session_id": session},
                    capabilities=capabilities), "unknown_tool")


def test_a_ui_capable_request_lists_and_calls_the_app_only_tool(stack, code):
    session = start(stack, code, "ui")["session_id"]
    caps = {"extensions": {"io.modelcontextprotocol/ui": {"mimeTypes": ["text/html", UI_MIME]}}}
    assert tool_names(result_of(rpc(stack, "tools/list", capabilities=caps)))[-1] == UI_TOOL
    direct = ok(call(stack, UI_TOOL, {"project": code, "session_id": session},
                     capabilities=caps))
    assert direct["work_result"]["session_id"] == session
    assert direct["work_result"]["status"] == "open"
    assert ok(dispatch(stack, UI_TOOL, {"project": code, "session_id": session},
                       capabilities=caps)) == direct
    # older revisions carry the capability in the request's _meta the same way
    message = {"jsonrpc": "2.0", "id": 8, "method": "tools/list",
               "params": {"_meta": {META_CAPABILITIES: caps}}}
    assert UI_TOOL in tool_names(result_of(legacy(stack, message,
                                                  {"MCP-Protocol-Version": "2025-11-25"})))


def test_ui_resources_are_listed_and_read_as_mcp_app_html(stack):
    for capabilities in (None, UI_CAPABILITIES):
        listed = result_of(rpc(stack, "resources/list", capabilities=capabilities))
        assert {(r["uri"], r["mimeType"]) for r in listed["resources"]} == {
            ("ui://mmo/goal-plan", UI_MIME), ("ui://mmo/work-result", UI_MIME)}
    for uri in ("ui://mmo/goal-plan", "ui://mmo/work-result"):
        [content] = result_of(rpc(stack, "resources/read", {"uri": uri}))["contents"]
        assert (content["uri"], content["mimeType"]) == (uri, UI_MIME)
        assert "<html" in content["text"].lower()
    assert "error" in rpc(stack, "resources/read", {"uri": "ui://mmo/nope"}).json()


def test_the_dispatcher_accepts_direct_tools_too_and_returns_their_result_unchanged(stack, code):
    root = stack.root_of("laptop", "code")
    (root / "same.txt").write_text("same\n", encoding="utf-8")
    for name, arguments in (("list_projects", {}),
                            ("read_files", {"project": code, "items": [{"path": "same.txt"}]}),
                            ("read_files", {"project": code, "items": [{"path": "same.txt"}],
                                            "bogus": 1}),
                            ("observe_jobs", {"items": [{"job_id": "mmo_pjob_00"}]})):
        assert dispatch(stack, name, arguments) == call(stack, name, arguments), name


def test_unknown_tools_are_32602_in_tools_call_and_unknown_tool_in_the_dispatcher(stack):
    for name in ("no_such_tool", "get_goal", "team_spawn", "session_status", "artifact_read"):
        reply = rpc(stack, "tools/call", {"name": name, "arguments": {}},
                    capabilities=UI_CAPABILITIES)
        assert error_of(reply, 200) == {"code": -32602, "message": "unknown tool"}, name
    for name in ("no_such_tool", "session_status", "resolve_project_path"):
        refused = failed(dispatch(stack, name, {}), "unknown_tool")
        assert refused["output"]["state_changed"] is False


# --- tool results -------------------------------------------------------------------------------

def test_bad_arguments_are_failed_results_naming_the_field_and_change_nothing(stack, code):
    root = stack.root_of("laptop", "code")
    session = start(stack, code, "bad args")["session_id"]
    create = {"kind": "create", "path": "bad-args.txt", "content": "x"}
    cases = [
        ("list_projects", {"verbose": True}, "verbose"),
        ("work_on_project", {"project": code}, "instruction"),
        ("read_files", {"project": code, "items": [{"path": "README.md", "lines": 3}]}, "lines"),
        ("edit_project_files", {"project": code, "session_id": session,
                                "changes": [{**create, "mode": "0644"}]}, "mode"),
        ("edit_project_files", {"project": code, "changes": [create], "dry_run": True},
         "dry_run"),
        ("run_script", {"project": code, "session_id": session, "language": "ruby",
                        "script": "open('bad-args.txt', 'w')"}, "language"),
        ("run_script", {"project": code, "session_id": session, "language": "python",
                        "script": "open('bad-args.txt', 'w')", "env": {}}, "env"),
        ("observe_jobs", {"items": [{"job_id": "mmo_pjob_0"}], "tail_lines": 501}, "tail_lines"),
        ("wait_for_job_readiness", {"job_ids": ["mmo_pjob_0"], "wait_secs": 1}, "mode"),
        ("review_changes", {"project": code, "session_id": session, "scope": {"kind": "all"}},
         "scope"),
        ("finish_coding_task", {"project": code, "session_id": session, "status": "done"},
         "status"),
        ("call_project_tool", {"tool": "get_goal", "arguments": {}, "extra": 1}, "extra"),
    ]
    for name, arguments, field in cases:
        reply = rpc(stack, "tools/call", {"name": name, "arguments": arguments})
        envelope = failed(envelope_of(result_of(reply)), "invalid_arguments")
        assert envelope["output"]["state_changed"] is False, name
        assert field in envelope["error"], (name, envelope["error"])
    for tool, arguments, field in (
            ("get_goal", {"goal_id": "g", "verbose": 1}, "verbose"),
            ("transfer_project_artifact", {"source_project": code, "source_path": "README.md",
                                           "destination_project": code}, "destination_path"),
            ("prepare_goal_workflow", {"session_id": session, "title": "t"}, "objective"),
            ("edit_project_files", {"project": code, "changes": [create], "force": True},
             "force")):
        envelope = failed(dispatch(stack, tool, arguments), "invalid_arguments")
        assert field in envelope["error"], (tool, envelope["error"])
    for arguments in ("not an object", ["a"]):
        failed(call(stack, "read_files", arguments), "invalid_arguments")
    assert not (root / "bad-args.txt").exists()


def test_a_value_of_the_wrong_json_type_is_refused_not_coerced(stack, code):
    """``inputSchema`` says boolean / integer / string: ``"yes"``, ``"5"``, ``true`` or ``5``
    in their place are bad arguments, never guessed into good ones."""
    root = stack.root_of("laptop", "code")
    (root / "typed.txt").write_text("1\n2\n3\n", encoding="utf-8")
    session = start(stack, code, "types")["session_id"]
    script = "open('typed-ran.txt', 'w').write('ran')"
    cases = [
        ("run_script", {"project": code, "session_id": session, "language": "python",
                        "script": script, "wait_secs": "5"}, "wait_secs"),
        ("run_script", {"project": code, "session_id": session, "language": "python",
                        "script": script, "timeout_secs": "60"}, "timeout_secs"),
        ("run_process", {"project": code, "session_id": session, "executable": "python3",
                         "args": ["-c", script], "timeout_secs": 5, "interactive": "yes"},
         "interactive"),
        ("read_files", {"project": code, "items": [{"path": "typed.txt", "limit": "2"}]},
         "limit"),
        ("read_files", {"project": code, "items": [{"path": "typed.txt", "limit": True}]},
         "limit"),
        ("finish_coding_task", {"project": code, "session_id": session, "summary_only": 1},
         "summary_only"),
        ("observe_jobs", {"items": [{"job_id": "mmo_pjob_0"}], "tail_lines": 2.5},
         "tail_lines"),
        ("work_on_project", {"project": code, "instruction": 5}, "instruction"),
    ]
    for name, arguments, field in cases:
        envelope = failed(call(stack, name, arguments), "invalid_arguments")
        assert field in envelope["error"], (name, envelope["error"])
        assert envelope["output"]["state_changed"] is False
    failed(dispatch(stack, "read_session_handoff", {"project": code, "session_id": session,
                                                    "include_workspace": "false"}),
           "invalid_arguments")
    assert not (root / "typed-ran.txt").exists()
    state = ok(dispatch(stack, UI_TOOL, {"project": code, "session_id": session},
                        capabilities=UI_CAPABILITIES))
    assert state["work_result"]["status"] == "open"  # the refused finish recorded nothing


def test_mutating_tools_always_report_state_changed(stack, code):
    root = stack.root_of("laptop", "code")
    session = start(stack, code, "mutations")["session_id"]
    edit = ok(call(stack, "edit_project_files", {"project": code, "session_id": session,
                                                 "changes": [{"kind": "create",
                                                              "path": "mut.txt",
                                                              "content": "m\n"}]}))
    assert edit["state_changed"] is True
    refused = failed(call(stack, "edit_project_files", {"project": code, "session_id": session,
                                                        "changes": [{"kind": "create",
                                                                     "path": "mut.txt",
                                                                     "content": "n\n"}]}),
                     "file_exists")
    assert refused["output"]["state_changed"] is False and (root / "mut.txt").read_text() == "m\n"
    ran = ok(call(stack, "run_script", {"project": code, "session_id": session,
                                        "language": "python", "script": "print('ran')"}))
    assert ran["state_changed"] is True
    nonzero = failed(call(stack, "run_script", {"project": code, "session_id": session,
                                                "language": "python",
                                                "script": "raise SystemExit(7)"}),
                     "nonzero_exit")
    assert nonzero["output"]["state_changed"] is True and nonzero["output"]["exit_code"] == 7
    copied = ok(dispatch(stack, "transfer_project_artifact", {
        "source_project": code, "source_path": "mut.txt", "destination_project": code,
        "destination_path": "mut-copy.txt"}))
    assert copied["state_changed"] is True
    finished = ok(call(stack, "finish_coding_task", {"project": code, "session_id": session,
                                                     "summary": "done"}))
    assert finished["state_changed"] is True
    prepared = ok(dispatch(stack, "prepare_goal_workflow", {
        "session_id": session, "title": "t", "objective": "o", "completion_conditions": [],
        "steps": [{"id": "a", "title": "a"}], "idempotency_key": "k1"}))
    assert prepared["state_changed"] is True and prepared["replayed"] is False


def test_suggested_calls_have_the_spec_shape_and_followable_ones_work_as_given(stack, code):
    root = stack.root_of("laptop", "code")
    (root / "three.txt").write_text("1\n2\n3\n", encoding="utf-8")
    selector = failed(call(stack, "work_on_project", {"path": str(root), "instruction": "x"}),
                      "invalid_project_selector")
    suggested = selector["output"]["suggested_call"]
    assert (suggested["tool"], suggested["arguments"], suggested["follow_up_kind"]) == (
        "list_projects", {}, "mechanically_followable")
    assert ok(call(stack, suggested["tool"], suggested["arguments"]))["total_count"] == 1
    page = ok(call(stack, "read_files", {"project": code,
                                         "items": [{"path": "three.txt", "limit": 2}]}))
    follow = page["suggested_call"]
    assert follow["follow_up_kind"] == "mechanically_followable"
    rest = ok(call(stack, follow["tool"], follow["arguments"]))
    assert rest["items"][0]["output"]["text"] == "3\n"
    session = start(stack, code, "pending")["session_id"]
    pending = ok(call(stack, "run_script", {"project": code, "session_id": session,
                                            "language": "python",
                                            "script": "import sys; sys.stdin.read()",
                                            "wait_secs": 0}))
    assert pending["execution_state"] == "pending"
    wait = pending["suggested_call"]
    assert (wait["tool"], wait["follow_up_kind"]) == ("wait_for_job_readiness",
                                                      "mechanically_followable")
    assert wait["arguments"]["job_ids"] == [pending["job_id"]]
    assert ok(call(stack, wait["tool"], wait["arguments"]))["ready_job_ids"] == [
        pending["job_id"]]


def test_mmo_record_is_bookkeeping_only_on_direct_and_dispatched_calls(stack, code):
    root = stack.root_of("laptop", "code")
    a = start(stack, code, "business")
    b = start(stack, code, "recorder")
    created = ok(call(stack, "edit_project_files", {
        "project": code, "session_id": a["session_id"], "_mmo": {"record": b["session_id"]},
        "changes": [{"kind": "create", "path": "recorded.txt", "content": "r\n"}]}))
    assert created["state_changed"] is True and (root / "recorded.txt").read_text() == "r\n"
    finished = ok(dispatch(stack, "finish_coding_task", {
        "project": code, "session_id": a["session_id"], "summary": "A", "outputs":
            ["recorded.txt"]}, mmo={"record": b["session_ref"]}))
    assert finished["session_id"] == a["session_id"]
    state = {k: ok(dispatch(stack, UI_TOOL, {"project": code, "session_id": s["session_id"]},
                            capabilities=UI_CAPABILITIES))["work_result"]
             for k, s in (("a", a), ("b", b))}
    assert (state["a"]["status"], state["a"]["summary"]) == ("finished", "A")
    assert state["a"]["task_outputs"]["verified_count"] == 1
    assert state["b"]["status"] == "open" and state["b"]["task_outputs"] is None
    logged = handoff(stack, code, b["session_id"])["recent_activity"]
    assert [(e["tool"], e["success"], e["business_session"]) for e in logged] == [
        ("edit_project_files", True, a["session_id"]),
        ("finish_coding_task", True, a["session_id"])]
    assert handoff(stack, code, a["session_id"])["recent_activity"] == []
    # recording in a session never starts or resumes that session
    fresh = ok(call(stack, "work_on_project", {"project": code, "instruction": "new",
                                               "_mmo": {"record": b["session_id"]}}))
    assert fresh["continuation"] == "started"
    assert fresh["session_id"] not in (a["session_id"], b["session_id"])
    resumed = ok(dispatch(stack, "work_on_project", {
        "project": code, "instruction": "again", "session_id": a["session_ref"]},
        mmo={"record": b["session_ref"]}))
    assert (resumed["continuation"], resumed["session_id"]) == ("resumed_explicitly",
                                                                a["session_id"])
    assert [e["business_session"] for e in handoff(stack, code, b["session_id"])[
        "recent_activity"]][2:] == [fresh["session_id"], a["session_id"]]
    # the envelope is checked like any argument: unknown keys, twice, an unknown session
    for arguments in ({"tool": "get_goal", "arguments": {"goal_id": "g"}, "_mmo": {"x": 1}},
                      {"tool": "get_goal", "arguments": {"goal_id": "g", "_mmo": {}},
                       "_mmo": {}}):
        failed(call(stack, "call_project_tool", arguments), "invalid_arguments")
    nowhere = failed(call(stack, "edit_project_files", {
        "project": code, "session_id": a["session_id"], "_mmo": {"record": "~s9999"},
        "changes": [{"kind": "create", "path": "never.txt", "content": "n"}]}),
        "session_not_found")
    assert nowhere["output"]["state_changed"] is False and not (root / "never.txt").exists()


def test_no_output_or_error_holds_an_absolute_path_of_the_runner(stack, code):
    root = stack.root_of("laptop", "code")
    session = start(stack, code, "paths")["session_id"]
    texts = [
        call(stack, "work_on_project", {"path": str(root), "instruction": "x"}),
        call(stack, "work_on_project", {"client_id": "laptop", "path": "/etc", "instruction": "x"}),
        call(stack, "read_files", {"project": code, "items": [
            {"path": str(root / "README.md")}, {"path": "../escape"}, {"path": "missing.txt"}]}),
        call(stack, "edit_project_files", {"project": code, "changes": [
            {"kind": "create", "path": str(root / "abs.txt"), "content": "x"}]}),
        call(stack, "run_script", {"project": code, "session_id": session,
                                   "language": "python", "script":
                                       "import os; print(os.getcwd(), os.path.abspath('f'));"
                                       "raise RuntimeError(os.getcwd())"}),
        call(stack, "run_process", {"project": code, "session_id": session,
                                    "executable": "/bin/echo", "args": [], "timeout_secs": 5}),
        call(stack, "finish_coding_task", {"project": code, "session_id": session,
                                           "outputs": [str(root / "README.md"), "../x"]}),
        call(stack, "review_changes", {"project": code, "session_id": session,
                                       "scope": {"kind": "commit", "rev": "no-such-rev"}}),
        dispatch(stack, "read_session_handoff", {"project": code, "session_id": session,
                                                 "include_workspace": True}),
        dispatch(stack, "transfer_project_artifact", {
            "source_project": code, "source_path": str(root / "README.md"),
            "destination_project": code, "destination_path": "x.md"}),
    ]
    for envelope in texts:
        text = compact(envelope)
        assert str(stack.root) not in text and str(root) not in text, text[:600]


# --- the official MCP SDK through a whole small workflow -------------------------------------

async def _sdk_workflow(url: str, pat: str, mode: str, code: str, name: str) -> dict[str, Any]:
    http = httpx.AsyncClient(headers={"Authorization": f"Bearer {pat}"},
                             timeout=httpx.Timeout(120.0))
    seen: dict[str, Any] = {}

    def envelope(result: Any) -> dict[str, Any]:
        assert len(result.content) == 1 and result.content[0].type == "text"
        assert result.content[0].text == compact(result.structured_content)
        assert result.is_error is (not result.structured_content["success"])
        return result.structured_content

    async with http, Client(streamable_http_client(url + "/mcp", http_client=http), mode=mode,
                            cache=None) as sdk:
        seen["version"] = sdk.protocol_version
        seen["tools"] = [t.name for t in (await sdk.list_tools()).tools]
        listed = envelope(await sdk.call_tool("list_projects", {}))
        ref = next(p["project_ref"] for p in listed["output"]["projects"] if p["id"] == code)
        started = envelope(await sdk.call_tool(
            "work_on_project", {"project": ref, "instruction": f"sdk {mode}"},
            meta={"openai/session": "mmo_sess_not-this-one"}))
        session = started["output"]["session_id"]
        seen["continuation"] = started["output"]["continuation"]
        created = envelope(await sdk.call_tool("edit_project_files", {
            "project": ref, "session_id": session,
            "changes": [{"kind": "create", "path": f"{name}.txt", "content": "alpha\nbeta\n"}]}))
        seen["created"] = created["success"]
        read = envelope(await sdk.call_tool("read_files", {
            "project": ref, "session_id": session, "items": [{"path": f"{name}.txt"}]}))
        page = read["output"]["items"][0]["output"]
        seen["read"] = page["text"]
        edited = envelope(await sdk.call_tool("edit_project_files", {
            "project": ref, "session_id": session, "changes": [{
                "kind": "edit", "path": f"{name}.txt",
                "expected_read_revision": page["read_revision"],
                "edits": [{"kind": "replace_exact", "old_text": "beta", "new_text": "gamma"}]}]}))
        seen["edited"] = edited["output"].get("state_changed")
        ran = envelope(await sdk.call_tool("run_script", {
            "project": ref, "session_id": session, "language": "python", "purpose": "validation",
            "script": f"data = open('{name}.txt').read()\n"
                      f"open('{name}.out', 'w').write(data.upper())\nprint('made it')"}))
        seen["ran"] = (ran["output"]["exit_code"], ran["output"]["stdout"])
        bad = envelope(await sdk.call_tool("read_files", {"project": ref, "nope": 1}))
        seen["bad"] = bad["output"]["error_kind"]
        try:
            await sdk.call_tool("get_goal", {"goal_id": "g"})
        except MCPError as exc:
            seen["unknown"] = (exc.error.code, exc.error.message)
        finished = envelope(await sdk.call_tool("finish_coding_task", {
            "project": ref, "session_id": session, "summary": "sdk done",
            "outputs": [f"{name}.out"]}))
        seen["finished"] = finished["output"]
        seen["session"] = session
        handed = envelope(await sdk.call_tool("call_project_tool", {
            "tool": "read_session_handoff",
            "arguments": {"project": ref, "session_id": session, "include_workspace": False}}))
        seen["handoff"] = handed["output"]["session_id"]
    return seen


@pytest.mark.parametrize("mode,version", [("2026-07-28", "2026-07-28"),
                                          ("legacy", "2025-11-25")])
def test_the_official_sdk_runs_a_whole_workflow(stack, code, mode, version):
    root = stack.root_of("laptop", "code")
    name = f"sdk-{mode}"
    seen = asyncio.run(_sdk_workflow(stack.url, stack.pat, mode, code, name))
    assert seen["version"] == version
    assert seen["tools"] == DIRECT
    assert seen["continuation"] == "started"  # the openai/session hint selected nothing
    assert seen["created"] is True and seen["read"] == "alpha\nbeta\n"
    assert seen["edited"] is True
    assert seen["ran"] == (0, "made it\n")
    assert seen["bad"] == "invalid_arguments"
    assert seen["unknown"] == (-32602, "unknown tool")
    output = (root / f"{name}.out").read_bytes()
    assert output == b"ALPHA\nGAMMA\n"
    finished = seen["finished"]
    assert finished["session_id"] == seen["session"] == seen["handoff"]
    assert finished["state_changed"] is True
    assert finished["task_outcome"] == {"status": "pass", "blocking": False,
                                        "blocking_reasons": [], "validation": "passed"}
    assert finished["task_outputs"]["items"] == [{
        "path": f"{name}.out", "status": "verified",
        "sha256": hashlib.sha256(output).hexdigest(), "file_bytes": len(output)}]

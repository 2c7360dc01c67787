"""The admin HTTP API over real HTTP against an in-process server (spec 12, "Admin HTTP
API", "Limits"): replies, the error matrix and the 8 MiB body bound."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx2 as httpx
import pytest
from support.serve import RunnerLink, admin_token, api, running_server
from support.waiting import wait_until

MIB = 1024 * 1024


@pytest.fixture(autouse=True)
def _isolated(mmo_env):
    yield


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, str, Any]]:
    """``(base_url, admin_token, app)`` of a fresh server."""
    state = tmp_path / "serve"
    with running_server(state) as (base_url, app):
        yield base_url, admin_token(state), app


def _ok(reply: httpx.Response) -> dict[str, Any]:
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["success"] is True
    return body


def _failed(reply: httpx.Response, status: int, phrase: str) -> dict[str, Any]:
    assert reply.status_code == status, reply.text
    body = reply.json()
    assert body["success"] is False and body["error"] == phrase, body
    return body


def test_users_tokens_and_runner_tokens_are_created_as_the_spec_replies(server) -> None:
    base, admin, _ = server
    user = _ok(api(base, admin, "/api/users/create", {"username": "alice"}))["user"]
    assert set(user) == {"username", "created_at"} and user["username"] == "alice"

    pat = _ok(api(base, admin, "/api/tokens/create",
                  {"username": "alice", "name": "laptop", "scopes": ["goals", "read"]}))
    assert set(pat) == {"success", "token", "token_id", "scopes"}
    assert pat["token"].startswith("mmo_pat_") and pat["scopes"] == ["read", "goals"]

    runner = _ok(api(base, admin, "/api/runner-tokens/create",
                     {"username": "alice", "client_id": "laptop", "name": "home"}))
    assert set(runner) == {"success", "token", "token_id", "client_id"}
    assert runner["token"].startswith("mmo_rt_") and runner["client_id"] == "laptop"

    assert _ok(api(base, admin, "/api/tokens/revoke", {"token_id": pat["token_id"]})) == {
        "success": True}
    assert _ok(api(base, admin, "/api/runners", method="GET")) == {"success": True,
                                                                    "runners": []}


def test_bad_missing_or_runner_tokens_are_unauthorized(server) -> None:
    base, admin, _ = server
    api(base, admin, "/api/users/create", {"username": "alice"})
    runner = api(base, admin, "/api/runner-tokens/create",
                 {"username": "alice", "client_id": "laptop", "name": "t"}).json()["token"]
    for token in (None, "wrong", admin + "x", runner):
        reply = api(base, token, "/api/users/create", {"username": "bob"})
        _failed(reply, 401, "unauthorized")
        assert reply.headers["www-authenticate"] == 'Bearer realm="mmo"'
        _failed(api(base, token, "/api/runners", method="GET"), 401, "unauthorized")
        _failed(api(base, token, "/api/tools/call", {"tool": "list_projects"}), 401,
                "unauthorized")
    raw = httpx.post(base + "/api/users/create", json={"username": "bob"},
                     headers={"Authorization": admin})  # no "Bearer"
    _failed(raw, 401, "unauthorized")
    assert "bob" not in json.dumps(_ok(api(base, admin, "/api/runners", method="GET")))


def test_a_pat_needs_the_admin_scope_for_the_admin_api(server) -> None:
    base, admin, _ = server
    api(base, admin, "/api/users/create", {"username": "alice"})
    plain = api(base, admin, "/api/tokens/create", {
        "username": "alice", "name": "t",
        "scopes": ["read", "write", "execute", "goals", "delegate"]}).json()["token"]
    for path, body in (("/api/users/create", {"username": "bob"}),
                       ("/api/tokens/create", {"username": "alice", "name": "x",
                                               "scopes": ["admin"]}),
                       ("/api/tokens/revoke", {"token_id": "tok_x"}),
                       ("/api/runner-tokens/create", {"username": "alice",
                                                      "client_id": "c", "name": "x"})):
        _failed(api(base, plain, path, body), 403, "forbidden")
    _failed(api(base, plain, "/api/runners", method="GET"), 403, "forbidden")

    ops = api(base, admin, "/api/tokens/create",
              {"username": "alice", "name": "ops", "scopes": ["admin"]}).json()["token"]
    assert _ok(api(base, ops, "/api/users/create", {"username": "bob"}))["user"]["username"] \
        == "bob"
    _ok(api(base, ops, "/api/runners", method="GET"))


def test_a_revoked_pat_fails_from_the_next_request(server) -> None:
    base, admin, _ = server
    api(base, admin, "/api/users/create", {"username": "alice"})
    issued = api(base, admin, "/api/tokens/create",
                 {"username": "alice", "name": "ops", "scopes": ["admin"]}).json()
    _ok(api(base, issued["token"], "/api/runners", method="GET"))
    _ok(api(base, issued["token"], "/api/tokens/revoke", {"token_id": issued["token_id"]}))
    _failed(api(base, issued["token"], "/api/runners", method="GET"), 401, "unauthorized")
    _failed(api(base, admin, "/api/tokens/revoke", {"token_id": "tok_nope"}), 404,
            "unknown token")


@pytest.mark.parametrize(("path", "body", "field"), [
    ("/api/users/create", {"username": "alice", "admin": True}, "admin"),
    ("/api/users/create", {}, "username"),
    ("/api/users/create", {"username": 7}, "username"),
    ("/api/tokens/create", {"username": "alice", "name": "t", "scopes": "read"}, "scopes"),
    ("/api/tokens/create", {"username": "alice", "name": "t", "scopes": ["read"],
                            "expires": 1}, "expires"),
    ("/api/tokens/revoke", {"token_id": "tok_x", "force": True}, "force"),
    ("/api/runner-tokens/create", {"username": "alice", "client_id": "c"}, "name"),
    ("/api/tools/call", {"tool": "list_projects", "params": {}, "extra": 1}, "extra"),
    ("/api/tools/call", {"tool": "list_projects", "params": []}, "params"),
])
def test_unknown_missing_or_mistyped_fields_are_invalid_requests(server, path, body,
                                                                 field) -> None:
    base, admin, _ = server
    api(base, admin, "/api/users/create", {"username": "alice"})
    reply = _failed(api(base, admin, path, body), 400, "invalid request")
    assert repr(field) in reply["detail"]
    assert _ok(api(base, admin, "/api/runners", method="GET"))["runners"] == []


def test_bodies_that_are_not_a_json_object_are_invalid_requests(server) -> None:
    base, admin, _ = server
    headers = {"Authorization": f"Bearer {admin}"}
    for content in (b"", b"{", b"[1]", b'"alice"', b"\xff\xfe"):
        reply = httpx.post(base + "/api/users/create", content=content, headers=headers)
        _failed(reply, 400, "invalid request")


def test_bad_values_unknown_scope_unknown_user_and_duplicates(server) -> None:
    base, admin, _ = server
    _ok(api(base, admin, "/api/users/create", {"username": "alice"}))
    _failed(api(base, admin, "/api/users/create", {"username": "alice"}), 409, "already exists")
    bad = _failed(api(base, admin, "/api/users/create", {"username": "Alice!"}), 400,
                  "invalid request")
    assert "username" in bad["detail"]
    _failed(api(base, admin, "/api/tokens/create",
                {"username": "alice", "name": "t", "scopes": ["read", "sudo"]}),
            400, "unknown scope")
    _failed(api(base, admin, "/api/tokens/create",
                {"username": "carol", "name": "t", "scopes": ["read"]}), 404, "unknown user")
    _failed(api(base, admin, "/api/runner-tokens/create",
                {"username": "carol", "client_id": "box", "name": "t"}), 404, "unknown user")
    _ok(api(base, admin, "/api/users/create", {"username": "bob"}))
    _ok(api(base, admin, "/api/runner-tokens/create",
            {"username": "alice", "client_id": "box", "name": "t"}))
    _failed(api(base, admin, "/api/runner-tokens/create",
                {"username": "bob", "client_id": "box", "name": "t"}), 409, "already exists")
    _failed(api(base, admin, "/api/runner-tokens/create",
                {"username": "bob", "client_id": "Box!", "name": "t"}), 400, "invalid request")


PROJECTS = [{"id": "code", "name": "Code", "description": "a repo", "vcs": "git"},
            {"id": "data", "name": "Data", "description": "", "vcs": "none"}]


def _enroll(base: str, admin: str) -> tuple[str, str]:
    """alice with a read PAT and a runner token for ``laptop``."""
    api(base, admin, "/api/users/create", {"username": "alice"})
    pat = api(base, admin, "/api/tokens/create",
              {"username": "alice", "name": "t", "scopes": ["read"]}).json()["token"]
    runner = api(base, admin, "/api/runner-tokens/create",
                 {"username": "alice", "client_id": "laptop", "name": "t"}).json()["token"]
    return pat, runner


def _runner_url(base: str) -> str:
    return "ws" + base.removeprefix("http") + "/api/runners/ws"


def test_get_runners_lists_known_runners_with_project_ids(server) -> None:
    base, admin, _ = server
    _, runner = _enroll(base, admin)
    with RunnerLink(_runner_url(base), runner, "laptop", "alice", PROJECTS):
        runners = _ok(api(base, admin, "/api/runners", method="GET"))["runners"]
        assert len(runners) == 1
        entry = runners[0]
        assert set(entry) == {"client_id", "owner", "online", "projects", "last_seen_at"}
        assert (entry["client_id"], entry["owner"], entry["online"]) == ("laptop", "alice", True)
        assert entry["projects"] == ["runner:laptop:code", "runner:laptop:data"]
        assert entry["last_seen_at"]
    entry = wait_until(lambda: [r for r in api(base, admin, "/api/runners", method="GET")
                                .json()["runners"] if not r["online"]],
                       what="the runner to show offline")[0]
    assert entry["projects"] == ["runner:laptop:code", "runner:laptop:data"]


def test_tools_call_runs_the_tool_with_the_callers_scopes(server) -> None:
    base, admin, _ = server
    pat, runner = _enroll(base, admin)
    with RunnerLink(_runner_url(base), runner, "laptop", "alice", PROJECTS):
        for token in (pat, admin):  # the admin token: a readiness check over every project
            reply = _ok(api(base, token, "/api/tools/call",
                            {"tool": "list_projects", "params": {}}))
            ids = sorted(p["id"] for p in reply["output"]["projects"])
            assert ids == ["runner:laptop:code", "runner:laptop:data"]
        defaulted = _ok(api(base, pat, "/api/tools/call", {"tool": "list_projects"}))
        assert defaulted["output"]["total_count"] == 2
    denied = api(base, pat, "/api/tools/call", {
        "tool": "run_script", "params": {"project": "runner:laptop:code", "session_id": "~s1",
                                         "language": "python", "script": "print(1)"}})
    assert denied.status_code == 200
    body = denied.json()
    assert body["success"] is False and body["output"]["error_kind"] == "insufficient_scope"
    assert body["error"] == "missing required scope: execute"


def test_the_admin_token_reaches_list_projects_only(server) -> None:
    base, admin, _ = server
    reply = api(base, admin, "/api/tools/call",
                {"tool": "read_files", "params": {"project": "~p1", "items": []}})
    assert reply.status_code == 200
    assert reply.json()["success"] is False
    assert reply.json()["output"]["error_kind"] == "insufficient_scope"


def test_unknown_api_paths_and_methods_answer_json(server) -> None:
    base, admin, _ = server
    _failed(api(base, admin, "/api/nothing", {}), 404, "not found")
    _failed(api(base, admin, "/api/users/create", method="GET"), 405, "method not allowed")


def _padded(size: int, username: str) -> bytes:
    """A valid JSON body of exactly ``size`` bytes (whitespace padding)."""
    head, tail = b'{"username": "' + username.encode() + b'"', b"}"
    return head + b" " * (size - len(head) - len(tail)) + tail


def test_bodies_up_to_8_mib_are_accepted_and_larger_ones_refused_413(server) -> None:
    base, admin, _ = server
    headers = {"Authorization": f"Bearer {admin}", "Content-Type": "application/json"}
    exact = httpx.post(base + "/api/users/create", content=_padded(8 * MIB, "edge"),
                       headers=headers)
    assert _ok(exact)["user"]["username"] == "edge"
    over = httpx.post(base + "/api/users/create", content=_padded(8 * MIB + 1, "over"),
                      headers=headers)
    _failed(over, 413, "request body too large")

    def streamed() -> Iterator[bytes]:  # chunked: no Content-Length to refuse up front
        body = _padded(8 * MIB + 1, "chunked")
        for start in range(0, len(body), MIB):
            yield body[start:start + MIB]

    chunked = httpx.post(base + "/api/users/create", content=streamed(), headers=headers)
    assert chunked.request.headers.get("transfer-encoding") == "chunked"
    _failed(chunked, 413, "request body too large")
    _failed(api(base, admin, "/api/users/create", {"username": "edge"}), 409, "already exists")
    for name in ("over", "chunked"):  # neither oversized request created its user
        _ok(api(base, admin, "/api/users/create", {"username": name}))


def test_the_body_limit_covers_mcp_too(server) -> None:
    base, _, _ = server
    reply = httpx.post(base + "/mcp", content=b" " * (8 * MIB + 1),
                       headers={"Content-Type": "application/json"})
    assert reply.status_code == 413
    assert reply.json()["error"]["message"] == "request body too large"


def test_an_oversized_declared_body_is_refused_before_it_is_sent(server) -> None:
    """The server answers 413 after the headers alone: it never waits for (or holds) the
    9 MiB the client announced."""
    base, admin, _ = server
    parts = urlsplit(base)
    with socket.create_connection((parts.hostname, parts.port), timeout=60) as conn:
        conn.sendall(
            b"POST /api/users/create HTTP/1.1\r\nHost: x\r\n"
            + f"Authorization: Bearer {admin}\r\n".encode()
            + f"Content-Type: application/json\r\nContent-Length: {9 * MIB}\r\n\r\n".encode()
            + b'{"username": "sneaky"')
        reply = b""
        while b"\r\n\r\n" not in reply or not reply.rstrip().endswith(b"}"):
            chunk = conn.recv(65536)
            if not chunk:
                break
            reply += chunk
    assert reply.startswith(b"HTTP/1.1 413 ")
    assert json.loads(reply.split(b"\r\n\r\n", 1)[1]) == {"success": False,
                                                          "error": "request body too large"}
    _ok(api(base, admin, "/api/users/create", {"username": "sneaky"}))

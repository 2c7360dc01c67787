"""End to end: the official MCP SDK -> ``POST /mcp`` of a real server (real store, router,
hub) -> the real ``mmo runner`` process -> project files, and back.

A read whose pages together exceed the 1 MiB response bound comes back cut, and
following its ``suggested_call`` exactly as given reads every file completely: no line
skipped, none repeated.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import httpx2 as httpx
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from support.runner_core import register_project, write_runner_config
from support.serve import admin_token, api, create_runner_token, create_user_and_pat, running_server
from support.waiting import wait_until

MMO = Path(sys.executable).with_name("mmo")
FILES = 5
LINES = 2000  # 2,000 lines of ~150 bytes: one page each (limit 2,000), ~300 KiB a file


@pytest.fixture(autouse=True)
def _env(mmo_env, mmo_process_guard):
    yield mmo_env


def _write_files(root: Path) -> dict[str, str]:
    root.mkdir(parents=True, exist_ok=True)
    texts = {}
    for f in range(FILES):
        text = "".join(f"file {f} line {n:05d} " + "x" * 130 + "\n" for n in range(LINES))
        (root / f"big{f}.txt").write_text(text, encoding="utf-8")
        texts[f"big{f}.txt"] = text
    return texts


async def _drive(url: str, pat: str) -> dict:
    http = httpx.AsyncClient(headers={"Authorization": f"Bearer {pat}"},
                             timeout=httpx.Timeout(120.0))
    seen: dict = {"calls": 0, "cut": 0, "read": {}, "sizes": []}
    async with http, Client(streamable_http_client(url + "/mcp", http_client=http),
                            mode="2026-07-28", cache=None) as client:
        projects = (await client.call_tool("list_projects", {})).structured_content
        seen["projects"] = projects
        project = projects["output"]["projects"][0]["project_ref"]
        started = (await client.call_tool("work_on_project", {
            "project": project, "instruction": "read the big files"})).structured_content
        session = started["output"]["session_id"]
        arguments = {"project": project, "session_id": session,
                     "items": [{"path": f"big{f}.txt", "limit": LINES} for f in range(FILES)]}
        while arguments is not None and seen["calls"] < 40:
            result = await client.call_tool("read_files", arguments)
            seen["calls"] += 1
            envelope = result.structured_content
            assert envelope["success"] is True, envelope
            output = envelope["output"]
            seen["sizes"].append(len(result.content[0].text))
            seen["cut"] += bool(output.get("output_truncated"))
            for item in output["items"]:
                page = item["output"]
                seen["read"].setdefault(item["path"], []).append(
                    (page["start_line"], page["end_line"], page["text"]))
            call = output.get("suggested_call")
            if call is not None:
                assert call["tool"] == "read_files"
                assert call["follow_up_kind"] == "mechanically_followable"
            arguments = call["arguments"] if call else None
        refused = await client.call_tool("call_project_tool", {
            "tool": "prepare_goal_workflow",
            "arguments": {"session_id": session, "title": "t", "objective": "o",
                          "completion_conditions": [], "steps": [{"id": "a", "title": "a"}],
                          "idempotency_key": "k"}})
        seen["refused"] = refused.structured_content
        try:
            await client.call_tool("get_goal", {"goal_id": "g"})
        except MCPError as exc:
            seen["direct_get_goal"] = (exc.error.code, exc.error.message)
    return seen


def test_a_read_over_the_response_bound_is_completed_by_following_suggested_calls(tmp_path):
    texts = _write_files(tmp_path / "projects" / "data")
    with running_server(tmp_path / "serve") as (base_url, app):
        admin = admin_token(tmp_path / "serve")
        pat = create_user_and_pat(base_url, admin, "alice", ["read", "write", "execute"])
        token = create_runner_token(base_url, admin, "alice", "laptop")
        config = write_runner_config(tmp_path / "runner", server_url=base_url, token=token,
                                     allowed_roots=[tmp_path / "projects"])
        register_project(config, "data", tmp_path / "projects" / "data")
        with open(tmp_path / "runner.log", "wb") as stderr:
            runner = subprocess.Popen([str(MMO), "runner", "--config", str(config)],
                                      stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                      stderr=stderr, env=dict(os.environ))
        try:
            wait_until(lambda: any(r["online"] for r in api(
                base_url, admin, "/api/runners", method="GET").json()["runners"]),
                timeout=60, what="the runner to link up")
            seen = asyncio.run(_drive(base_url, pat))
        finally:
            runner.terminate()
            runner.wait(timeout=60)

    assert seen["projects"]["output"]["projects"][0]["id"] == "runner:laptop:data"
    assert seen["cut"] >= 1 and seen["calls"] >= 2
    assert all(size <= 1024 * 1024 for size in seen["sizes"])
    for path, text in texts.items():
        pages = seen["read"][path]
        assert "".join(page for _, _, page in pages) == text, path
        assert [start for start, _, _ in pages][0] == 1
        for (_, end, _), (start, _, _) in zip(pages, pages[1:], strict=False):
            assert start == end + 1, path  # contiguous: nothing skipped or repeated
    assert seen["refused"]["output"]["error_kind"] == "insufficient_scope"
    assert seen["refused"]["error"] == "missing required scope: goals"
    assert seen["direct_get_goal"] == (-32602, "unknown tool")

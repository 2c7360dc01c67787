"""A root on the switchyard bridge gets tool pictures as images when its route preserves them."""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
PNG_PREFIX = "data:image/png;base64,"


def _declare_fixture_server(config_dir: Path) -> None:
    servers = config_dir / "tool-mcp.d"
    servers.mkdir()
    (servers / "fixture.toml").write_text(
        "schema_version = 1\n[tool_mcp_servers.fixture]\ntransport = \"stdio\"\n"
        f"command = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(str(FIXTURES / 'tool_mcp_server.py'))}]\n"
        "enabled_tools = [\"image\", \"document\"]\n")


def _dynamic_calls(events_path: str) -> list[dict]:
    rows = [json.loads(line)["message"] for line in Path(events_path).read_text().splitlines()]
    return [m["params"]["item"] for m in rows if m.get("method") == "item/completed"
            and m["params"]["item"]["type"] == "dynamicToolCall"]


def test_root_tool_images_and_resources_arrive_intact(mmo_env, mmo_standin, mmo_git_workspace):
    from mmo_kernel.gateway.process import stop_gateway
    from mmo_kernel.lifecycle.root_exec import run_root_exec

    _declare_fixture_server(mmo_env.config_dir)
    prompt = ("Show me the picture FAKE_DYNAMIC_TOOL_CALL mmo_mcp__fixture__image {}\n"
              "and the notes FAKE_DYNAMIC_TOOL_CALL mmo_mcp__fixture__document {}")
    try:
        out = run_root_exec(FIXTURES / "profiles" / "root-bridge-lab", mmo_git_workspace,
                            prompt, 60)
    finally:
        stop_gateway()
    assert out["status"] == "completed", out
    image, document = _dynamic_calls(out["events_path"])
    caption, picture = image["contentItems"]
    assert caption["text"] == "a tiny red dot" and picture["type"] == "inputImage"
    assert base64.b64decode(picture["imageUrl"][len(PNG_PREFIX):]).startswith(b"\x89PNG")
    notes, label, dot = document["contentItems"]
    assert notes["text"] == "[resource file:///notes/plan.md (text/markdown)]\n# Plan"
    assert label["text"] == "[resource file:///pictures/dot.png (image/png)]"
    assert dot["type"] == "inputImage" and dot["imageUrl"].startswith(PNG_PREFIX)

"""``FAKE_MCP_CALL``: the stand-in calls the MCP servers of its ``config.toml`` like real Codex.

A real third-party MCP server process (``tests/fixtures/tool_mcp_server.py``)
is started from ``CODEX_HOME/config.toml``; every message the stand-in emits
while doing so validates against the pinned real Codex protocol schema.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from mmo_kernel.hosts.codex_cli import project_codex

ROOT = Path(__file__).resolve().parents[3]
FIXTURE_SERVER = ROOT / "tests" / "fixtures" / "tool_mcp_server.py"


@pytest.fixture(scope="module")
def protocol_schema(tmp_path_factory) -> dict:
    codex = project_codex(ROOT)
    if codex is None:
        pytest.fail("the pinned real Codex CLI is not installed in .codex-cli/: run `make setup`")
    out = tmp_path_factory.mktemp("codex-schema")
    subprocess.run(
        [str(codex), "app-server", "generate-json-schema", "--experimental", "--out", str(out)],
        check=True, capture_output=True, timeout=60)
    return json.loads((out / "codex_app_server_protocol.schemas.json").read_text())


def _validator(bundle: dict, definition: str) -> jsonschema.Draft7Validator:
    where = "" if definition in bundle["definitions"] else "v2/"
    return jsonschema.Draft7Validator(
        {"$ref": f"#/definitions/{where}{definition}", "definitions": bundle["definitions"]})


def _write_config(home: Path, approval: str = "approve") -> None:
    (home / "config.toml").write_text(
        'approval_policy = "never"\n'
        "[mcp_servers.fixture]\n"
        f"command = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(str(FIXTURE_SERVER))}]\n"
        'env_vars = ["FORWARDED"]\n'
        'enabled_tools = ["echo", "add", "fail", "getenv", "crash"]\n'
        f'default_tools_approval_mode = "{approval}"\n'
        "[mcp_servers.fixture.env]\n"
        'FIXED = "from-config"\n', encoding="utf-8")


def _mcp_items(client, turn_id: str) -> list[dict]:
    return [m["params"]["item"] for m in client.received
            if m.get("method") == "item/completed" and m["params"]["turnId"] == turn_id
            and m["params"]["item"]["type"] == "mcpToolCall"]


CALLS = "\n".join([
    'FAKE_MCP_CALL fixture.add {"a": 2, "b": 3}',
    'FAKE_MCP_CALL fixture.echo {"text": "sum={{1.sum}}"}',
    'FAKE_MCP_CALL fixture.add {"a": "{{1.sum}}", "b": 10}',
    'FAKE_MCP_CALL fixture.getenv {"name": "FIXED"}',
    'FAKE_MCP_CALL fixture.getenv {"name": "FORWARDED"}',
    'FAKE_MCP_CALL fixture.getenv {"name": "NOT_FORWARDED"}',
    "FAKE_MCP_CALL fixture.fail {}",
    "FAKE_MCP_CALL fixture.hidden {}",
    "FAKE_MCP_CALL nowhere.echo {}",
    'FAKE_MCP_CALL fixture.echo {"text": "{{12.sum}}"}',
    'FAKE_MCP_CALL fixture.echo {"text": "{{1.missing}}"}',
    "FAKE_MCP_CALL fixture.crash {}",
])


def test_calls_run_in_order_with_config_env_and_earlier_results(
        spawn_standin, standin_home, protocol_schema, mmo_process_guard):
    _write_config(standin_home)
    client = spawn_standin(env={"FORWARDED": "forwarded-value", "NOT_FORWARDED": "secret"})
    client.initialize()
    thread = client.start_thread()
    turn = client.run_turn(thread, "delegate\n" + CALLS, timeout=30)
    items = _mcp_items(client, turn["id"])
    assert [(i["server"], i["tool"], i["status"]) for i in items] == [
        ("fixture", "add", "completed"), ("fixture", "echo", "completed"),
        ("fixture", "add", "completed"), ("fixture", "getenv", "completed"),
        ("fixture", "getenv", "completed"), ("fixture", "getenv", "completed"),
        ("fixture", "fail", "failed"), ("fixture", "hidden", "failed"),
        ("nowhere", "echo", "failed"), ("fixture", "echo", "failed"),
        ("fixture", "echo", "failed"), ("fixture", "crash", "failed")]
    texts = [i["result"]["content"][0]["text"] if i["result"] else None for i in items]
    assert items[0]["result"]["structuredContent"] == {"sum": 5}
    assert texts[1] == "sum=5" and items[1]["arguments"] == {"text": "sum=5"}
    assert items[2]["arguments"] == {"a": 5, "b": 10} and texts[2] == "15"
    assert texts[3:6] == ["from-config", "forwarded-value", "<unset>"]
    assert texts[6] == "the fixture tool failed on purpose" and items[6]["error"] is None
    assert "not enabled" in items[7]["error"]["message"] and items[7]["result"] is None
    assert "'nowhere' is not configured" in items[8]["error"]["message"]
    assert "there is no earlier call 12" in items[9]["error"]["message"]
    assert "no field 'missing'" in items[10]["error"]["message"]
    assert items[11]["result"] is None
    assert items[11]["error"]["message"].startswith("tool MCP server fixture: ")
    final = turn["items"][-1]
    assert final["type"] == "agentMessage" and final["text"].startswith("FAKE_CODEX_OK")
    assert "(mcp fixture.echo: completed: sum=5)" in final["text"]
    started = [m["params"]["item"] for m in client.received
               if m.get("method") == "item/started"
               and m["params"]["item"]["type"] == "mcpToolCall"]
    assert len(started) == 12 and {i["status"] for i in started} == {"inProgress"}
    notifications = _validator(protocol_schema, "ServerNotification")
    for message in client.received:
        if "method" in message and "id" not in message:
            problems = [e.message for e in notifications.iter_errors(message)]
            assert not problems, (message["method"], problems[:3])
    read = client.call("thread/read", {"threadId": thread, "includeTurns": True})
    persisted = [i for i in read["thread"]["turns"][-1]["items"] if i["type"] == "mcpToolCall"]
    assert persisted == items


def test_approval_policy_never_refuses_a_server_without_approve_mode(
        spawn_standin, standin_home, mmo_process_guard):
    _write_config(standin_home, approval="prompt")
    client = spawn_standin()
    client.initialize()
    thread = client.start_thread()
    turn = client.run_turn(thread, 'FAKE_MCP_CALL fixture.echo {"text": "hi"}', timeout=30)
    [item] = _mcp_items(client, turn["id"])
    assert item["status"] == "failed"
    assert item["error"] == {
        "message": "MCP tool call requires approval, but approval policy is never"}


def test_invalid_json_arguments_fail_the_call_without_reaching_the_server(
        spawn_standin, standin_home, tmp_path, mmo_process_guard):
    _write_config(standin_home)
    config = standin_home / "config.toml"
    log = tmp_path / "server.log"
    config.write_text(config.read_text().replace(
        f"args = [{json.dumps(str(FIXTURE_SERVER))}]",
        f"args = [{json.dumps(str(FIXTURE_SERVER))}, \"--log\", {json.dumps(str(log))}]"))
    client = spawn_standin()
    client.initialize()
    thread = client.start_thread()
    turn = client.run_turn(thread, "FAKE_MCP_CALL fixture.echo {not json}", timeout=30)
    [item] = _mcp_items(client, turn["id"])
    assert item["status"] == "failed" and item["arguments"] is None
    assert item["error"]["message"].startswith("arguments are not valid JSON")
    calls = [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []
    assert all(c.get("method") != "tools/call" for c in calls)

"""End to end: the real native Codex app-server talks to the scripted model through the gateway.

These tests fail (never skip) with install instructions when the pinned
Codex CLI is missing (``tests/support/real_codex.py``).
"""

from __future__ import annotations

import json
import math
import subprocess

import jsonschema
import pytest
from plugins.scripted.real_codex_harness import ScriptedCodex
from support.real_codex import codex_binary

pytestmark = pytest.mark.real_codex

SCHEMA = {
    "type": "object",
    "properties": {"verdict": {"type": "string", "enum": ["pass", "fail"]},
                   "notes": {"type": "array", "items": {"type": "string"}, "minItems": 1}},
    "required": ["verdict", "notes"],
    "additionalProperties": False,
}


def script(*lines: str) -> str:
    return "Run this.\n```mmo-script\n" + "\n".join(lines) + "\n```\n"


def test_codex_accepts_the_catalog_entry_under_strict_config(tmp_path):
    with ScriptedCodex(tmp_path) as agent:
        done = subprocess.run(
            [str(codex_binary()), "app-server", "--strict-config", "--print-startup-config"],
            env={"CODEX_HOME": str(agent.home), "PATH": "/usr/bin:/bin"},
            capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stdout + done.stderr
    assert '"appServerVersion":"0.169.0"' in done.stdout


def test_plain_turn_ends_in_a_final_message(tmp_path):
    with ScriptedCodex(tmp_path) as agent:
        result = agent.turn("Tell me about   this repo")
    assert result.status == "completed", result.error
    assert result.agent_text() == "local_scripted reply to: Tell me about this repo"
    usage = result.notifications("thread/tokenUsage/updated")[-1]["tokenUsage"]["last"]
    assert usage["inputTokens"] > 0
    assert usage["outputTokens"] == math.ceil(len(result.agent_text()) / 4)


def test_output_schema_turn_returns_valid_json(tmp_path):
    with ScriptedCodex(tmp_path) as agent:
        result = agent.turn("Review it", outputSchema=SCHEMA)
    assert result.status == "completed", result.error
    jsonschema.validate(json.loads(result.agent_text()), SCHEMA)


def test_shell_output_flows_into_the_next_step(tmp_path):
    with ScriptedCodex(tmp_path) as agent:
        result = agent.turn(script(
            "shell printf '{\"count\": 3}'",
            "shell echo \"got {{step1.count}}\" > seen.txt && cat seen.txt",
            "say {{last}}",
        ))
        seen = (agent.cwd / "seen.txt").read_text()
    assert result.status == "completed", result.error
    commands = result.items("commandExecution")
    assert [c["exitCode"] for c in commands] == [0, 0]
    assert seen == "got 3\n" and result.agent_text() == "got 3"


def test_write_uses_apply_patch_into_the_turn_cwd(tmp_path):
    with ScriptedCodex(tmp_path) as agent:
        result = agent.turn(script(
            "write pkg/hello.py <<EOF", "def hello():", "    return 'hi'", "EOF",
            "say wrote it",
        ))
        written = (agent.cwd / "pkg" / "hello.py").read_text()
    assert result.status == "completed", result.error
    (change,) = result.items("fileChange")
    assert change["status"] == "completed"
    assert change["changes"][0]["path"] == str(agent.cwd / "pkg" / "hello.py")
    assert written == "def hello():\n    return 'hi'\n"
    assert result.agent_text() == "wrote it"


def test_without_the_catalog_entry_write_falls_back_to_the_shell(tmp_path):
    with ScriptedCodex(tmp_path, catalog_model=False) as agent:
        result = agent.turn(script("write notes.txt <<EOF", "a note", "EOF"))
        written = (agent.cwd / "notes.txt").read_text()
    assert result.status == "completed", result.error
    assert result.items("fileChange") == [] and len(result.items("commandExecution")) == 1
    assert written == "a note\n"


def test_mcp_step_result_feeds_a_later_step(tmp_path):
    with ScriptedCodex(tmp_path, echo_mcp=True) as agent:
        result = agent.turn(script(
            "job: mcp echo.echo {\"text\": \"42\"}",
            "say job {{job.job_id}}",
        ))
    assert result.status == "completed", result.error
    (call,) = result.items("mcpToolCall")
    assert (call["server"], call["tool"], call["status"]) == ("echo", "echo", "completed")
    assert result.agent_text() == "job job-42"


def test_a_failing_step_stops_the_script_visibly(tmp_path):
    with ScriptedCodex(tmp_path) as agent:
        result = agent.turn(script("shell exit 4", "write never.txt <<EOF", "x", "EOF"))
        never = (agent.cwd / "never.txt").exists()
    assert result.status == "completed", result.error
    assert result.agent_text() == (
        "mmo-script stopped at step 1 (`shell exit 4`): command exited with code 4: "
    )
    assert not never


def test_goal_mode_completes_through_update_goal(tmp_path):
    with ScriptedCodex(tmp_path) as agent:
        result = agent.goal("Make the build green", token_budget=200_000)
    updates = result.notifications("thread/goal/updated")
    assert updates[-1]["goal"]["status"] == "complete"
    assert result.agent_text() == "local_scripted reply to: Make the build green"
    assert len(result.notifications("turn/started")) == 1


def test_a_goal_script_without_goal_complete_ends_its_goal_and_does_not_spin(tmp_path):
    with ScriptedCodex(tmp_path) as agent:
        result = agent.goal(script("shell echo step", "say done: {{step1}}"),
                            token_budget=200_000)
    updates = result.notifications("thread/goal/updated")
    assert updates[-1]["goal"]["status"] == "complete", [u["goal"]["status"] for u in updates]
    assert len(result.notifications("turn/started")) == 1
    assert result.agent_text() == "done: step"


def test_goal_objective_script_runs_then_completes(tmp_path):
    with ScriptedCodex(tmp_path) as agent:
        result = agent.goal(script("shell echo step > g.txt", "goal_complete", "say goal done"),
                            token_budget=200_000)
        made = (agent.cwd / "g.txt").read_text()
    assert made == "step\n"
    assert result.notifications("thread/goal/updated")[-1]["goal"]["status"] == "complete"
    assert result.agent_text() == "goal done"

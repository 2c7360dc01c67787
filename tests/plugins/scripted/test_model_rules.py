"""The scripted model's rules, driven over bodies shaped exactly like Codex's."""

from __future__ import annotations

import json
import math
import subprocess

import jsonschema
from mmo_scripted.model import decide
from mmo_scripted.reply import Message
from mmo_scripted.script import parse_script
from plugins.scripted.transcript import (
    Transcript,
    exec_output,
    mcp_json,
    mcp_texts,
    patch_ok,
    recorded_body,
    running_output,
    script,
    without_tools,
)

SCHEMA = {
    "type": "object",
    "properties": {"summary": {"type": "string"},
                   "files": {"type": "array", "items": {"type": "string"}},
                   "ok": {"type": "boolean"}},
    "required": ["summary", "files", "ok"],
    "additionalProperties": False,
}


def test_plain_request_gets_a_deterministic_summary_reply():
    body = recorded_body("plain_first")
    first, second = decide(body), decide(body)
    assert first == second
    assert first.output == [Message(text="local_scripted reply to: say hi")]


def test_usage_is_characters_over_four():
    body = recorded_body("plain_first")
    reply = decide(body)
    compact = json.dumps(body["input"], ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    chars = len(compact)
    assert reply.usage.input_tokens == math.ceil(chars / 4)
    assert reply.usage.output_tokens == math.ceil(len("local_scripted reply to: say hi") / 4)


def test_output_schema_without_script_gives_valid_json():
    t = Transcript("Summarize the repo", schema=SCHEMA)
    jsonschema.validate(json.loads(t.message()), SCHEMA)


def test_say_text_that_already_fits_the_schema_is_kept_verbatim():
    t = Transcript(script('say {"summary": "s", "files": ["a"], "ok": true}'), schema=SCHEMA)
    assert json.loads(t.message()) == {"summary": "s", "files": ["a"], "ok": True}


def test_a_root_script_runs_step_by_step_with_substitution():
    t = Transcript(script(
        "shell echo '{\"n\": 42}'",
        "write out/{{step1.n}}.txt <<EOF",
        "value={{last.n}}",
        "EOF",
        "spawn: mcp echo.echo {\"text\": \"{{step1.n}}\", \"ids\": \"{{step1}}\"}",
        "goal_complete",
        "say spawned {{spawn.job_id}} after {{step2}}",
    ))
    shell = t.call()
    assert shell.name == "exec_command" and shell.namespace is None
    assert json.loads(shell.arguments) == {"cmd": "echo '{\"n\": 42}'", "login": False,
                                           "yield_time_ms": 10000}
    t.answer(exec_output('{"n": 42}\n'))
    write = t.custom()
    assert write.name == "apply_patch"
    assert write.input == "*** Begin Patch\n*** Add File: out/42.txt\n+value=42\n*** End Patch\n"
    t.answer(patch_ok(["out/42.txt"]))
    mcp = t.call()
    assert (mcp.namespace, mcp.name) == ("mcp__echo", "echo")
    assert json.loads(mcp.arguments) == {"text": 42, "ids": '{"n": 42}'}
    t.answer(mcp_json({"job_id": "job-1"}))
    goal = t.call()
    assert (goal.name, json.loads(goal.arguments)) == ("update_goal", {"status": "complete"})
    t.answer('{"goal": {"status": "complete"}}')
    assert t.message() == "spawned job-1 after Success. Updated the following files:\nA out/42.txt"
    calls = ("function_call", "custom_tool_call")
    call_ids = [i["call_id"] for i in t.body["input"] if i["type"] in calls]
    assert call_ids == ["call_mmo_1", "call_mmo_2", "call_mmo_3", "call_mmo_4"]


def test_whole_placeholder_passes_a_list_to_an_mcp_tool():
    t = Transcript(script('mcp echo.echo {"text": "x"}', 'mcp echo.echo {"text": "{{last.ids}}"}'))
    t.call()
    t.answer(mcp_json({"ids": ["j1", "j2"]}))
    assert json.loads(t.call().arguments) == {"text": ["j1", "j2"]}


def test_write_without_apply_patch_is_a_shell_heredoc_that_writes_exactly(tmp_path):
    tools = without_tools(recorded_body("tool_round")["tools"], "apply_patch")
    content = "line one\nMMO_EOF\n  $HOME `not run`\n"
    lines = content.rstrip("\n").split("\n")
    t = Transcript(script("write dir/sub/f.txt <<X", *lines, "X"), tools=tools)
    command = json.loads(t.call().arguments)["cmd"]
    subprocess.run(["bash", "-c", command], cwd=tmp_path, check=True)
    assert (tmp_path / "dir/sub/f.txt").read_text() == content


def test_a_failing_command_stops_the_script_and_reports_the_step():
    t = Transcript(script("shell false", "say never"))
    t.call()
    t.answer(exec_output("boom\n", code=1))
    assert t.message() == (
        "mmo-script stopped at step 1 (`shell false`): command exited with code 1: boom"
    )
    t.user("<codex_internal_context source=\"goal\">Continue</codex_internal_context>")
    assert t.message().startswith("mmo-script stopped at step 1")


def test_try_lets_a_failure_through_and_its_output_is_usable():
    t = Transcript(script("try shell grep x missing", "say got: {{last}}"))
    t.call()
    t.answer(exec_output("grep: missing: No such file or directory\n", code=2))
    assert t.message() == "got: grep: missing: No such file or directory"


def test_mcp_tool_error_stops_with_the_head_of_the_error():
    t = Transcript(script("mcp echo.rpc {}", "say never"))
    t.body["tools"] = [{"type": "namespace", "name": "mcp__echo", "description": "",
                        "tools": [{"type": "function", "name": "rpc", "parameters": {}}]}]
    t.call()
    t.answer(mcp_texts("tool call error: tool call failed for `echo/rpc`\n\n"
                       "Caused by:\n    boom\n\nStack backtrace:\n   0: <unknown>"))
    text = t.message()
    assert text.startswith("mmo-script stopped at step 1 (`mcp echo.rpc {}`): tool call error:")
    assert "Caused by:" in text and "Stack backtrace" not in text


def test_a_tool_codex_did_not_offer_is_reported_not_called():
    t = Transcript(script('mcp mmo_mesh.agent_spawn {"agent": "coder"}'))
    assert t.message() == ("mmo-script stopped at step 1 (`mcp mmo_mesh.agent_spawn {\"agent\": "
                           "\"coder\"}`): Codex did not offer MCP server 'mmo_mesh' "
                           "(MCP servers offered: echo)")
    t2 = Transcript(script("mcp echo.nope {}"))
    assert t2.message().endswith("MCP server 'echo' has no tool 'nope' (tools: echo, fail)")
    patch = ("patch <<P", "*** Begin Patch", "*** Delete File: a", "*** End Patch", "P")
    t3 = Transcript(script(*patch),
                    tools=without_tools(recorded_body("tool_round")["tools"], "apply_patch"))
    assert "Codex did not offer the freeform tool 'apply_patch'" in t3.message()


def test_a_try_step_that_cannot_be_called_records_why_and_the_script_goes_on():
    t = Transcript(script('try mcp mmo_mesh.agent_status {"job_ids": []}',
                          "try shell echo {{step1.x}}", "shell echo still here",
                          "say {{step1}} | {{step2}} | {{step3}}"))
    call = t.call()  # steps 1 and 2 are skipped without a call; step 3 runs
    assert json.loads(call.arguments)["cmd"] == "echo still here"
    t.answer(exec_output("still here\n"))
    text = t.message()
    assert text == ("Codex did not offer MCP server 'mmo_mesh' (MCP servers offered: echo)"
                    " | the result of step1 is not JSON, so it has no .x | still here")
    t.user("again")  # replayed on the next request: the same steps count as done
    assert t.message() == text


def test_a_bad_placeholder_stops_before_calling():
    t = Transcript(script("shell echo hi", "shell echo {{step1.x}}"))
    t.call()
    t.answer(exec_output("hi\n"))
    assert t.message().endswith("the result of step1 is not JSON, so it has no .x")


def test_a_malformed_script_is_reported_in_the_final_message():
    t = Transcript(script("shell echo ok", "fly away"))
    assert t.message() == ("mmo-script error: line 2: unknown step 'fly'; expected one of: shell, "
                           "write, patch, mcp, tool, goal_complete, goal, say")


def test_a_long_command_is_polled_until_it_exits_and_its_chunks_are_joined():
    t = Transcript(script("shell sleep 40; echo done", "say {{step1}}"))
    t.call()
    t.answer(running_output(5438, "part1 "))
    poll = t.call()
    assert poll.name == "write_stdin"
    assert json.loads(poll.arguments) == {"session_id": 5438, "chars": "", "yield_time_ms": 30000}
    t.answer(running_output(5438, "part2 "))
    assert json.loads(t.call().arguments)["session_id"] == 5438
    t.answer(exec_output("done\n"))
    assert t.message() == "part1 part2 done"


def test_say_ends_the_turn_and_the_next_turn_continues_the_script():
    t = Transcript(script("say first turn", "shell echo second", "say second turn: {{last}}"))
    assert t.message() == "first turn"
    t.user("go on")
    t.call()
    t.answer(exec_output("second\n"))
    assert t.message() == "second turn: second"
    t.user("anything else?")
    assert t.message() == "second turn: second"


def test_a_finished_script_without_say_reports_its_step_count():
    t = Transcript(script("shell true"))
    t.call()
    t.answer(exec_output(""))
    assert t.message() == "mmo-script finished: 1 steps done."


def test_the_latest_script_wins_and_starts_from_its_own_anchor():
    t = Transcript(script("shell echo one", "say one"))
    t.call()
    t.answer(exec_output("one\n"))
    assert t.message() == "one"
    t.user(script("say two"))
    assert t.message() == "two"


def test_goal_objective_script_is_not_restarted_when_codex_resends_it():
    t = Transcript("")
    objective = script("shell echo g", "goal_complete", "say goal done")
    t.goal_objective(objective)
    t.call()
    t.answer(exec_output("g\n"))
    t.goal_objective(objective)  # the same objective again, after the calls
    goal = t.call()
    assert goal.name == "update_goal"


def test_goal_mode_without_script_completes_the_goal_then_answers():
    body = recorded_body("goal_round")
    body["input"] = body["input"][:5]  # the recorded prefix up to the goal continuation prompt
    t = Transcript("", base="goal_round")
    t.body["input"] = body["input"]
    goal = t.call()
    assert (goal.name, json.loads(goal.arguments)) == ("update_goal", {"status": "complete"})
    t.answer('{"goal": {"status": "complete"}}')
    assert t.message() == "local_scripted reply to: Make the thing work"


def test_an_unclosed_fence_only_matters_in_the_latest_message():
    t = Transcript("```mmo-script\nsay never closed\n")
    assert t.message() == (
        "mmo-script error: unclosed ```mmo-script block: add a line with only ```"
    )
    t.user(script("say fine now"))
    assert t.message() == "fine now"


CONTINUE_GOAL = ('<codex_internal_context source="goal">\nContinue working toward the active '
                 'thread goal.\n</codex_internal_context>')


def test_a_goal_script_that_ends_completes_the_goal_before_its_last_answer():
    t = Transcript(script("shell echo hi", "say done: {{step1}}"))
    t.goal_objective("Do the task")
    t.call()
    t.answer(exec_output("hi\n"))
    goal = t.call()
    assert (goal.name, json.loads(goal.arguments)) == ("update_goal", {"status": "complete"})
    t.answer('{"goal": {"status": "complete"}}')
    assert t.message() == "done: hi"
    t.user("The goal is complete. Now give only the final result.")
    assert t.message() == "done: hi", "the goal is completed once, never again"


def test_a_goal_continuation_after_the_script_finished_completes_the_goal():
    """The first answer came before Codex sent the objective; the continuation ends it."""
    t = Transcript(script("say done"))
    assert t.message() == "done"
    t.goal_objective("Do the task")
    t.user(CONTINUE_GOAL)
    goal = t.call()
    assert (goal.name, json.loads(goal.arguments)) == ("update_goal", {"status": "complete"})
    t.answer('{"goal": {"status": "complete"}}')
    assert t.message() == "done"


def test_a_goal_script_that_stops_reports_the_goal_blocked():
    t = Transcript(script("shell false", "say never"))
    t.goal_objective("Do the task")
    t.call()
    t.answer(exec_output("boom\n", code=1))
    goal = t.call()
    assert (goal.name, json.loads(goal.arguments)) == ("update_goal", {"status": "blocked"})
    t.answer('{"goal": {"status": "blocked"}}')
    assert t.message().startswith("mmo-script stopped at step 1 (`shell false`)")
    t.user(CONTINUE_GOAL)
    assert t.message().startswith("mmo-script stopped at step 1")


def test_a_script_that_completes_its_goal_itself_gets_no_second_update_goal():
    t = Transcript(script("goal_complete", "say done"))
    t.goal_objective("Do the task")
    assert json.loads(t.call().arguments) == {"status": "complete"}
    t.answer('{"goal": {"status": "complete"}}')
    assert t.message() == "done"


def test_goal_objective_without_update_goal_offered_just_answers():
    tools = without_tools(recorded_body("goal_round")["tools"], "update_goal")
    t = Transcript("", base="goal_round", tools=tools)
    t.body["input"] = recorded_body("goal_round")["input"][:5]
    assert t.message() == "local_scripted reply to: Make the thing work"



def test_a_tool_step_names_a_namespaced_tool_such_as_codex_sub_agents():
    """``tool <namespace>.<name>`` calls a namespaced Codex tool (Codex 0.169.0 offers its
    own sub-agent tools in ``multi_agent_v1``): how a smoke exercises a native agent."""
    steps = ('spawn: tool multi_agent_v1.spawn_agent {"agent_type": "scout", "message": "hi"}',
             'wait: tool multi_agent_v1.wait_agent {"targets": ["{{spawn.agent_id}}"]}',
             "say lead {{wait}}")
    t = Transcript(script(*steps))
    spawn = t.call()
    assert (spawn.namespace, spawn.name) == ("multi_agent_v1", "spawn_agent")
    assert json.loads(spawn.arguments) == {"agent_type": "scout", "message": "hi"}
    t.answer('{"agent_id":"a-1","nickname":"Scout"}')
    wait = t.call()
    assert (wait.namespace, json.loads(wait.arguments)) == ("multi_agent_v1", {"targets": ["a-1"]})
    t.answer('{"status":{"a-1":{"completed":"MARK"}},"timed_out":false}')
    assert t.message() == 'lead {"status":{"a-1":{"completed":"MARK"}},"timed_out":false}'
    missing = Transcript(script("tool multi_agent_v1.spawn_agent {}"),
                         tools=without_tools(recorded_body("tool_round")["tools"],
                                             "multi_agent_v1"))
    assert missing.message().endswith(
        "Codex did not offer the tool namespace 'multi_agent_v1' (namespaces offered: mcp__echo)")


def test_minimal_arguments_are_built_from_the_offered_tool_schema():
    """``minimal`` in place of JSON: the smallest arguments the offered tool's parameters
    accept, so a prompt (a smoke task) can call a tool whose schema it never saw."""
    t = Transcript(script("try mcp echo.echo minimal", "try mcp echo.fail minimal", "say done"))
    echo = t.call()
    assert (echo.namespace, json.loads(echo.arguments)) == ("mcp__echo", {"text": "minimal"})
    t.answer(mcp_texts("minimal"))
    assert json.loads(t.call().arguments) == {}
    steps = parse_script("mcp echo.echo minimal\ntool get_goal minimal")
    assert [(s.minimal_args, s.args) for s in steps] == [(True, {}), (True, {})]


def test_a_goal_script_stopped_before_a_call_keeps_its_reason_after_blocking_the_goal():
    t = Transcript(script("shell echo hi", 'shell echo {{step1.missing}}', "say never"))
    t.goal_objective("Do the task")
    t.call()
    t.answer(exec_output("hi\n"))
    goal = t.call()  # step 2 cannot resolve its placeholder, so the goal is blocked first
    assert (goal.name, json.loads(goal.arguments)) == ("update_goal", {"status": "blocked"})
    t.answer('{"goal": {"status": "blocked"}}')
    message = t.message()
    assert message.startswith("mmo-script stopped at step 2 (`shell echo {{step1.missing}}`)")
    assert message.endswith("the result of step1 is not JSON, so it has no .missing")

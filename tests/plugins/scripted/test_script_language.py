"""The mmo-script language: what a prompt author writes and the errors they get."""

from __future__ import annotations

import json

import pytest
from mmo_scripted.script import ScriptError, find_scripts, parse_script


def test_line_form_covers_every_verb_with_names_try_and_heredocs():
    steps = parse_script(
        "# a comment\n"
        "shell echo hi\n"
        "spawn: mcp mmo_mesh.agent_spawn {\"agent\": \"coder\", \"task\": \"t\"}\n"
        "write notes/a b.txt <<EOF\n  indented\n\nEOF\n"
        "patch <<P\n*** Begin Patch\n*** Delete File: x\n*** End Patch\nP\n"
        "try tool get_goal\n"
        "goal_complete\n"
        "goal blocked\n"
        "say <<S\nline one\nline two\nS\n"
    )
    kinds = [(s.number, s.kind, s.name, s.tolerant) for s in steps]
    assert kinds == [
        (1, "shell", None, False), (2, "mcp", "spawn", False), (3, "write", None, False),
        (4, "patch", None, False), (5, "tool", None, True), (6, "goal", None, False),
        (7, "goal", None, False), (8, "say", None, False),
    ]
    assert steps[1].server == "mmo_mesh" and steps[1].tool == "agent_spawn"
    assert steps[1].args == {"agent": "coder", "task": "t"}
    assert steps[2].path == "notes/a b.txt" and steps[2].text == "  indented\n"
    assert steps[3].text == "*** Begin Patch\n*** Delete File: x\n*** End Patch"
    assert steps[4].args == {}
    assert [steps[5].text, steps[6].text] == ["complete", "blocked"]
    assert steps[7].text == "line one\nline two"


def test_json_form_is_equivalent_to_the_line_form():
    body = json.dumps([
        {"shell": "echo hi"},
        {"name": "spawn", "mcp": "mmo_mesh.agent_spawn", "args": {"agent": "coder"}},
        {"write": "a.txt", "content": "x\ny"},
        {"try": True, "tool": "get_goal"},
        {"goal_complete": True},
        {"goal": "paused"},
        {"say": "done"},
    ])
    steps = parse_script(body)
    assert [s.kind for s in steps] == ["shell", "mcp", "write", "tool", "goal", "goal", "say"]
    assert steps[1].name == "spawn" and steps[1].args == {"agent": "coder"}
    assert steps[2].text == "x\ny" and steps[3].tolerant
    assert [steps[4].text, steps[5].text] == ["complete", "paused"]


@pytest.mark.parametrize(("body", "phrase"), [
    ("dance now", "line 1: unknown step 'dance'; expected one of: shell, write, patch, mcp"),
    ("mcp mmo_mesh {}", "mcp needs <server>.<tool>"),
    ("mcp s.t {bad", "arguments are not valid JSON"),
    ("tool get_goal [1]", "arguments must be a JSON object"),
    ("write a.txt", "write needs its content as a heredoc"),
    ("shell <<EOF\necho", "heredoc <<EOF is not closed"),
    ("shell", "missing a command"),
    ("goal done", "goal needs one of complete, blocked, paused"),
    ("goal_complete now", "goal_complete takes no argument"),
    ("last: shell true", "name 'last' is reserved"),
    ("a: shell true\na: shell false", "name 'a' is used twice"),
    ("# only a comment", "the script has no steps"),
    ('[{"shell": "a", "say": "b"}]', "step 1: exactly one of"),
    ('[{"shell": "a", "content": "b"}]', "content is only for write"),
    ('[{"shel": "a"}]', "step 1: shel: Extra inputs are not permitted"),
    ('[1, 2', "JSON script is not valid JSON"),
])
def test_malformed_scripts_name_the_problem(body, phrase):
    with pytest.raises(ScriptError) as info:
        parse_script(body)
    assert phrase in str(info.value)


def test_fences_must_stand_alone_so_a_nested_worker_script_stays_inside():
    worker = json.dumps({"task": "```mmo-script\nsay worker done\n```"})
    text = f"Root:\n```mmo-script\nmcp mmo_mesh.agent_spawn {worker}\nsay root done\n```\ntrailing"
    bodies = find_scripts(text)
    assert len(bodies) == 1
    steps = parse_script(bodies[0])
    assert steps[0].args == {"task": "```mmo-script\nsay worker done\n```"}
    assert find_scripts(steps[0].args["task"]) == ["say worker done"]


def test_heredoc_lines_are_verbatim_even_a_fence():
    text = "```mmo-script\nwrite README.md <<EOF\n```python\nx = 1\n```\nEOF\nsay ok\n```"
    steps = parse_script(find_scripts(text)[0])
    assert steps[0].text == "```python\nx = 1\n```"
    assert steps[1].kind == "say"


def test_unclosed_fence_is_reported():
    with pytest.raises(ScriptError, match="unclosed ```mmo-script block"):
        find_scripts("```mmo-script\nsay hi\n")

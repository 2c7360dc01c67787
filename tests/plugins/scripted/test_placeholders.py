"""``{{ref.path}}`` substitution between steps."""

from __future__ import annotations

import pytest
from mmo_scripted.placeholders import PlaceholderError, Results, substitute_json, substitute_text


@pytest.fixture
def results() -> Results:
    r = Results()
    r.add(1, "spawn", '{"job_id": "j-1", "ids": ["a", "b"], "n": 3}',
          {"job_id": "j-1", "ids": ["a", "b"], "n": 3})
    r.add(2, None, "plain words", "plain words")
    return r


def test_whole_string_placeholder_keeps_the_json_type(results):
    args = {"job_ids": "{{spawn.ids}}", "n": "{{step1.n}}", "note": "job {{spawn.job_id}}!"}
    assert substitute_json(args, results) == {"job_ids": ["a", "b"], "n": 3, "note": "job j-1!"}


def test_text_substitution_uses_last_and_indexes(results):
    assert substitute_text("{{last}} / {{step1.ids.1}} / {{ step1.ids }}", results) == (
        'plain words / b / ["a","b"]'
    )


@pytest.mark.parametrize(("text", "phrase"), [
    ("{{step7}}", "no result named 'step7' (known: last, spawn, step1, step2)"),
    ("{{spawn.missing}}", "spawn has no key 'missing' (keys: ids, job_id, n)"),
    ("{{spawn.ids.5}}", "spawn.ids has no index 5 (length 2)"),
    ("{{step2.x}}", "the result of step2 is not JSON, so it has no .x"),
    ("{{spawn.n.x}}", "spawn.n is int, so it has no .x"),
])
def test_unresolvable_placeholders_explain_why(results, text, phrase):
    with pytest.raises(PlaceholderError) as info:
        substitute_text(text, results)
    assert phrase in str(info.value)


def test_an_escaped_placeholder_loses_one_bang_and_is_never_looked_up(results):
    text = "say {{!step9.job_id}} after {{spawn.job_id}}, deeper {{!!last}}"
    assert substitute_text(text, results) == (
        "say {{step9.job_id}} after j-1, deeper {{!last}}")
    task = {"task": "{{!spawn.ids}}", "nested": ["{{ !step3 }}"]}
    assert substitute_json(task, results) == {"task": "{{spawn.ids}}", "nested": ["{{step3}}"]}

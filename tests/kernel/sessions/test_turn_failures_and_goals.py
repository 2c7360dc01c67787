"""Turn-failure classification and goal objective capping."""

from __future__ import annotations

import hashlib

import pytest

from mmo_kernel.hosts.goals import MAX_GOAL_OBJECTIVE_CHARS, cap_objective, goal_prompt
from mmo_kernel.hosts.turn_failures import normalize_turn_failure


def failed(message: str, info=None) -> dict:
    error = {"message": message}
    if info is not None:
        error["codexErrorInfo"] = info
    return {"id": "t1", "status": "failed", "error": error}


def test_turns_that_did_not_fail_have_no_failure():
    assert normalize_turn_failure({"status": "completed", "error": None}) is None
    assert normalize_turn_failure({"status": "interrupted"}) is None
    assert normalize_turn_failure(None) is None


def test_usage_limit_with_a_named_zone_gets_an_exact_retry_time():
    failure = normalize_turn_failure(failed(
        "You've hit your usage limit. Try again at 2026-08-22 05:24:28 UTC.", "usageLimitExceeded"))
    assert failure["kind"] == "provider_usage_limited" and failure["retryable"] is True
    assert failure["retry_at_raw"] == "2026-08-22 05:24:28 UTC"
    assert failure["retry_at"] == "2026-08-22T05:24:28+00:00"
    assert failure["retry_at_timezone"] == "UTC"


def test_zone_is_matched_case_insensitively_and_ambiguous_times_are_not_guessed():
    named = normalize_turn_failure(failed("usage limit; resets 2026-08-22 05:24:28 utc"))
    assert named["retry_at"] == "2026-08-22T05:24:28+00:00"
    assert named["retry_at_timezone"] == "utc"
    ambiguous = normalize_turn_failure(failed("usage limit; resets 2026-08-22 05:24:28"))
    assert ambiguous["retry_at_raw"] == "2026-08-22 05:24:28"
    assert "retry_at" not in ambiguous


@pytest.mark.parametrize("message, info, kind, retryable", [
    ("stream disconnected before completion",
     {"responseStreamDisconnected": {"httpStatusCode": 502}},
     "provider_transport", True),
    ("Internal server error", "internalServerError", "provider_transport", True),
    ("failed to parse function arguments: EOF", None, "malformed_tool_arguments", False),
    ("Provider rejected the request as invalid", "other", "turn_failed", False),
    ("too many requests", {"responseStreamDisconnected": {"httpStatusCode": 429}},
     "provider_usage_limited", True),
])
def test_failure_kinds(message, info, kind, retryable):
    failure = normalize_turn_failure(failed(message, info))
    assert (failure["kind"], failure["retryable"], failure["message"]) == (kind, retryable, message)


def test_short_objective_is_unchanged_and_long_one_is_capped_with_its_hash():
    assert cap_objective("fix the bug") == "fix the bug"
    exact = "x" * MAX_GOAL_OBJECTIVE_CHARS
    assert cap_objective(exact) == exact
    long = "y" * 10_000
    capped = cap_objective(long)
    assert len(capped) == MAX_GOAL_OBJECTIVE_CHARS
    assert capped.endswith(f"sha256={hashlib.sha256(long.encode()).hexdigest()}")
    assert capped.startswith("y" * 100)


def test_goal_prompt_tells_the_agent_how_a_goal_ends_and_keeps_the_full_prompt():
    text = goal_prompt("P" * 9000)
    assert "update_goal" in text and 'status="complete"' in text
    assert "final message alone does not" in text
    assert text.endswith("P" * 9000)


@pytest.mark.parametrize("message, info", [
    ('unexpected status 400 Bad Request: {"error":{"type":"invalid_request_error"}}', "other"),
    ("the body was refused", {"httpConnectionFailed": {"httpStatusCode": 400}}),
])
def test_a_bad_request_keeps_the_raw_text_and_gets_the_rejected_summary(message, info):
    failure = normalize_turn_failure(failed(message, info))
    assert (failure["kind"], failure["retryable"]) == ("turn_failed", False)
    assert failure["message"] == message
    assert failure["summary"] == "Provider rejected the request as invalid"

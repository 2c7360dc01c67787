"""Goal objectives and the goal harness prompt (spec 03 "Goal mode", spec 05)."""

from __future__ import annotations

import hashlib

MAX_GOAL_OBJECTIVE_CHARS = 4000

GOAL_HARNESS = (
    "You are working toward an active thread goal. When the goal is fully achieved, call the "
    "`update_goal` tool with status=\"complete\". A final message alone does not end an active "
    "goal: the goal stays active until you mark it complete.\n\n"
)


def cap_objective(text: str) -> str:
    """The goal objective: the text itself, or exactly 4,000 characters ending in its sha256.

    A longer text is cut so that the objective is exactly
    ``MAX_GOAL_OBJECTIVE_CHARS`` characters and ends with ``sha256=<hex>`` of the
    full text; the full text is always delivered as the turn input.
    """
    if len(text) <= MAX_GOAL_OBJECTIVE_CHARS:
        return text
    suffix = f" ... sha256={hashlib.sha256(text.encode()).hexdigest()}"
    return text[: MAX_GOAL_OBJECTIVE_CHARS - len(suffix)] + suffix


def goal_prompt(prompt: str) -> str:
    """The turn input of a goal-mode agent: the harness, then the full prompt."""
    return GOAL_HARNESS + prompt

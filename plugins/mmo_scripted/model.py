"""The scripted model: a pure function from a Responses request body to a reply.

Rules, in order (docs/scripted-model.md has the full contract):
1. the latest ```` ```mmo-script ```` block in a user/developer message or
   the goal objective is the active script; it is replayed and the next
   step is answered (in goal mode a script that has ended ends its goal);
2. without a script, in goal mode (``update_goal`` offered and a goal
   objective present) the goal is completed first;
3. then a final message: valid for the turn's ``outputSchema`` if any, else
   a short text quoting the request.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import ValidationError

from .conversation import Conversation, ResponsesRequest
from .final_text import final_message
from .reply import FunctionCall, ModelReply, OutputItem, make_reply
from .script import ScriptError, find_scripts, parse_script
from .script_run import UPDATE_GOAL, ScriptRun

SUMMARY_CHARS = 200
UNSCRIPTED_PREFIX = "local_scripted reply to:"


class BadRequest(ValueError):
    """The body is not a Responses request the model can read."""


def parse_request(body: Any) -> ResponsesRequest:
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    try:
        return ResponsesRequest.model_validate(body)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}" for e in exc.errors()
        )
        raise BadRequest(f"not a Responses request: {problems}") from None


def decide(body: Any) -> ModelReply:
    """The reply to one ``POST /responses`` body (raises ``BadRequest``)."""
    request = parse_request(body)
    conv = Conversation(request)
    return make_reply(request.input, [next_item(conv)])


def next_item(conv: Conversation) -> OutputItem:
    try:
        active = active_script(conv)
        if active is None:
            return _unscripted(conv)
        anchor, body = active
        steps = parse_script(body)
    except ScriptError as exc:
        return final_message(conv, f"mmo-script error: {exc}")
    return ScriptRun(conv, steps, anchor).next_item()


def active_script(conv: Conversation) -> tuple[int, str] | None:
    """(anchor index, body) of the script to run, or None.

    The latest block wins; its anchor is the *first* item that carries the
    same body, so a script repeated later (Codex re-sends the goal
    objective) is not started again. Only the latest item with a fence is
    parsed strictly: an unclosed fence in an old message is ignored.
    """
    found: list[tuple[int, str]] = []
    sources = conv.sources()
    latest_with_fence = max(
        (i for i, text in sources if "```mmo-script" in text), default=None
    )
    for index, text in sources:
        try:
            found.extend((index, body) for body in find_scripts(text))
        except ScriptError:
            if index == latest_with_fence:
                raise
    if not found:
        return None
    body = found[-1][1]
    anchor = min(index for index, b in found if b == body)
    return anchor, body


def _unscripted(conv: Conversation) -> OutputItem:
    goal = conv.goal_objective()
    if goal is not None and _goal_pending(conv, goal[0]):
        return FunctionCall(
            name=UPDATE_GOAL,
            arguments='{"status":"complete"}',
            call_id=f"call_mmo_{len(conv.calls) + 1}",
        )
    request = goal[1] if goal is not None else conv.last_user_request()
    return final_message(conv, f"{UNSCRIPTED_PREFIX} {summarize(request)}")


def _goal_pending(conv: Conversation, objective_index: int) -> bool:
    """Goal mode, and ``update_goal`` not yet called since the objective arrived."""
    if not conv.offered.has_function(UPDATE_GOAL):
        return False
    return not any(c.name == UPDATE_GOAL and c.index > objective_index for c in conv.calls)


def summarize(text: str) -> str:
    """Whitespace collapsed, cut at ``SUMMARY_CHARS`` with an ellipsis."""
    flat = re.sub(r"\s+", " ", text).strip()
    if len(flat) <= SUMMARY_CHARS:
        return flat or "(empty request)"
    return flat[: SUMMARY_CHARS - 1] + "…"

"""Thread goals (``thread/goal/*``) and their accounting at the end of each turn.

Real goal mode keeps an ``active`` goal alive by starting turns by itself.
The stand-in does the same but terminates deterministically: a turn that
runs while the goal is active "calls ``update_goal`` complete" when its
input mentions ``update_goal`` or when it is an automatic continuation
turn, so an active goal never loops; otherwise the budget check
(``tokensUsed >= tokenBudget`` → ``budgetLimited``) applies.
"""

from __future__ import annotations

import asyncio
from typing import Any

from mmo_codex_standin import markers, params
from mmo_codex_standin.connection import Connection
from mmo_codex_standin.protocol import RpcError, hard_exit, now_s

TERMINAL = {"complete", "budgetLimited", "usageLimited"}


def _goal_thread(server, raw: Any, model=params.ThreadIdParams):
    body = params.parse(model, raw)
    thread = server.loaded(body.threadId)
    if thread.ephemeral:
        raise RpcError("ephemeral thread does not support goals")
    return body, thread


async def set_goal(server, conn: Connection, raw: Any, after: list) -> dict[str, Any]:
    body, thread = _goal_thread(server, raw, params.GoalSetParams)
    existing = server.side.load_goal(thread.id)
    now = now_s()
    if body.objective is not None and (existing is None or existing["objective"] != body.objective):
        goal = {
            "threadId": thread.id,
            "objective": body.objective,
            "status": body.status or "active",
            "tokenBudget": body.tokenBudget,
            "tokensUsed": 0,
            "timeUsedSeconds": 0,
            "createdAt": now,
            "updatedAt": now,
        }
    elif existing is None:
        raise RpcError(f"cannot update goal for thread {thread.id}: no goal exists")
    else:
        goal = dict(existing, updatedAt=now)
        if body.status is not None and not (
            body.status == "paused" and existing["status"] == "budgetLimited"
        ):
            goal["status"] = body.status
        if "tokenBudget" in (raw or {}):
            goal["tokenBudget"] = body.tokenBudget
    server.side.save_goal(thread.id, goal)
    thread.goal_set.set()
    if markers.crashes_before_goal_reply(thread.first_input) and server.side.once(
        thread.id, markers.GOAL_SET_CRASH
    ):
        await _die_before_reply(thread)
    after.append(
        lambda: server.emit(
            thread, "thread/goal/updated", {"threadId": thread.id, "turnId": None, "goal": goal}
        )
    )
    if goal["status"] == "active" and thread.active is None:
        # the continuation turn starts after the response, as in real Codex
        after.append(lambda: server.start_goal_turn(thread))
    return {"goal": goal}


async def _die_before_reply(thread) -> None:
    """The goal is applied but never answered: the process dies once the running turn
    is persisted terminal (at once on an idle thread)."""
    if thread.active is None:
        hard_exit()
    thread.die_after_persist = True
    await asyncio.Event().wait()


async def get_goal(server, conn: Connection, raw: Any, after: list) -> dict[str, Any]:
    _, thread = _goal_thread(server, raw)
    return {"goal": server.side.load_goal(thread.id)}


async def clear_goal(server, conn: Connection, raw: Any, after: list) -> dict[str, Any]:
    _, thread = _goal_thread(server, raw)
    cleared = server.side.load_goal(thread.id) is not None
    server.side.save_goal(thread.id, None)
    if cleared:
        after.append(lambda: server.emit(thread, "thread/goal/cleared", {"threadId": thread.id}))
    return {"cleared": cleared}


def change_status(server, thread, status: str) -> dict[str, Any] | None:
    """Move an active goal to ``status`` mid-turn (markers, interrupts, usage limits)."""
    goal = server.side.load_goal(thread.id)
    if goal is None or goal["status"] != "active":
        return None
    goal.update(status=status, updatedAt=now_s())
    if status == "budgetLimited" and goal["tokenBudget"] is not None:
        goal["tokensUsed"] = max(goal["tokensUsed"], goal["tokenBudget"])
    server.side.save_goal(thread.id, goal)
    return goal


def account(server, thread, tokens: int, seconds: float, completes: bool) -> dict[str, Any] | None:
    """Charge a finished turn to an active goal; returns the goal if it changed."""
    goal = server.side.load_goal(thread.id)
    if goal is None or goal["status"] != "active":
        return None
    goal["tokensUsed"] += tokens
    goal["timeUsedSeconds"] += int(seconds)
    goal["updatedAt"] = now_s()
    if completes:
        goal["status"] = "complete"
    elif goal["tokenBudget"] is not None and goal["tokensUsed"] >= goal["tokenBudget"]:
        goal["status"] = "budgetLimited"
    server.side.save_goal(thread.id, goal)
    return goal

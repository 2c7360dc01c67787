"""One turn from ``turn/started`` to ``turn/completed``, markers applied in order."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from mmo_codex_standin import effects, goals, markers, shapes
from mmo_codex_standin.markers import Markers
from mmo_codex_standin.protocol import hard_exit, now_s, uuid7
from mmo_codex_standin.threads import ActiveTurn, ThreadState

GOAL_TURN_LATENCY = 0.1
"""Seconds an automatic goal turn "thinks" before answering, so a prompt sent
right after ``thread/goal/set`` joins it (as with real Codex's model latency)."""

USAGE_RESET = "2026-08-22 05:24:28"
USAGE_LIMIT_MESSAGE = (
    "You've hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro), "
    f"or try again at {USAGE_RESET}."
)
HOLD_POLL_SECONDS = 0.05
"""How often a ``FAKE_HOLD_UNTIL`` turn looks for its file."""
GOAL_EVENT_LEAD = 0.2
TOOL_CALL_TOKENS = 20
"""Output tokens of a model request that only asks for a tool call."""
"""Seconds between a ``*_BEFORE_TURN`` goal event and the end of its turn."""
GOAL_WAIT_SECONDS = 2.0
"""At most this long a turn told to call ``update_goal`` waits for the thread's goal."""
BAD_REQUEST_MESSAGE = (
    'unexpected status 400 Bad Request: {"error":{"message":"FAKE_PROVIDER_BAD_REQUEST: '
    'the provider '
    'rejected the request as invalid","type":"invalid_request_error"}}'
)


def _first_input(thread: ThreadState, record: dict[str, Any]) -> str:
    for turn in thread.turns:
        if turn is not record and turn.get("input_text"):
            return turn["input_text"]
    return ""


def _notify_terminal(server, thread: ThreadState, record: dict[str, Any], view: str) -> None:
    thread.active = None
    server.emit(thread, "thread/status/changed", {"threadId": thread.id, "status": thread.status()})
    server.emit(
        thread, "turn/completed", {"threadId": thread.id, "turn": shapes.turn(record, view=view)}
    )


def _close(
    thread: ThreadState, active: ActiveTurn, status: str, error: dict | None
) -> dict[str, Any]:
    record = active.record
    record.update(
        status=status,
        error=error,
        completedAt=now_s(),
        durationMs=int((time.monotonic() - active.started_monotonic) * 1000),
    )
    thread.persist(
        "event_msg",
        {
            "type": "task_complete",
            "turn_id": record["id"],
            "status": status,
            "error": error,
            "completed_at": record["completedAt"],
            "duration_ms": record["durationMs"],
        },
    )
    if thread.die_after_persist:
        hard_exit()
    return record


def _emit_goal(server, thread: ThreadState, turn_id: str, goal: dict | None) -> None:
    if goal is not None:
        server.emit(
            thread, "thread/goal/updated", {"threadId": thread.id, "turnId": turn_id, "goal": goal}
        )


def _interrupted(server, thread: ThreadState, active: ActiveTurn) -> None:
    record = _close(thread, active, "interrupted", None)
    _emit_goal(server, thread, record["id"], goals.change_status(server, thread, "paused"))
    _notify_terminal(server, thread, record, view="notLoaded")


def _failed(server, thread: ThreadState, active: ActiveTurn, message: str, info: Any) -> None:
    error = {"message": message, "codexErrorInfo": info, "additionalDetails": None}
    record = _close(thread, active, "failed", error)
    if info == "usageLimitExceeded":
        _emit_goal(
            server, thread, record["id"], goals.change_status(server, thread, "usageLimited")
        )
    thread.system_error = True
    thread.active = None
    server.emit(thread, "thread/status/changed", {"threadId": thread.id, "status": thread.status()})
    server.emit(
        thread,
        "error",
        {"threadId": thread.id, "turnId": record["id"], "willRetry": False, "error": error},
    )
    server.emit(
        thread,
        "turn/completed",
        {"threadId": thread.id, "turn": shapes.turn(record, view="notLoaded")},
    )


def _result_text(server, thread: ThreadState, record: dict, m: Markers, notes: list[str]) -> str:
    if m.has("FAKE_EMPTY_RESULT"):
        return ""
    found = markers.contract_schema_in(record["input_text"])
    if found is not None:
        thread.contract_schema = found
    schema = record.get("output_schema") or thread.contract_schema
    invalid = m.has("FAKE_INVALID_FIRST_RESULT") and server.side.once(
        thread.id, "FAKE_INVALID_FIRST_RESULT"
    )
    if schema is None:
        text = "FAKE_CODEX_INVALID_RESULT" if invalid else "FAKE_CODEX_OK"
        return " ".join([text] + notes)
    # imported here: jsonschema is only worth its start-up cost for schema-bound turns
    from mmo_kernel.contracts import (
        SchemaInstanceError,
        instance_for_schema,
        invalid_instance_for_schema,
    )

    try:
        value = invalid_instance_for_schema(schema) if invalid else instance_for_schema(schema)
    except SchemaInstanceError as exc:
        print(f"mmo-codex-standin: no result for the turn's schema: {exc}", file=sys.stderr)
        return "FAKE_CODEX_OK"
    return json.dumps(value)


async def _sleep(active: ActiveTurn, seconds: float) -> None:
    if seconds > 0 and not active.wake.is_set():
        try:
            await asyncio.wait_for(active.wake.wait(), timeout=seconds)
        except TimeoutError:
            pass


async def _hold(active: ActiveTurn, path: str | None) -> None:
    """``FAKE_HOLD_UNTIL``: work until ``path`` exists, so a test can hold a turn at a phase
    for as long as it needs (steer and interrupt cut it short, like a sleep)."""
    while path and not Path(path).exists() and not active.wake.is_set():
        try:
            await asyncio.wait_for(active.wake.wait(), timeout=HOLD_POLL_SECONDS)
        except TimeoutError:
            pass


async def _await_goal(server, thread: ThreadState, active: ActiveTurn) -> None:
    """A turn told to call ``update_goal`` does not finish before its thread has a goal.

    A goal client sends ``turn/start`` with the prompt, then ``thread/goal/set``; with
    real Codex the model is still working on the prompt when the goal arrives, so the
    turn runs under the goal and its ``update_goal`` completes it. The deterministic
    model answers at once, so it waits for the goal (steer and interrupt cut it short).
    """
    if server.side.load_goal(thread.id) is not None:
        return
    thread.goal_set.clear()
    waiters = [asyncio.ensure_future(thread.goal_set.wait()),
               asyncio.ensure_future(active.wake.wait())]
    _, pending = await asyncio.wait(
        waiters, timeout=GOAL_WAIT_SECONDS, return_when=asyncio.FIRST_COMPLETED
    )
    for waiter in pending:
        waiter.cancel()


async def _effects(server, thread: ThreadState, active: ActiveTurn, m: Markers) -> list[str]:
    notes: list[str] = []
    if m.has("FAKE_ORPHAN_CHILD"):
        effects.spawn_orphan(thread)
    effects.write_files(server, thread, active, m.writes)
    if m.has("FAKE_REQUEST_COMMAND_APPROVAL"):
        notes.append(f"(command {await effects.request_command_approval(server, thread, active)})")
    if m.has("FAKE_REQUEST_USER_INPUT"):
        notes.append(
            f"(operator answered: {await effects.request_user_input(server, thread, active)})"
        )
    if m.mcp_calls:
        notes.extend(await effects.mcp_tool_calls(server, thread, active, m.mcp_calls))
    for call in m.tool_calls:
        notes.append(
            f"(tool {call.name}: {await effects.dynamic_tool_call(server, thread, active, call)})"
        )
    return notes


async def run_turn(
    server, thread: ThreadState, active: ActiveTurn, entries: list[dict[str, Any]]
) -> None:
    try:
        await _run(server, thread, active, entries)
    except effects.TurnCancelled:
        _interrupted(server, thread, active)


async def _run(
    server, thread: ThreadState, active: ActiveTurn, entries: list[dict[str, Any]]
) -> None:
    record = active.record
    turn_id = record["id"]
    if (
        record["kind"] == "user"
        and markers.crashes_on_next_turn(
            _first_input(thread, record), markers.NEXT_TURN_CRASH_BEFORE_PERSIST
        )
        and server.side.once(thread.id, markers.NEXT_TURN_CRASH_BEFORE_PERSIST)
    ):
        hard_exit()  # answered turn/start, but nothing of this turn reached the rollout
    server.emit(thread, "thread/status/changed", {"threadId": thread.id, "status": thread.status()})
    server.emit(
        thread,
        "turn/started",
        {"threadId": thread.id, "turn": shapes.turn(record, view="notLoaded")},
    )
    thread.persist(
        "event_msg",
        {
            "type": "task_started",
            "turn_id": turn_id,
            "started_at": record["startedAt"],
            "input_text": record["input_text"],
            "output_schema": record["output_schema"],
        },
    )
    if record["kind"] == "user":
        item = shapes.user_message(uuid7(), entries)
        server.emit(thread, "item/started", shapes.item_started(thread.id, turn_id, item))
        effects.completed(server, thread, active, item)
    elif record["kind"] == "compact":
        item = {"type": "contextCompaction", "id": uuid7()}
        server.emit(thread, "item/started", shapes.item_started(thread.id, turn_id, item))
        effects.completed(server, thread, active, item)
    active.early.set()
    m = markers.parse(record["input_text"], _first_input(thread, record))
    if record["kind"] == "goal" and m.has("FAKE_GOAL_COMPLETE_EARLY"):
        # a model that calls update_goal at once and writes its last message after: the
        # goal is complete while Codex's own continuation turn still runs
        _emit_goal(server, thread, turn_id, goals.change_status(server, thread, "complete"))
        await _sleep(active, GOAL_EVENT_LEAD)
    elif record["kind"] == "goal":
        await _sleep(active, GOAL_TURN_LATENCY)
    goal_before = server.side.load_goal(thread.id)
    if record["kind"] == "compact":
        m = Markers()
    if m.has("FAKE_APP_SERVER_CRASH_ONCE") and server.side.once(
        thread.id, "FAKE_APP_SERVER_CRASH_ONCE"
    ):
        hard_exit()
    await _sleep(active, m.sleep_seconds)
    await _hold(active, m.hold_until)
    if record["kind"] == "user" and "update_goal" in record["input_text"]:
        await _await_goal(server, thread, active)
    if active.interrupted:
        raise effects.TurnCancelled()
    for flag, status in (
        ("FAKE_GOAL_COMPLETE_BEFORE_TURN", "complete"),
        ("FAKE_GOAL_BUDGET_LIMIT_BEFORE_TURN", "budgetLimited"),
    ):
        if m.has(flag):  # the goal changes first; the turn ends a moment later
            _emit_goal(server, thread, turn_id, goals.change_status(server, thread, status))
            await _sleep(active, GOAL_EVENT_LEAD)
    tool_requests = _account_tool_requests(server, thread, turn_id, record, m)
    notes = await _effects(server, thread, active, m)
    if m.has("FAKE_PROVIDER_USAGE_LIMIT") or (
        m.has("FAKE_PROVIDER_USAGE_LIMIT_ONCE")
        and server.side.once(thread.id, "FAKE_PROVIDER_USAGE_LIMIT_ONCE")
    ):
        return _failed(server, thread, active, USAGE_LIMIT_MESSAGE, "usageLimitExceeded")
    if m.has("FAKE_PROVIDER_BAD_REQUEST"):
        return _failed(server, thread, active, BAD_REQUEST_MESSAGE, "other")
    await _finish(server, thread, active, m, notes, goal_before, tool_requests)


def _account_tool_requests(server, thread: ThreadState, turn_id: str, record: dict[str, Any],
                           m: Markers) -> int:
    """A turn that calls tools makes one model request per call before its final answer,
    and real Codex reports each one (``last`` is that request only, ``total`` the
    thread's sum): a reader adding up ``last`` per turn undercounts. Returns the tokens."""
    spent = 0
    for _ in range(len(m.mcp_calls) + len(m.tool_calls)):
        request = shapes.usage_breakdown(100 + len(record["input_text"]), TOOL_CALL_TOKENS)
        thread.total_usage = shapes.add_usage(thread.total_usage, request)
        spent += request["totalTokens"]
        server.emit(thread, "thread/tokenUsage/updated", {
            "threadId": thread.id, "turnId": turn_id,
            "tokenUsage": shapes.token_usage(thread.total_usage, request)})
    return spent


async def _finish(
    server,
    thread: ThreadState,
    active: ActiveTurn,
    m: Markers,
    notes: list[str],
    goal_before: dict | None,
    tool_requests: int = 0,
) -> None:
    record = active.record
    turn_id = record["id"]
    text = "" if record["kind"] == "compact" else _result_text(server, thread, record, m, notes)
    message = shapes.agent_message(f"msg_{uuid7().replace('-', '')[-24:]}", text) if text else None
    input_tokens = 100 + len(record["input_text"])
    last = shapes.usage_breakdown(input_tokens, len(text) // 4)
    thread.total_usage = shapes.add_usage(thread.total_usage, last)
    completes = record["kind"] == "goal" or (
        "update_goal" in record["input_text"] and not m.has("FAKE_GOAL_COMPLETE_EARLY"))
    goal = goals.account(
        server,
        thread,
        tool_requests + last["totalTokens"],
        time.monotonic() - active.started_monotonic,
        completes,
    )
    finalization = (
        bool(record.get("output_schema"))
        and bool(goal_before)
        and goal_before is not None
        and goal_before["status"] == "complete"
    )
    # persist the terminal turn first: a crash from here on must read back as completed
    if message is not None:
        record["items"].append(message)
        thread.persist("event_msg", {"type": "item_completed", "turn_id": turn_id, "item": message})
    thread.persist(
        "event_msg", {"type": "token_count", "info": {"total": thread.total_usage, "last": last}}
    )
    _close(thread, active, "completed", None)
    if m.has("FAKE_APP_SERVER_CRASH_AFTER_PERSIST_ONCE") and server.side.once(
        thread.id, "FAKE_APP_SERVER_CRASH_AFTER_PERSIST_ONCE"
    ):
        hard_exit()
    if (
        finalization
        and m.has("FAKE_APP_SERVER_CRASH_DURING_FINALIZATION_ONCE")
        and server.side.once(thread.id, "FAKE_APP_SERVER_CRASH_DURING_FINALIZATION_ONCE")
    ):
        hard_exit()
    if message is not None:
        server.emit(
            thread, "item/started", shapes.item_started(thread.id, turn_id, dict(message, text=""))
        )
        for start in range(0, len(text), 64):
            server.emit(
                thread,
                "item/agentMessage/delta",
                {
                    "threadId": thread.id,
                    "turnId": turn_id,
                    "itemId": message["id"],
                    "delta": text[start : start + 64],
                },
            )
        server.emit(thread, "item/completed", shapes.item_completed(thread.id, turn_id, message))
    server.emit(
        thread,
        "thread/tokenUsage/updated",
        {
            "threadId": thread.id,
            "turnId": turn_id,
            "tokenUsage": shapes.token_usage(thread.total_usage, last),
        },
    )
    _emit_goal(server, thread, turn_id, goal)
    _notify_terminal(server, thread, record, view="summary")
    if goal is not None and goal["status"] == "active":
        server.start_goal_turn(thread)

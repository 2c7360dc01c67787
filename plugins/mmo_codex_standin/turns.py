"""``turn/*`` and ``thread/compact/start`` handlers: create, join, steer, interrupt."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from mmo_codex_standin import markers, params, runner, shapes
from mmo_codex_standin.connection import Connection
from mmo_codex_standin.protocol import INTERNAL_ERROR, RpcError, hard_exit, now_ms, now_s, uuid7
from mmo_codex_standin.threads import ActiveTurn, ThreadState


def _texts(inputs: list[params.UserInput]) -> tuple[list[dict[str, Any]], str]:
    entries = [i.model_dump(exclude_none=True) for i in inputs]
    text = "\n".join(i.text for i in inputs if i.type == "text" and i.text)
    return entries, text


def _pending_view(record: dict[str, Any]) -> dict[str, Any]:
    """The ``turn/start`` response: the turn as queued, before it started."""
    return dict(
        shapes.turn(record, view="notLoaded"),
        status="inProgress",
        startedAt=None,
        completedAt=None,
        durationMs=None,
    )


def _begin(thread: ThreadState, kind: str, text: str, schema: dict | None) -> ActiveTurn:
    record: dict[str, Any] = {
        "id": uuid7(),
        "status": "inProgress",
        "error": None,
        "items": [],
        "startedAt": now_s(),
        "completedAt": None,
        "durationMs": None,
        "input_text": text,
        "output_schema": schema,
        "kind": kind,
    }
    thread.turns.append(record)
    thread.active = ActiveTurn(record=record, started_monotonic=time.monotonic())
    return thread.active


def _launch(server, thread: ThreadState, active: ActiveTurn, entries: list[dict[str, Any]]) -> None:
    active.task = asyncio.get_running_loop().create_task(
        runner.run_turn(server, thread, active, entries)
    )


def add_user_input(server, thread: ThreadState, entries: list[dict[str, Any]], text: str) -> None:
    """Input that joins (turn/start) or steers the active turn: a userMessage item now."""
    active = thread.active
    if active is None:  # callers only deliver input while a turn runs
        raise RuntimeError(f"thread {thread.id} has no active turn to take the input")
    record = active.record
    item = shapes.user_message(uuid7(), entries)
    server.emit(thread, "item/started", shapes.item_started(thread.id, record["id"], item))
    record["items"].append(item)
    thread.persist("event_msg", {"type": "item_completed", "turn_id": record["id"], "item": item})
    server.emit(thread, "item/completed", shapes.item_completed(thread.id, record["id"], item))
    if text:
        active.extra_text.append(text)
        record["input_text"] = "\n".join(filter(None, [record["input_text"], text]))
        thread.persist(
            "event_msg",
            {"type": "user_input", "turn_id": record["id"], "input_text": record["input_text"]},
        )


async def turn_start(server, conn: Connection, raw: Any, after: list) -> dict[str, Any]:
    body = params.parse(params.TurnStartParams, raw)
    thread = server.loaded(body.threadId)
    if body.collaborationMode is not None and not conn.experimental:
        raise RpcError("turn/start.collaborationMode requires experimentalApi capability")
    server.subscribe(thread, conn)
    if body.cwd:
        thread.cwd = str((Path(thread.cwd) / body.cwd).resolve())
    thread.model = body.model or thread.model
    thread.approval_policy = body.approvalPolicy or thread.approval_policy
    thread.sandbox = body.sandboxPolicy or thread.sandbox
    entries, text = _texts(body.input)
    if thread.active is not None:  # real Codex: the input joins the running turn
        active = thread.active
        if body.outputSchema != active.record["output_schema"]:  # as Codex 0.169 refuses it
            raise RpcError("failed to submit turn input: ActiveTurnOutputSchemaMismatch",
                           INTERNAL_ERROR)
        after.append(lambda: add_user_input(server, thread, entries, text))
        return {"turn": _pending_view(active.record)}
    if markers.crashes_on_next_turn(
        thread.first_input, markers.NEXT_TURN_CRASH_BEFORE_REPLY
    ) and server.side.once(thread.id, markers.NEXT_TURN_CRASH_BEFORE_REPLY):
        hard_exit()  # the turn/start is never answered and the turn never exists
    active = _begin(thread, "user", text, body.outputSchema)
    thread.system_error = False
    if "FAKE_NOTIFY_BEFORE_RESPONSE" in text:
        _launch(server, thread, active, entries)
        await active.early.wait()
    else:
        after.append(lambda: _launch(server, thread, active, entries))
    return {"turn": _pending_view(active.record)}


def start_goal_turn(server, thread: ThreadState) -> None:
    """An automatic continuation turn for an active goal on an idle thread."""
    goal = server.side.load_goal(thread.id)
    if thread.active is not None or goal is None or goal["status"] != "active":
        return
    active = _begin(thread, "goal", goal["objective"], None)
    _launch(server, thread, active, [])


def _expect(thread: ThreadState, expected: str, verb: str, quote: bool) -> ActiveTurn:
    active = thread.active
    if active is None:
        raise RpcError(f"no active turn to {verb}")
    if active.record["id"] != expected:
        found = active.record["id"]
        if quote:
            raise RpcError(f"expected active turn id `{expected}` but found `{found}`")
        raise RpcError(f"expected active turn id {expected} but found {found}")
    return active


async def turn_steer(server, conn: Connection, raw: Any, after: list) -> dict[str, Any]:
    body = params.parse(params.TurnSteerParams, raw)
    thread = server.loaded(body.threadId)
    active = _expect(thread, body.expectedTurnId, "steer", quote=True)
    entries, text = _texts(body.input)
    active.steered = True

    def deliver() -> None:
        add_user_input(server, thread, entries, text)
        active.wake.set()

    after.append(deliver)
    return {"turnId": active.record["id"]}


async def turn_interrupt(server, conn: Connection, raw: Any, after: list) -> dict[str, Any]:
    body = params.parse(params.TurnInterruptParams, raw)
    thread = server.loaded(body.threadId)
    active = _expect(thread, body.turnId, "interrupt", quote=False)
    active.interrupted = True

    def deliver() -> None:
        active.stop.set()
        active.wake.set()

    after.append(deliver)
    return {}


async def compact_start(server, conn: Connection, raw: Any, after: list) -> dict[str, Any]:
    body = params.parse(params.ThreadIdParams, raw)
    thread = server.loaded(body.threadId)
    if thread.active is not None:
        raise RpcError(f"thread {thread.id} has an active turn; interrupt it before compacting")
    server.subscribe(thread, conn)
    active = _begin(thread, "compact", "", None)
    after.append(lambda: _launch(server, thread, active, []))
    return {}


__all__ = [
    "start_goal_turn",
    "turn_start",
    "turn_steer",
    "turn_interrupt",
    "compact_start",
    "now_ms",
]

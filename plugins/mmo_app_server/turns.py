"""Following turns through app-server notifications.

Notifications can race ahead of the ``turn/start`` response (the stand-in's
``FAKE_NOTIFY_BEFORE_RESPONSE``; goal mode even starts turns nobody asked
for), so the tracker buffers what it sees per turn id from the moment the
client starts, and a waiter picks the state up whenever it asks.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from .errors import TransportLost

TERMINAL_TURN_STATUSES = ("completed", "interrupted", "failed")


class TurnOutcome(BaseModel):
    """What a finished turn left behind, as the host needs it."""

    turn_id: str
    thread_id: str | None = None
    status: str
    turn: dict[str, Any]
    final_message: str | None = None
    token_usage: dict[str, Any] | None = None
    goal: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    errors: list[dict[str, Any]] = []

    def thread_usage(self) -> dict[str, int] | None:
        """The thread's token totals as MMO records them (``tokenUsage.total``; ``last``
        is only the final model request of the turn)."""
        total = (self.token_usage or {}).get("total")
        if not isinstance(total, dict):
            return None
        return {"input_tokens": int(total.get("inputTokens", 0)),
                "output_tokens": int(total.get("outputTokens", 0)),
                "total_tokens": int(total.get("totalTokens", 0))}


@dataclass
class _TurnState:
    thread_id: str | None = None
    deltas: dict[str, list[str]] = field(default_factory=dict)
    last_agent_message: str | None = None
    token_usage: dict[str, Any] | None = None
    goal: dict[str, Any] | None = None
    errors: list[dict[str, Any]] = field(default_factory=list)
    completed: dict[str, Any] | None = None


def _agent_text(item: Any) -> str | None:
    if isinstance(item, dict) and item.get("type") == "agentMessage":
        text = item.get("text")
        return text if isinstance(text, str) else None
    return None


class TurnTracker:
    """Per-turn buffers filled by the client's reader thread, read by waiters."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._turns: dict[str, _TurnState] = {}
        self._goals: dict[str, dict[str, Any] | None] = {}
        self._latest_turn: dict[str, str] = {}
        self._lost: TransportLost | None = None

    # -------------------------------------------------------- listening --

    def on_notification(self, message: dict[str, Any]) -> None:
        """Client notification listener: file the message under its turn."""
        method = message.get("method")
        params = message.get("params")
        if not isinstance(params, dict):
            return
        handler = _HANDLERS.get(str(method))
        if handler is None:
            return
        with self._cond:
            handler(self, params)
            self._cond.notify_all()

    def on_lost(self, error: TransportLost) -> None:
        """Client loss listener: wake every waiter with the transport error."""
        with self._cond:
            self._lost = error
            self._cond.notify_all()

    def _state(self, params: dict[str, Any], turn_id: Any = None) -> _TurnState | None:
        turn_id = turn_id if turn_id is not None else params.get("turnId")
        if not isinstance(turn_id, str) or not turn_id:
            return None
        state = self._turns.setdefault(turn_id, _TurnState())
        thread_id = params.get("threadId")
        if isinstance(thread_id, str):
            state.thread_id = thread_id
            self._latest_turn[thread_id] = turn_id
        return state

    def _turn_started(self, params: dict[str, Any]) -> None:
        turn = params.get("turn")
        self._state(params, turn.get("id") if isinstance(turn, dict) else None)

    def _delta(self, params: dict[str, Any]) -> None:
        state = self._state(params)
        if state is not None and isinstance(params.get("delta"), str):
            state.deltas.setdefault(str(params.get("itemId")), []).append(params["delta"])

    def _item_completed(self, params: dict[str, Any]) -> None:
        state = self._state(params)
        text = _agent_text(params.get("item"))
        if state is not None and text is not None:
            state.last_agent_message = text

    def _token_usage(self, params: dict[str, Any]) -> None:
        state = self._state(params)
        if state is not None and isinstance(params.get("tokenUsage"), dict):
            state.token_usage = params["tokenUsage"]

    def _goal_updated(self, params: dict[str, Any]) -> None:
        goal = params.get("goal")
        if isinstance(params.get("threadId"), str) and isinstance(goal, dict):
            self._goals[params["threadId"]] = goal
        state = self._state(params)
        if state is not None and isinstance(goal, dict):
            state.goal = goal

    def _goal_cleared(self, params: dict[str, Any]) -> None:
        if isinstance(params.get("threadId"), str):
            self._goals[params["threadId"]] = None

    def _error(self, params: dict[str, Any]) -> None:
        state = self._state(params)
        if state is not None and isinstance(params.get("error"), dict):
            state.errors.append({"willRetry": bool(params.get("willRetry")), **params["error"]})

    def _turn_completed(self, params: dict[str, Any]) -> None:
        turn = params.get("turn")
        if not isinstance(turn, dict):
            return
        state = self._state(params, turn.get("id"))
        if state is not None:
            state.completed = turn

    # ---------------------------------------------------------- reading --

    def goal(self, thread_id: str) -> dict[str, Any] | None:
        """The latest goal seen for ``thread_id`` (``None`` if none or cleared)."""
        with self._cond:
            return self._goals.get(thread_id)

    def latest_turn_id(self, thread_id: str) -> str | None:
        """The most recent turn seen on ``thread_id``, including ones goal mode started."""
        with self._cond:
            return self._latest_turn.get(thread_id)

    def wait_completed(self, turn_id: str, timeout: float) -> TurnOutcome:
        """Block until ``turn/completed`` for ``turn_id``; the buffer is then released."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                state = self._turns.get(turn_id)
                if state is not None and state.completed is not None:
                    del self._turns[turn_id]
                    return self._outcome(turn_id, state)
                if self._lost is not None:
                    raise self._lost
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"turn {turn_id} did not complete within {timeout:g} s")
                self._cond.wait(remaining)

    def _outcome(self, turn_id: str, state: _TurnState) -> TurnOutcome:
        turn = state.completed or {}
        goal = state.goal or (self._goals.get(state.thread_id) if state.thread_id else None)
        error = turn.get("error")
        return TurnOutcome(
            turn_id=turn_id, thread_id=state.thread_id, status=str(turn.get("status")),
            turn=turn, final_message=_final_message(state, turn), token_usage=state.token_usage,
            goal=goal, error=error if isinstance(error, dict) else None, errors=state.errors,
        )


def _final_message(state: _TurnState, turn: dict[str, Any]) -> str | None:
    """The last completed agent message; else the turn's items; else streamed deltas."""
    if state.last_agent_message is not None:
        return state.last_agent_message
    items = turn.get("items")
    for item in reversed(items if isinstance(items, list) else []):
        text = _agent_text(item)
        if text is not None:
            return text
    if state.deltas:
        return "".join(list(state.deltas.values())[-1])
    return None


_HANDLERS = {
    "turn/started": TurnTracker._turn_started,
    "item/agentMessage/delta": TurnTracker._delta,
    "item/completed": TurnTracker._item_completed,
    "thread/tokenUsage/updated": TurnTracker._token_usage,
    "thread/goal/updated": TurnTracker._goal_updated,
    "thread/goal/cleared": TurnTracker._goal_cleared,
    "error": TurnTracker._error,
    "turn/completed": TurnTracker._turn_completed,
}

__all__ = ["TERMINAL_TURN_STATUSES", "TurnOutcome", "TurnTracker"]

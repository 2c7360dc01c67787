"""The thread and turn calls a host makes, on top of one ``AppServerClient``.

Create the session right after spawning the client, before any turn: the
tracker must be listening when the first notifications arrive.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .client import DEFAULT_TIMEOUT, AppServerClient
from .errors import AppServerError
from .turns import TurnOutcome, TurnTracker

InputItems = str | Sequence[dict[str, Any]]
"""A prompt string (one text input) or Codex ``UserInput`` objects."""


def input_items(items: InputItems) -> list[dict[str, Any]]:
    """Normalize to ``UserInput[]``; a string becomes ``[{"type": "text", "text": ...}]``."""
    if isinstance(items, str):
        return [{"type": "text", "text": items, "text_elements": []}]
    checked = list(items)
    if not checked or not all(isinstance(i, dict) and isinstance(i.get("type"), str)
                              for i in checked):
        raise ValueError("turn input must be a string or a non-empty list of UserInput objects")
    return checked


def _thread_id(thread_id: str) -> str:
    if not isinstance(thread_id, str) or not thread_id:
        raise ValueError(f"thread id must be a non-empty string, got {thread_id!r}")
    return thread_id


class AppServerSession:
    """Thread/turn helpers and turn tracking for one app-server conversation."""

    def __init__(self, client: AppServerClient, request_timeout: float = DEFAULT_TIMEOUT) -> None:
        self.client = client
        self.request_timeout = request_timeout
        self.turns = TurnTracker()
        client.add_notification_listener(self.turns.on_notification)
        client.add_loss_listener(self.turns.on_lost)

    def _call(self, method: str, params: dict[str, Any]) -> Any:
        return self.client.request(method, params, self.request_timeout)

    # ---------------------------------------------------------- threads --

    def start_thread(self, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """``thread/start``; the result's ``thread.id`` is the thread to record at once."""
        return self._call("thread/start", dict(params or {}))

    def resume_thread(self, thread_id: str,
                      params: dict[str, Any] | None = None) -> dict[str, Any]:
        """``thread/resume`` of a persisted thread (``no rollout found`` if it never ran a turn)."""
        return self._call("thread/resume", {**(params or {}), "threadId": _thread_id(thread_id)})

    def read_thread(self, thread_id: str, include_turns: bool = True) -> dict[str, Any]:
        """``thread/read``; returns the ``thread`` object (with ``turns`` when asked).

        Real Codex refuses ``includeTurns`` for a thread that never ran a turn
        (no rollout yet: ``list_turns is not supported yet``); such a thread
        has no turns, so it is read without them and ``turns`` is ``[]``.
        """
        params = {"threadId": _thread_id(thread_id), "includeTurns": include_turns}
        try:
            return self._call("thread/read", params)["thread"]
        except AppServerError as exc:
            if not (include_turns and exc.code == -32601 and "list_turns" in exc.message):
                raise
        thread = self._call("thread/read", {**params, "includeTurns": False})["thread"]
        return {**thread, "turns": []}

    def compact(self, thread_id: str) -> dict[str, Any]:
        """``thread/compact/start``: Codex runs a compaction turn on the thread."""
        return self._call("thread/compact/start", {"threadId": _thread_id(thread_id)})

    # ------------------------------------------------------------ goals --

    def set_goal(self, thread_id: str, *, objective: str | None = None,
                 status: str | None = None, token_budget: int | None = None) -> dict[str, Any]:
        """``thread/goal/set``; returns the goal. Never leave an active goal without a budget."""
        params: dict[str, Any] = {"threadId": _thread_id(thread_id)}
        if objective is not None:
            params["objective"] = objective
        if status is not None:
            params["status"] = status
        if token_budget is not None:
            params["tokenBudget"] = token_budget
        return self._call("thread/goal/set", params)["goal"]

    def get_goal(self, thread_id: str) -> dict[str, Any] | None:
        return self._call("thread/goal/get", {"threadId": _thread_id(thread_id)}).get("goal")

    def clear_goal(self, thread_id: str) -> bool:
        return bool(self._call("thread/goal/clear", {"threadId": _thread_id(thread_id)})
                    .get("cleared"))

    # ------------------------------------------------------------ turns --

    def start_turn(self, thread_id: str, items: InputItems, **overrides: Any) -> dict[str, Any]:
        """``turn/start``; ``overrides`` are protocol fields (``model``, ``outputSchema``, ...).

        Returns the ``turn`` (``id``, ``status``). On a thread with an active
        turn Codex joins the input to it and returns that same turn.
        """
        params = {**overrides, "threadId": _thread_id(thread_id), "input": input_items(items)}
        return self._call("turn/start", params)["turn"]

    def steer(self, thread_id: str, expected_turn_id: str, items: InputItems) -> dict[str, Any]:
        """``turn/steer`` the active turn (Codex refuses a wrong or missing active turn)."""
        return self._call("turn/steer", {"threadId": _thread_id(thread_id),
                                         "expectedTurnId": expected_turn_id,
                                         "input": input_items(items)})

    def interrupt(self, thread_id: str, turn_id: str) -> dict[str, Any]:
        """``turn/interrupt``; the turn then completes with status ``interrupted``."""
        return self._call("turn/interrupt", {"threadId": _thread_id(thread_id), "turnId": turn_id})

    def wait_turn_completed(self, turn_id: str, timeout: float) -> TurnOutcome:
        """Wait for ``turn/completed``; raises ``TransportLost`` or ``TimeoutError``."""
        return self.turns.wait_completed(turn_id, timeout)

    def run_turn(self, thread_id: str, items: InputItems, timeout: float,
                 **overrides: Any) -> TurnOutcome:
        """Start a turn and wait for it."""
        turn = self.start_turn(thread_id, items, **overrides)
        return self.wait_turn_completed(turn["id"], timeout)


__all__ = ["AppServerSession", "InputItems", "input_items"]

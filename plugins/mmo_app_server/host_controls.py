"""Control revisions and typed responses shared by the root and job hosts (spec 03/04)."""

from __future__ import annotations

import threading
from typing import Any

from mmo_kernel.host_api import is_exact_int

APPROVAL_DECISIONS = ("accept", "acceptForSession", "decline", "cancel")
ELICITATION_ACTIONS = ("accept", "decline", "cancel")


class ControlState:
    """The host's control revision: every mutating control names it and moves it by one."""

    def __init__(self, revision: int = 0) -> None:
        self.revision = revision
        self._lock = threading.Lock()

    def consume(self, expected: Any) -> int:
        with self._lock:
            if not is_exact_int(expected):
                raise ValueError("expected_revision must be an integer")
            if expected != self.revision:
                raise RuntimeError(
                    f"stale control revision: expected_revision {expected} but the current "
                    f"revision is {self.revision}")
            self.revision += 1
            return self.revision


def check_response(method: str, response: Any) -> dict[str, Any]:
    """A pending request's answer must have the shape its method takes (``invalid fields``)."""
    if not isinstance(response, dict):
        raise RuntimeError("invalid fields: response must be an object")
    if method.endswith("requestApproval"):
        decision = response.get("decision")
        if set(response) != {"decision"} or not (
                decision in APPROVAL_DECISIONS or isinstance(decision, dict)):
            raise RuntimeError(
                f"invalid fields: an approval takes {{\"decision\": one of "
                f"{', '.join(APPROVAL_DECISIONS)}}}")
        return response
    if method == "item/tool/requestUserInput":
        answers = response.get("answers")
        if set(response) != {"answers"} or not isinstance(answers, dict):
            raise RuntimeError("invalid fields: user input takes {\"answers\": {...}}")
        return {"answers": {key: value if isinstance(value, dict) else {"answers": [str(value)]}
                            for key, value in answers.items()}}
    if method == "mcpServer/elicitation/request":
        if response.get("action") not in ELICITATION_ACTIONS:
            raise RuntimeError("invalid fields: an elicitation takes {\"action\": ...}")
        return response
    return response

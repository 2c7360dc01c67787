"""Answers the host gives to approval requests without asking anyone.

Under ``approval_policy = "never"`` nobody is there to approve, so the host
declines command, file-change and MCP elicitation requests itself and the
turn goes on (spec 04, "Pending requests and approvals"). Under any other
policy the request stays pending for an operator or a control ``respond``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

from .messages import ServerRequest

APPROVAL_POLICIES = ("untrusted", "on-failure", "on-request", "never")

COMMAND_APPROVAL = "item/commandExecution/requestApproval"
FILE_CHANGE_APPROVAL = "item/fileChange/requestApproval"
MCP_ELICITATION = "mcpServer/elicitation/request"

_DECLINES: dict[str, dict[str, Any]] = {
    COMMAND_APPROVAL: {"decision": "decline"},
    FILE_CHANGE_APPROVAL: {"decision": "decline"},
    MCP_ELICITATION: {"action": "decline"},
}


class ApprovalPolicy(BaseModel):
    """An agent's approval policy, and the automatic answers it implies."""

    model_config = ConfigDict(frozen=True)

    approval_policy: str = "never"

    @field_validator("approval_policy")
    @classmethod
    def _known(cls, value: str) -> str:
        if value not in APPROVAL_POLICIES:
            raise ValueError(f"approval_policy must be one of {', '.join(APPROVAL_POLICIES)}")
        return value

    def auto_reply(self, request: ServerRequest) -> dict[str, Any] | None:
        """The result to send at once, or ``None`` when a person must decide."""
        if self.approval_policy != "never":
            return None
        reply = _DECLINES.get(request.method)
        return dict(reply) if reply is not None else None


__all__ = [
    "APPROVAL_POLICIES",
    "COMMAND_APPROVAL",
    "FILE_CHANGE_APPROVAL",
    "MCP_ELICITATION",
    "ApprovalPolicy",
]

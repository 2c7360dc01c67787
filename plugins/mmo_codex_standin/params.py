"""pydantic models for request params: the boundary where bad input is refused."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from mmo_codex_standin.protocol import RpcError


class _Params(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class ClientInfo(_Params):
    name: str
    version: str
    title: str | None = None


class Capabilities(_Params):
    experimentalApi: bool = False
    optOutNotificationMethods: list[str] | None = None


class InitializeParams(_Params):
    clientInfo: ClientInfo
    capabilities: Capabilities | None = None


class ThreadOverrides(_Params):
    cwd: str | None = None
    model: str | None = None
    modelProvider: str | None = None
    approvalPolicy: Any = None
    sandbox: str | None = None
    config: dict[str, Any] | None = None


class ThreadStartParams(ThreadOverrides):
    ephemeral: bool | None = None
    dynamicTools: list[dict[str, Any]] | None = None


class ThreadResumeParams(ThreadOverrides):
    threadId: str
    excludeTurns: bool = False


class ThreadForkParams(ThreadOverrides):
    threadId: str
    lastTurnId: str | None = None
    ephemeral: bool = False
    excludeTurns: bool = False


class ThreadReadParams(_Params):
    threadId: str
    includeTurns: bool = False


class ThreadIdParams(_Params):
    threadId: str


class GoalSetParams(_Params):
    threadId: str
    objective: str | None = None
    status: (
        Literal["active", "paused", "blocked", "usageLimited", "budgetLimited", "complete"] | None
    ) = None
    tokenBudget: int | None = None


class UserInput(_Params):
    type: str
    text: str | None = None


class TurnStartParams(_Params):
    threadId: str
    input: list[UserInput]
    outputSchema: dict[str, Any] | None = None
    cwd: str | None = None
    model: str | None = None
    approvalPolicy: Any = None
    sandboxPolicy: dict[str, Any] | None = None
    collaborationMode: dict[str, Any] | None = None


class TurnSteerParams(_Params):
    threadId: str
    expectedTurnId: str
    input: list[UserInput]


class TurnInterruptParams(_Params):
    threadId: str
    turnId: str


def parse(model: type[_Params], params: Any) -> Any:
    """Validate ``params``; failures use real Codex's ``Invalid request: ...`` wording."""
    try:
        return model.model_validate(params if params is not None else {})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "params"
        if first["type"] == "missing":
            raise RpcError(f"Invalid request: missing field `{where}`") from None
        raise RpcError(f"Invalid request: invalid value for `{where}`: {first['msg']}") from None

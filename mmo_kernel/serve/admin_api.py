"""The admin HTTP API (spec 12, "Admin HTTP API"): users, tokens, runners, tool calls.

Every reply is JSON with ``success``; a failure adds ``error`` (the spec's phrase, exactly:
``invalid request``, ``unknown scope``, ``unauthorized``, ``forbidden``, ``unknown user``,
``already exists``) and, where it helps, ``detail`` (one line naming the field). Bodies are
JSON objects whose unknown fields are refused. No reply ever repeats a token except the
create calls that issue one.
"""

from __future__ import annotations

import json
import logging
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from mmo_kernel.serve.store import Principal, ServerStore, StoreError

log = logging.getLogger("mmo.serve")
AUTH_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="mmo"'}
M = TypeVar("M", bound="BaseModel")


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CreateUserBody(_Body):
    username: StrictStr


class CreateTokenBody(_Body):
    username: StrictStr
    name: StrictStr
    scopes: list[StrictStr]


class RevokeTokenBody(_Body):
    token_id: StrictStr


class CreateRunnerTokenBody(_Body):
    username: StrictStr
    client_id: StrictStr
    name: StrictStr


class ToolCallBody(_Body):
    tool: StrictStr
    params: dict[str, Any] = Field(default_factory=dict)


class ApiError(Exception):
    """An HTTP failure with the spec's phrase and an optional one-line detail."""

    def __init__(self, status: int, phrase: str, detail: str | None = None) -> None:
        super().__init__(detail or phrase)
        self.status, self.phrase, self.detail = status, phrase, detail


def failure(status: int, phrase: str, detail: str | None = None) -> JSONResponse:
    body: dict[str, Any] = {"success": False, "error": phrase}
    if detail and detail != phrase:
        body["detail"] = detail
    headers = AUTH_CHALLENGE if status == 401 else None
    return JSONResponse(body, status_code=status, headers=headers)


def bearer_token(request: Request) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, else None."""
    value = request.headers.get("authorization", "")
    scheme, _, token = value.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def _store(request: Request) -> ServerStore:
    return request.app.state.store


async def authenticate(request: Request, *, admin: bool) -> Principal:
    """The caller; 401 for a missing/bad/revoked token, 403 for a PAT without ``admin``
    on an admin route. (Store calls run in a worker thread: they may wait on the lock.)"""
    principal = await run_in_threadpool(_store(request).authenticate_bearer,
                                        bearer_token(request))
    if principal is None:
        raise ApiError(401, "unauthorized")
    if admin and not principal.may_administer:
        raise ApiError(403, "forbidden", "this token lacks the admin scope")
    return principal


def _field_error(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first.get("loc", ())) or "body"
    kind = first.get("type", "")
    if kind == "extra_forbidden":
        return f"unknown field {where!r}"
    if kind == "missing":
        return f"missing field {where!r}"
    return f"field {where!r}: {first.get('msg', 'invalid value')}"


async def parse_body(request: Request, model: type[M]) -> M:
    raw = await request.body()
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):  # or nested too deep
        raise ApiError(400, "invalid request", "the body is not JSON") from None
    if not isinstance(data, dict):
        raise ApiError(400, "invalid request", "the body must be a JSON object")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ApiError(400, "invalid request", _field_error(exc)) from None


def _guarded(handler):  # noqa: ANN001, ANN202 - decorator over starlette endpoints
    """Turn ``ApiError``/``StoreError`` into the spec's JSON failures."""

    async def endpoint(request: Request) -> JSONResponse:
        try:
            return await handler(request)
        except ApiError as exc:
            return failure(exc.status, exc.phrase, exc.detail)
        except StoreError as exc:
            return failure(exc.status, exc.phrase, str(exc))

    endpoint.__name__ = handler.__name__
    endpoint.__doc__ = handler.__doc__
    return endpoint


@_guarded
async def create_user(request: Request) -> JSONResponse:
    await authenticate(request, admin=True)
    body = await parse_body(request, CreateUserBody)
    user = await run_in_threadpool(_store(request).create_user, body.username)
    log.info("user created: %s", user["username"])
    return JSONResponse({"success": True, "user": user})


@_guarded
async def create_token(request: Request) -> JSONResponse:
    await authenticate(request, admin=True)
    body = await parse_body(request, CreateTokenBody)
    issued = await run_in_threadpool(_store(request).create_token, body.username, body.name,
                                    body.scopes)
    log.info("token %s created for %s", issued["token_id"], body.username)
    return JSONResponse({"success": True, **issued})


@_guarded
async def revoke_token(request: Request) -> JSONResponse:
    await authenticate(request, admin=True)
    body = await parse_body(request, RevokeTokenBody)
    await run_in_threadpool(_store(request).revoke_token, body.token_id)
    log.info("token %s revoked", body.token_id)
    return JSONResponse({"success": True})


@_guarded
async def create_runner_token(request: Request) -> JSONResponse:
    await authenticate(request, admin=True)
    body = await parse_body(request, CreateRunnerTokenBody)
    issued = await run_in_threadpool(_store(request).create_runner_token, body.username,
                                    body.client_id, body.name)
    log.info("runner token %s created for %s (%s)", issued["token_id"], body.username,
             body.client_id)
    return JSONResponse({"success": True, **issued})


def _project_ids(client_id: str, projects: list[Any]) -> list[str]:
    ids = []
    for project in projects:
        local = project.get("id") if isinstance(project, dict) else project
        if isinstance(local, str):
            ids.append(local if local.startswith("runner:") else f"runner:{client_id}:{local}")
    return ids


def runners_view(request: Request) -> list[dict[str, Any]]:
    """Every known runner: the hub's live view, else the registry of last hellos."""
    hub = getattr(request.app.state, "hub", None)
    if hub is not None:
        known = hub.known_runners()
    else:
        known = [dict(r, online=False) for r in _store(request).runner_registry().values()]
    return [{"client_id": r["client_id"], "owner": r.get("owner"), "online": bool(r.get("online")),
             "projects": _project_ids(r["client_id"], r.get("projects") or []),
             "last_seen_at": r.get("last_seen_at")} for r in known]


@_guarded
async def list_runners(request: Request) -> JSONResponse:
    await authenticate(request, admin=True)
    return JSONResponse({"success": True, "runners": runners_view(request)})


@_guarded
async def call_tool(request: Request) -> JSONResponse:
    """``/api/tools/call``: any PAT, or the admin token; the router applies the scopes (the
    admin token reaches ``list_projects`` only) and its envelope comes back with HTTP 200."""
    principal = await authenticate(request, admin=False)
    body = await parse_body(request, ToolCallBody)
    router = getattr(request.app.state, "router", None)
    if router is None:
        return failure(503, "tool router unavailable")
    try:
        envelope = await router.call(principal, body.tool, body.params)
    except Exception:  # noqa: BLE001 - the API boundary: one line out, the traceback logged
        log.exception("tool %s failed unexpectedly", body.tool[:100])
        return failure(500, "internal error")
    return JSONResponse(envelope)


def routes() -> list[Route]:
    return [
        Route("/api/users/create", create_user, methods=["POST"]),
        Route("/api/tokens/create", create_token, methods=["POST"]),
        Route("/api/tokens/revoke", revoke_token, methods=["POST"]),
        Route("/api/runner-tokens/create", create_runner_token, methods=["POST"]),
        Route("/api/runners", list_runners, methods=["GET"]),
        Route("/api/tools/call", call_tool, methods=["POST"]),
    ]

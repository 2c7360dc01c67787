"""Tool handlers: validate arguments, then call ``mmo_kernel.api`` with the caller's identity.

``mmo_kernel.api`` is imported inside each call, never at start-up, so the
server starts fast and a missing or broken API surfaces as that call's
``isError`` result rather than a dead server.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from pydantic import BaseModel, ValidationError

from mmo_kernel.hosts.control_actions import JOB_CONTROL_ACTIONS
from mmo_kernel.mesh import arguments as a
from mmo_kernel.mesh.identity import Caller
from mmo_kernel.mesh.redact import redact
from mmo_kernel.mesh.tools import TOOL_SPECS
from mmo_kernel.state.actor import acting_as
from mmo_kernel.state.audit import native_actor


class ToolArgumentError(ValueError):
    """Arguments fail the tool's schema: ``-32602``, data ``invalid tool arguments ...``."""


class UnknownTool(LookupError):
    """The tool does not exist or is not offered to this caller: ``-32602``, ``unknown tool``."""


def _api() -> Any:
    import mmo_kernel.api as api

    return api


def _who(c: Caller) -> dict[str, Any]:
    return {"session_id": c.session_id, "caller_agent": c.agent, "caller_job_id": c.job_id}


def _spawn(c: Caller, x: a.SpawnRequest) -> Any:
    return _api().spawn_request(x, **_who(c))


def _spawn_many(c: Caller, x: a.AgentsSpawnArgs) -> Any:
    return _api().spawn_jobs(x.agents, **_who(c))


def _status(c: Caller, x: a.StatusArgs) -> Any:
    api = _api()
    jobs = []
    for job_id in x.job_ids:
        record = api.load_job(job_id)
        if record.get("session_id") != c.session_id:
            raise FileNotFoundError(f"unknown job {job_id} in session {c.session_id}")
        jobs.append(api.public_job(record))
    return {"jobs": jobs}


def _wait(c: Caller, x: a.WaitArgs, cancelled: threading.Event | None = None) -> Any:
    timeout = min(x.timeout_seconds, a.MAX_WAIT_SECONDS)
    result = _api().wait_for_jobs(
        x.job_ids,
        session_id=c.session_id,
        timeout_seconds=timeout,
        include_results=x.include_results,
        after_revision=x.after_revision,
        cancelled=cancelled,
    )
    if timeout < x.timeout_seconds:
        result["timeout_seconds"] = timeout
        result["timeout_note"] = (
            f"timeout_seconds {x.timeout_seconds:g} is above the maximum of {timeout:.0f}; "
            f"waited at most {timeout:.0f} seconds. Call agents_wait again to keep waiting."
        )
    return result


def _result(c: Caller, x: a.ResultArgs) -> Any:
    return _api().read_result(x.job_id, cursor=x.cursor, max_chars=x.max_chars, **_who(c))


def _cancel(c: Caller, x: a.CancelArgs) -> Any:
    return _api().cancel_job(x.job_id, reason=x.reason, **_who(c))


def _disposition(function: str) -> Callable[[Caller, a.DispositionArgs], Any]:
    def handler(c: Caller, x: a.DispositionArgs) -> Any:
        return getattr(_api(), function)(x.job_id, reason=x.reason, **_who(c))

    return handler


def _inspect(c: Caller, x: a.InspectArgs) -> Any:
    return _api().inspect_job(x.job_id, **_who(c))


def _trace(c: Caller, x: a.TraceArgs) -> Any:
    return _api().read_trace(x.job_id, cursor=x.cursor, limit=x.limit, **_who(c))


def _trace_record(c: Caller, x: a.TraceRecordArgs) -> Any:
    return _api().read_agent_trace_record(
        x.agent_run_ref,
        record_cursor=x.record_cursor,
        cursor=x.cursor,
        max_chars=x.max_chars,
        **_who(c),
    )


def _control(action: str) -> Callable[[Caller, a.ControlArgs], Any]:
    def handler(c: Caller, x: a.ControlArgs) -> Any:
        fields = x.model_dump(exclude={"job_id", "expected_revision"})
        return _api().control_job(
            x.job_id, action, expected_revision=x.expected_revision, **_who(c), **fields
        )

    return handler


def _fork(c: Caller, x: a.ForkArgs) -> Any:
    return _api().fork_job(
        source_job_id=x.job_id,
        expected_revision=x.expected_revision,
        task_kind=x.task_kind,
        task=x.task,
        **_who(c),
    )


HANDLERS: dict[str, Callable[[Caller, Any], Any]] = {
    "agent_spawn": _spawn,
    "agents_spawn": _spawn_many,
    "agent_status": _status,
    "agents_wait": _wait,
    "agent_result": _result,
    "agent_cancel": _cancel,
    "agent_result_accept": _disposition("accept_result"),
    "agent_result_reject": _disposition("reject_result"),
    "agent_patch_integrate": _disposition("integrate_patch"),
    "agent_inspect": _inspect,
    "agent_trace": _trace,
    "agent_trace_record": _trace_record,
    **{
        f"agent_{action}": _control(action)
        for action in JOB_CONTROL_ACTIONS
    },
    "agent_fork": _fork,
}
CANCELLABLE = frozenset({"agents_wait"})
"""Tools that stop early when the client cancels the call (``notifications/cancelled``)."""


def _describe(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors(include_url=False, include_input=False):
        where = ".".join(str(p) for p in err["loc"]) or "(arguments)"
        parts.append(f"{where}: {err['msg']}")
    return "; ".join(parts)


def validate(name: str, arguments: Any, spawnable: tuple[str, ...]) -> BaseModel:
    """Parse ``arguments`` strictly; spawn targets must be among the caller's spawnable agents."""
    if not isinstance(arguments, Mapping):
        raise ToolArgumentError("invalid tool arguments: arguments must be an object")
    try:
        parsed = TOOL_SPECS[name].model.model_validate(dict(arguments))
    except ValidationError as exc:
        raise ToolArgumentError(f"invalid tool arguments for {name}: {_describe(exc)}") from None
    specs = [parsed] if isinstance(parsed, a.SpawnRequest) else getattr(parsed, "agents", [])
    for index, spec in enumerate(specs):
        if isinstance(spec, a.SpawnRequest) and spec.agent not in spawnable:
            where = "agent" if parsed is spec else f"agents.{index}.agent"
            raise ToolArgumentError(
                f"invalid tool arguments for {name}: {where}: must be one of "
                f"{', '.join(spawnable) or '(none)'} (got {spec.agent!r})"
            )
    return parsed


def call(
    caller: Caller,
    name: str,
    arguments: Any,
    offered: list[str],
    spawnable: tuple[str, ...],
    *,
    cancelled: threading.Event | None = None,
) -> dict[str, Any]:
    """Run one tool for a verified caller; returns the redacted result object.

    ``cancelled``, once set, ends a cancellable tool early (its result is then
    not sent); other tools run to completion.
    """
    if name not in offered:
        raise UnknownTool(f"unknown tool {name!r} for this caller")
    parsed = validate(name, arguments, spawnable)
    handler = HANDLERS[name]
    if name in CANCELLABLE:
        handler = partial(handler, cancelled=cancelled)
    # audit events say the mesh acted, for the verified caller (a native one by its own id)
    with native_actor(caller.native_agent), acting_as("mesh", caller.native_agent or caller.agent):
        result = redact(handler(caller, parsed))
    return result if isinstance(result, dict) else {"result": result}

"""Team tools (spec 12 "Delegating to MMO worker teams"): the external lead in the root seat.

Every call goes through ``mmo_kernel.api`` as the session's root agent (no caller job),
so admission, write-scope leases, worktrees, review and transactional integration
apply exactly as for a root Codex agent; every audit event appended meanwhile names
the external lead (``external_lead``). The session's homes and the gateway are
materialized at the first ``team_spawn``. Job records go out through ``public_job``
with supervisor internals removed and no absolute path of this machine.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from filelock import UnixFileLock

from mmo_kernel.project_tools.envelope import ToolFailure
from mmo_kernel.runner.context import CallContext
from mmo_kernel.runner.sessions import require_session

LOG = logging.getLogger("mmo.runner")
KEYS_FILE = "external-team-keys.json"
MAX_WAIT_SECONDS = 60.0
DEADLINE_MARGIN_SECONDS = 3.0
"""A wait ends this long before the server's call deadline, so its reply arrives in time."""
HIDDEN_JOB_KEYS = frozenset({"cwd", "write_scope_resolved", "attachments", "runner_pid",
                             "runner_pgid", "runner_start_token", "app_server_pid",
                             "app_server_pgid", "app_server_start_token", "app_server_thread_id",
                             "snapshot_hash"})
"""Beyond ``mesh.redact``'s supervisor keys: host identities and absolute paths."""


# ------------------------------------------------------------------ helpers --

def _api() -> Any:
    import mmo_kernel.api as api

    return api


def _secret_roots(ctx: CallContext, record: dict[str, Any]) -> list[tuple[str, str]]:
    """Absolute prefixes of this machine and what replaces them in outputs."""
    from mmo_kernel.state.paths import config_dir, state_dir

    pairs = [(str(Path(record["cwd"])), ".")]
    pairs += [(str(p.root), ".") for p in ctx.projects.values()]
    pairs += [(str(state_dir()), "<path>"), (str(config_dir()), "<path>"),
              (str(Path.home()), "<path>")]
    seen: dict[str, str] = {}
    for prefix, replacement in pairs:
        if prefix and prefix != "/" and prefix not in seen:
            seen[prefix] = replacement
    return sorted(seen.items(), key=lambda kv: -len(kv[0]))


def _scrub_text(text: str, roots: list[tuple[str, str]]) -> str:
    for prefix, replacement in roots:
        if prefix in text:
            text = text.replace(prefix + "/", "" if replacement == "." else replacement + "/")
            text = text.replace(prefix, replacement)
    return text


def scrub(value: Any, roots: list[tuple[str, str]]) -> Any:
    """``value`` without supervisor keys (``mesh.redact``), host identities, or any
    absolute path of this machine (project paths become project-relative)."""
    from mmo_kernel.mesh.redact import redact

    def walk(item: Any) -> Any:
        if isinstance(item, dict):
            return {k: walk(v) for k, v in item.items() if k not in HIDDEN_JOB_KEYS}
        if isinstance(item, list):
            return [walk(v) for v in item]
        if isinstance(item, str):
            return _scrub_text(item, roots)
        return item

    return walk(redact(value))


def _message(exc: BaseException, roots: list[tuple[str, str]]) -> str:
    return _scrub_text(" ".join(str(exc).split()) or type(exc).__name__, roots)


def _failure(exc: Exception, roots: list[tuple[str, str]], *, spawning: bool) -> ToolFailure:
    """Map an API exception to the spec's error kinds (spec 12)."""
    from mmo_kernel.errors import AdmissionError

    text = _message(exc, roots)
    if isinstance(exc, AdmissionError):
        return ToolFailure("admission_refused", text, reason=exc.reason)
    if isinstance(exc, PermissionError):
        return ToolFailure("permission_denied", text)
    if isinstance(exc, (FileNotFoundError, LookupError)):
        return ToolFailure("job_not_found", text)
    if isinstance(exc, ValueError):
        return ToolFailure("invalid_arguments", text)
    if spawning:  # a tainted or ending session, a host that could not start ...
        return ToolFailure("admission_refused", text, reason="session_state")
    # the call does not fit the job's state (no result yet, not accepted, ...); what an
    # interrupted integration left behind is reported by the API itself
    changed: Any = "unknown" if type(exc).__module__.endswith("integration") else False
    return ToolFailure("invalid_arguments", text, state_changed=changed)


@contextmanager
def _as_lead(ctx: CallContext, record: dict[str, Any], *,
             spawning: bool = False) -> Iterator[list[tuple[str, str]]]:
    """Run API calls as the external lead; API errors become ``ToolFailure``.

    The team tools are the mesh offered to an external lead, so its audit events say
    ``actor`` ``mesh`` with the lead's name (and ``external_lead``, as before).
    """
    from mmo_kernel.state.actor import acting_as
    from mmo_kernel.state.audit import external_lead

    roots = _secret_roots(ctx, record)
    lead = record.get("external_lead") or ctx.user or "external"
    try:
        with external_lead(lead), acting_as("mesh", lead):
            yield roots
    except ToolFailure:
        raise
    except (RuntimeError, ValueError, LookupError, PermissionError, OSError) as exc:
        raise _failure(exc, roots, spawning=spawning) from None


def _who(record: dict[str, Any]) -> dict[str, Any]:
    return {"session_id": record["session_id"], "caller_agent": record["root_agent"],
            "caller_job_id": None}


def _profile(record: dict[str, Any]) -> Any:
    from mmo_kernel.profiles.snapshots import snapshot_profile

    try:
        return snapshot_profile(record["snapshot_hash"])
    except (OSError, ValueError, RuntimeError) as exc:
        LOG.error("session %s: its team profile cannot be read: %s", record["session_id"], exc)
        raise ToolFailure("team_unavailable", "the session's team profile cannot be read "
                          "(see the runner log)") from None


def _spawnable(record: dict[str, Any]) -> tuple[Any, list[str]]:
    profile = _profile(record)
    allowed = list(profile.agents[profile.root_agent].can_spawn)
    if not allowed:
        raise ToolFailure("team_unavailable",
                          f"team profile {profile.id!r} has no agents the lead may spawn")
    return profile, allowed


def _job_of_session(record: dict[str, Any], job_id: str) -> dict[str, Any]:
    api = _api()
    try:
        job = api.load_job(job_id)
    except (FileNotFoundError, ValueError):
        raise ToolFailure("job_not_found", f"no job {job_id} in this session") from None
    if job.get("session_id") != record["session_id"]:
        raise ToolFailure("job_not_found", f"no job {job_id} in this session")
    return job


def _public(job: dict[str, Any], roots: list[tuple[str, str]]) -> dict[str, Any]:
    return scrub(_api().public_job(job), roots)


# -------------------------------------------------------------------- tools --

def team_agents(arguments: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    record = require_session(ctx, arguments.get("session_id"))
    profile, allowed = _spawnable(record)
    agents = []
    for name in allowed:
        spec = profile.agents[name]
        agents.append({"agent": name, "model": spec.model, "route": spec.route,
                       "permissions": spec.permissions, "reasoning": spec.reasoning,
                       "execution_mode": spec.execution_mode, "trust": spec.trust,
                       "write_scope_required": spec.write_scope_required,
                       "max_active": spec.max_active,
                       "output_contract": spec.output_contract is not None})
    coordination = profile.coordination
    return {"profile_id": profile.id, "root_agent": profile.root_agent, "agents": agents,
            "max_active_agents": coordination.max_active_agents,
            "max_active_writers": coordination.max_active_writers}


def _keys_path(session_id: str) -> Path:
    from mmo_kernel.sessions.records import session_file

    return session_file(session_id, KEYS_FILE)


def _read_keys(session_id: str) -> dict[str, Any]:
    try:
        data = json.loads(_keys_path(session_id).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise ToolFailure("team_unavailable", "the session's team idempotency record is "
                          f"unreadable: {type(exc).__name__}") from None
    return data if isinstance(data, dict) else {}


def _payload_digest(agents: list[dict[str, Any]]) -> str:
    text = json.dumps(agents, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


@contextmanager
def _keys_lock(session_id: str) -> Iterator[None]:
    path = _keys_path(session_id).with_name(".external-team-keys.lock")
    with UnixFileLock(str(path), timeout=60):
        yield


def _materialize(record: dict[str, Any]) -> dict[str, Any]:
    from mmo_kernel.sessions.create import materialize_external

    try:
        return materialize_external(record["session_id"])
    except (OSError, RuntimeError, ValueError) as exc:
        LOG.error("session %s: cannot prepare its team (homes, gateway, Codex): %s",
                  record["session_id"], exc)
        raise ToolFailure("team_unavailable", "the runner cannot start worker agents for this "
                          f"session: {type(exc).__name__} (see the runner log)") from None


def _requests(agents: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for item in agents:
        request = {"agent": item["agent"], "task": item["task"]}
        for key in ("task_kind", "mode", "write_scopes"):
            if item.get(key) is not None:
                request[key] = item[key]
        out.append(request)
    return out


def team_spawn(arguments: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    """``spawn_jobs`` (atomic); the same ``idempotency_key`` returns the same job ids."""
    record = require_session(ctx, arguments.get("session_id"))
    agents = arguments.get("agents")
    key = arguments.get("idempotency_key")
    if not isinstance(agents, list) or not agents or not isinstance(key, str) or not key:
        raise ToolFailure("invalid_arguments", "agents and idempotency_key are required")
    requests = _requests(agents)
    digest = _payload_digest(requests)
    sid = record["session_id"]
    _, allowed = _spawnable(record)
    with _keys_lock(sid):
        keys = _read_keys(sid)
        if key in keys:
            return _replay(ctx, record, key, keys[key], digest)
        for index, request in enumerate(requests):
            if request["agent"] not in allowed:
                raise ToolFailure("permission_denied",
                                  f"agents.{index}.agent: the lead may spawn only "
                                  f"{', '.join(allowed)} (got {request['agent']!r})")
        record = _materialize(record)
        with _as_lead(ctx, record, spawning=True) as roots:
            result = _api().spawn_jobs(requests, **_who(record))
            jobs = [_public(job, roots) for job in result["accepted"]]
        job_ids = [job["job_id"] for job in jobs]
        keys[key] = {"payload_sha256": digest, "job_ids": job_ids}
        from mmo_kernel.state.files import atomic_write_json

        atomic_write_json(_keys_path(sid), keys)
    return {"atomic": True, "replayed": False, "state_changed": True, "job_ids": job_ids,
            "jobs": jobs}


def _replay(ctx: CallContext, record: dict[str, Any], key: str, entry: Any,
            digest: str) -> dict[str, Any]:
    if not isinstance(entry, dict) or entry.get("payload_sha256") != digest:
        raise ToolFailure("invalid_arguments", f"idempotency_key {key!r} was already used "
                          "for a different team_spawn in this session")
    job_ids = [str(j) for j in entry.get("job_ids") or []]
    with _as_lead(ctx, record) as roots:
        jobs = [_public(_job_of_session(record, job_id), roots) for job_id in job_ids]
    return {"atomic": True, "replayed": True, "state_changed": False, "job_ids": job_ids,
            "jobs": jobs}


def team_status(arguments: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    record = require_session(ctx, arguments.get("session_id"))
    job_ids = list(dict.fromkeys(arguments.get("job_ids") or []))
    with _as_lead(ctx, record) as roots:
        jobs = [_public(_job_of_session(record, str(job_id)), roots) for job_id in job_ids]
    return {"jobs": jobs}


def _wait_budget(requested: float, ctx: CallContext) -> float:
    budget = min(float(requested), MAX_WAIT_SECONDS)
    deadline = ctx.extra.get("deadline_unix_ms")
    if isinstance(deadline, (int, float)) and not isinstance(deadline, bool):
        left = deadline / 1000.0 - time.time() - DEADLINE_MARGIN_SECONDS
        budget = min(budget, max(left, 0.0))
    return budget


def team_wait(arguments: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    """``wait_for_jobs``, bounded by 60 s and by the call's deadline."""
    record = require_session(ctx, arguments.get("session_id"))
    job_ids = list(dict.fromkeys(str(j) for j in arguments.get("job_ids") or []))
    for job_id in job_ids:
        _job_of_session(record, job_id)
    requested = float(arguments.get("timeout_seconds") or 0)
    budget = _wait_budget(requested, ctx)
    with _as_lead(ctx, record) as roots:
        result = _api().wait_for_jobs(job_ids, session_id=record["session_id"],
                                      timeout_seconds=budget,
                                      after_revision=arguments.get("after_revision"))
        out = scrub(result, roots)
    if budget < requested:
        out["timeout_seconds"] = round(budget, 3)
        out["timeout_note"] = (f"waited at most {budget:.0f} of the {requested:g} seconds asked "
                               "(the call's deadline); call team_wait again to keep waiting")
    return out


def team_result(arguments: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    record = require_session(ctx, arguments.get("session_id"))
    job_id = str(arguments.get("job_id"))
    _job_of_session(record, job_id)
    options = {k: arguments[k] for k in ("cursor", "max_chars") if arguments.get(k) is not None}
    with _as_lead(ctx, record) as roots:
        return scrub(_api().read_result(job_id, **options, **_who(record)), roots)


def _disposition(function: str) -> Callable[[dict[str, Any], CallContext], dict[str, Any]]:
    def run(arguments: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        record = require_session(ctx, arguments.get("session_id"))
        job_id = str(arguments.get("job_id"))
        _job_of_session(record, job_id)
        with _as_lead(ctx, record) as roots:
            result = getattr(_api(), function)(job_id, reason=arguments.get("reason"),
                                               **_who(record))
            out = scrub(result, roots)
        if "job_id" in out and "status" in out:  # a bare job record
            out = {"job": out}
        return {**out, "state_changed": True}

    run.__name__ = function
    return run


team_accept = _disposition("accept_result")
team_reject = _disposition("reject_result")
team_integrate = _disposition("integrate_patch")
team_cancel = _disposition("cancel_job")

EXECUTORS = {
    "team_agents": team_agents, "team_spawn": team_spawn, "team_status": team_status,
    "team_wait": team_wait, "team_result": team_result, "team_accept": team_accept,
    "team_reject": team_reject, "team_integrate": team_integrate, "team_cancel": team_cancel,
}

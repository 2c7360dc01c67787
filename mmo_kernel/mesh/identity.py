"""Who is calling the mesh: verified from the environment against the state dir.

The environment is forwarded by Codex (``env_vars``) or fixed in the server
entry (``env``); nothing in it is trusted until the presented token matches a
capability recorded by MMO. Failures raise :class:`IdentityError` whose message
starts with the contract phrase and never contains a token.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from mmo_kernel.mesh.capabilities import CapabilityUnavailable, read_capabilities
from mmo_kernel.mesh.tokens import hash_matches, token_hash

INVALID_CAPABILITY = "invalid MCP caller capability"
ROOT_ONLY = "only the root role may use the root MCP capability"
INVALID_NATIVE = "invalid native-agent capability"

TERMINAL_SESSION_STATUSES = frozenset({"completed", "failed", "cancelled", "stopped"})
JOB_ACTIVE_STATUSES = frozenset({"running", "waiting", "detached"})
"""Job statuses in which its agent may be executing a turn, hence calling the mesh."""

_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$")


class IdentityError(PermissionError):
    """The caller could not be verified; the request is refused and nothing changes."""


@dataclass(frozen=True)
class Caller:
    """A verified caller. ``agent``/``job_id`` are the authority used (a native agent's parent)."""

    kind: Literal["root", "worker"]
    session_id: str
    run_id: str
    agent: str
    job_id: str | None
    depth: int
    tainted: bool
    snapshot_hash: str
    state_dir: Path
    native_agent: str | None = None


def _required(environ: Mapping[str, str], name: str, phrase: str = INVALID_CAPABILITY) -> str:
    value = environ.get(name, "")
    if not value:
        raise IdentityError(f"{phrase}: {name} is not set")
    return value


def _checked_id(value: str, what: str) -> str:
    if not _ID.match(value) or ".." in value:
        raise IdentityError(f"{INVALID_CAPABILITY}: malformed {what}")
    return value


def _read_record(path: Path, missing: str) -> dict[str, Any]:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        raise IdentityError(f"{INVALID_CAPABILITY}: {missing}") from None
    except OSError as exc:
        raise IdentityError(
            f"{INVALID_CAPABILITY}: cannot read {path.name} ({exc.strerror})"
        ) from None
    with os.fdopen(fd, "rb") as handle:
        raw = handle.read()
    try:
        record = json.loads(raw)
    except ValueError:
        raise IdentityError(f"{INVALID_CAPABILITY}: {path.name} is not valid JSON") from None
    if not isinstance(record, dict):
        raise IdentityError(f"{INVALID_CAPABILITY}: {path.name} is not a record")
    return record


def _capabilities(session_dir: Path, phrase: str):
    try:
        return read_capabilities(session_dir)
    except CapabilityUnavailable as exc:
        raise IdentityError(f"{phrase}: {exc}") from None


def _verify_root(
    session: dict[str, Any], session_dir: Path, agent: str, token: str, run_id: str
) -> None:
    expected = token_hash(_capabilities(session_dir, INVALID_CAPABILITY).root_mcp_token)
    recorded = session.get("root_mcp_token_hash")
    if recorded is not None and recorded != expected:
        raise IdentityError(f"{INVALID_CAPABILITY}: session capability records disagree")
    if not hash_matches(token, expected):
        raise IdentityError(
            f"{INVALID_CAPABILITY}: token does not match the session's root capability"
        )
    root_agent = session.get("root_agent")
    if agent != root_agent:
        raise IdentityError(f"{ROOT_ONLY} ({root_agent!r}); the caller claims {agent!r}")
    current = session.get("current_run_id")
    if current is not None and current != run_id:
        raise IdentityError(f"{INVALID_CAPABILITY}: MMO_RUN_ID is not the session's active run")


def _verify_worker(
    state_dir: Path, session_id: str, job_id: str, agent: str | None, token: str, run_id: str
) -> dict[str, Any]:
    """The job whose capability ``token`` is; ``agent`` None: any agent (a native's parent)."""
    job_id = _checked_id(job_id, "MMO_CALLER_JOB_ID")
    job = _read_record(state_dir / "jobs" / job_id / "metadata.json", f"unknown job {job_id}")
    recorded = job.get("mcp_caller_token_hash")
    if job.get("session_id") != session_id or not isinstance(recorded, str):
        raise IdentityError(f"{INVALID_CAPABILITY}: job {job_id} has no capability in this session")
    if not hash_matches(token, recorded):
        raise IdentityError(f"{INVALID_CAPABILITY}: token does not match job {job_id}")
    if agent is not None and job.get("agent") != agent:
        raise IdentityError(f"{INVALID_CAPABILITY}: job {job_id} does not run agent {agent!r}")
    if not isinstance(job.get("agent"), str):
        raise IdentityError(f"{INVALID_CAPABILITY}: job {job_id} names no agent")
    if job.get("run_id") not in (None, run_id):
        raise IdentityError(f"{INVALID_CAPABILITY}: MMO_RUN_ID does not match job {job_id}")
    if job.get("status") not in JOB_ACTIVE_STATUSES:
        raise IdentityError(
            f"{INVALID_CAPABILITY}: job {job_id} is not running (status {job.get('status')!r})"
        )
    return job


def _verify_native(
    session_dir: Path, parent: str, environ: Mapping[str, str], tainted: bool
) -> str:
    flag = environ.get("MMO_CALLER_NATIVE", "")
    if flag != "1":
        raise IdentityError(f"{INVALID_NATIVE}: MMO_CALLER_NATIVE must be 1")
    presented = _required(environ, "MMO_NATIVE_CALLER_TOKEN", INVALID_NATIVE)
    if tainted:
        raise IdentityError(f"{INVALID_NATIVE}: native delegation is disabled in a tainted session")
    minted = _capabilities(session_dir, INVALID_NATIVE).native_agent_tokens.get(parent, {})
    matched = None
    for name, token in sorted(minted.items()):
        if hash_matches(presented, token_hash(token)):
            matched = name
    if matched is None:
        raise IdentityError(f"{INVALID_NATIVE}: token does not match a native agent of {parent!r}")
    return matched


def _root_agent(session: dict[str, Any], session_id: str) -> str:
    root = session.get("root_agent")
    if not isinstance(root, str) or not root:
        raise IdentityError(f"{INVALID_CAPABILITY}: session {session_id} names no root agent")
    return root


def verify_caller(environ: Mapping[str, str], state_dir: Path) -> Caller:
    """Verify the caller described by ``environ``; raise IdentityError on any mismatch.

    A native agent claims its own id (``MMO_CALLER_AGENT``) but presents its
    parent's capability: the parent is the session's root (no job id) or the
    job's agent, verified as usual, and the native token must be the one minted
    for exactly the claimed native agent of that parent.
    """
    session_id = _checked_id(_required(environ, "MMO_ROOT_SESSION_ID"), "MMO_ROOT_SESSION_ID")
    claimed = _required(environ, "MMO_CALLER_AGENT")
    token = _required(environ, "MMO_CALLER_TOKEN")
    run_id = _required(environ, "MMO_RUN_ID")
    session_dir = Path(state_dir) / "sessions" / session_id
    session = _read_record(session_dir / "session.json", f"unknown session {session_id}")
    status = session.get("status")
    if status in TERMINAL_SESSION_STATUSES:
        raise IdentityError(f"{INVALID_CAPABILITY}: session {session_id} is {status}")
    is_native = environ.get("MMO_CALLER_NATIVE", "") not in ("", "0")
    job_id = environ.get("MMO_CALLER_JOB_ID", "") or None
    depth = 0
    if job_id is None:
        agent = _root_agent(session, session_id) if is_native else claimed
        _verify_root(session, session_dir, agent, token, run_id)
    else:
        job = _verify_worker(Path(state_dir), session_id, job_id,
                             None if is_native else claimed, token, run_id)
        agent = job["agent"]
        raw_depth = job.get("depth", 1)
        depth = raw_depth if isinstance(raw_depth, int) and not isinstance(raw_depth, bool) else 1
    tainted = session.get("tainted") is True
    native = None
    if is_native:
        native = _verify_native(session_dir, agent, environ, tainted)
        if native != claimed:
            raise IdentityError(f"{INVALID_NATIVE}: the token is minted for native agent "
                                f"{native!r} of {agent!r}, but the caller claims {claimed!r}")
    snapshot_hash = session.get("snapshot_hash")
    if not isinstance(snapshot_hash, str):
        raise IdentityError(f"{INVALID_CAPABILITY}: session {session_id} has no snapshot")
    return Caller(
        kind="root" if job_id is None else "worker",
        session_id=session_id,
        run_id=run_id,
        agent=agent,
        job_id=job_id,
        depth=depth,
        tainted=tainted,
        snapshot_hash=snapshot_hash,
        state_dir=Path(state_dir),
        native_agent=native,
    )

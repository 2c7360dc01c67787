"""Who sent a gateway request: the session, job and agent headers an agent's home carries.

The gateway is shared by every session, so each agent tells it who it is.
A home's provider block gets static ``http_headers`` naming its session and
agent, and a worker's home also ``env_http_headers = {"X-MMO-Job" =
"MMO_CALLER_JOB_ID"}``: the home is per agent while the job id differs per
job, so Codex reads it from the job's own environment (the root has no job,
so it sends none). The gateway records the values in the request log and
never forwards any ``X-MMO-*`` header upstream. A value that does not have an
id's shape is recorded as null, never echoed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

SESSION_HEADER = "X-MMO-Session"
JOB_HEADER = "X-MMO-Job"
AGENT_HEADER = "X-MMO-Agent"
JOB_ID_ENV = "MMO_CALLER_JOB_ID"
MMO_HEADER_PREFIX = "x-mmo-"

_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")
_AGENT = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


def is_mmo_header(name: str) -> bool:
    """True for MMO's own ``X-MMO-*`` headers, which end at the gateway."""
    return name.lower().startswith(MMO_HEADER_PREFIX)


def checked_id(value: object) -> str | None:
    """``value`` if it has a session or job id's shape, else ``None``."""
    if isinstance(value, str) and _ID.match(value) and ".." not in value:
        return value
    return None


def checked_agent(value: object) -> str | None:
    """``value`` if it has an agent name's shape, else ``None``."""
    return value if isinstance(value, str) and _AGENT.match(value) else None


def request_attribution(headers: Mapping[str, str]) -> dict[str, str | None]:
    """``session_id``, ``job_id`` and ``agent`` from a request's lower-cased headers."""
    return {"session_id": checked_id(headers.get(SESSION_HEADER.lower())),
            "job_id": checked_id(headers.get(JOB_HEADER.lower())),
            "agent": checked_agent(headers.get(AGENT_HEADER.lower()))}


def attribution_headers(session_id: str, agent: str, *, worker: bool
                        ) -> tuple[dict[str, str], dict[str, str]]:
    """``(http_headers, env_http_headers)`` a home's gateway provider block carries."""
    static = {SESSION_HEADER: session_id, AGENT_HEADER: agent}
    from_env = {JOB_HEADER: JOB_ID_ENV} if worker else {}
    return static, from_env

"""The ``[mcp_servers.mmo_mesh]`` entry written into every agent's Codex config (spec 07).

Tokens never appear here except a native agent's own token, which lives in
that native agent's config ``env`` (spec 02). The root and worker tokens,
the run id and the worker's job id reach the server through ``env_vars``:
Codex forwards them from the agent process environment built by
``session_environment``. ``MMO_CONFIG_DIR`` (the server reads settings, tool
servers and ``credentials.env`` there) is fixed in this entry's ``env`` and is
never in the agent's shell: the home's ``shell_environment_policy`` excludes it
(``mmo_kernel.sessions.homes.SHELL_EXCLUDES``).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from mmo_kernel.mesh.surface import ALL_TOOLS
from mmo_kernel.state.paths import config_dir, state_dir

ROOT_ENV_VARS = ("MMO_CALLER_TOKEN", "MMO_RUN_ID")
WORKER_ENV_VARS = ("MMO_CALLER_TOKEN", "MMO_RUN_ID", "MMO_CALLER_JOB_ID")
TOOL_TIMEOUT_MARGIN_SECONDS = 30
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$")


def mesh_command() -> tuple[str, list[str]]:
    """The venv's ``mmo`` executable beside ``sys.executable`` and ``["mcp"]``.

    When no ``mmo`` script is installed there (a source checkout run with a
    bare interpreter) the package's own module entry is used instead.
    """
    script = Path(sys.executable).parent / "mmo"
    if script.is_file():
        return str(script.absolute()), ["mcp"]
    return str(Path(sys.executable).absolute()), ["-m", "mmo_kernel.mcp"]


def _check_id(value: Any, what: str) -> str:
    if not isinstance(value, str) or not _ID.match(value) or ".." in value:
        raise ValueError(f"mesh config: {what} must be a plain identifier (got {value!r})")
    return value


def _check_tools(enabled_tools: Sequence[str]) -> list[str]:
    tools = list(enabled_tools)
    unknown = sorted(set(tools) - set(ALL_TOOLS))
    if unknown:
        raise ValueError(f"mesh config: unknown mesh tools {', '.join(unknown)}")
    if len(set(tools)) != len(tools):
        raise ValueError("mesh config: enabled_tools lists a tool twice")
    return tools


def mesh_server_config(
    kind: Literal["root", "worker"],
    *,
    session_id: str,
    run_id: str,
    agent: str,
    job_id: str | None = None,
    native: bool = False,
    native_token: str | None = None,
    native_agent: str | None = None,
    lifecycle_timeout_seconds: float = 1200,
    enabled_tools: Sequence[str],
) -> dict[str, Any]:
    """The ``mcp_servers.mmo_mesh`` table for one agent home (or native agent file).

    ``enabled_tools`` must be ``tools_for(...)`` for this caller, so the config
    lists exactly what ``tools/list`` returns. For a native agent pass the
    parent's ``kind``/``agent``/tools with ``native=True``, its token and its own
    id (``native_agent``): the entry presents that id as ``MMO_CALLER_AGENT`` and
    forwards the parent's capability (spec 07).
    ``run_id`` and ``job_id`` are checked but not written: they travel via
    ``env_vars`` (a worker's job id differs per job; the home is per agent).
    """
    if kind not in ("root", "worker"):
        raise ValueError(f"mesh config: kind must be one of root, worker (got {kind!r})")
    _check_id(session_id, "session_id")
    _check_id(run_id, "run_id")
    _check_id(agent, "agent")
    if kind == "worker" and job_id is not None:
        _check_id(job_id, "job_id")
    if kind == "root" and job_id is not None:
        raise ValueError("mesh config: a root entry takes no job_id")
    if native != (native_token is not None):
        raise ValueError("mesh config: native and native_token go together")
    if native and (not isinstance(native_token, str) or len(native_token) < 16):
        raise ValueError("mesh config: native_token must be a minted token")
    if native != (native_agent is not None):
        raise ValueError("mesh config: a native entry names its native agent (native_agent), "
                         "and only a native entry does")
    if native_agent is not None:
        _check_id(native_agent, "native_agent")
    if isinstance(lifecycle_timeout_seconds, bool) or not lifecycle_timeout_seconds > 0:
        raise ValueError("mesh config: lifecycle_timeout_seconds must be positive")
    command, args = mesh_command()
    env = {
        "MMO_ROOT_SESSION_ID": session_id,
        "MMO_CALLER_AGENT": agent,
        "MMO_STATE_DIR": str(state_dir().absolute()),
        "MMO_CONFIG_DIR": str(config_dir().absolute()),
    }
    if os.environ.get("PYTHONPATH"):  # plugins installed there: the server must see them too
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    if native:
        env["MMO_CALLER_AGENT"] = native_agent  # type: ignore[assignment]
        env["MMO_CALLER_NATIVE"] = "1"
        env["MMO_NATIVE_CALLER_TOKEN"] = native_token  # type: ignore[assignment]
    return {
        "command": command,
        "args": args,
        "env": env,
        "env_vars": list(ROOT_ENV_VARS if kind == "root" else WORKER_ENV_VARS),
        "enabled_tools": _check_tools(enabled_tools),
        "tool_timeout_sec": float(lifecycle_timeout_seconds + TOOL_TIMEOUT_MARGIN_SECONDS),
        "default_tools_approval_mode": "approve",
        "required": True,
    }

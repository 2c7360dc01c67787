"""Keep supervisor internals out of tool results.

Agents see job and session facts, never the paths and handles MMO uses to
supervise them (spec 07: ``result_path``, ``events_path``, ``stderr_path``,
``socket_path``, ``full_result_path``, ...), nor capability hashes, nor a
writer's ``workspace`` handle (worktree, branch and repository paths under
the state dir: the root integrates through ``agent_patch_integrate``).
"""

from __future__ import annotations

from pathlib import PurePath
from typing import Any

HIDDEN_KEYS = frozenset(
    {
        "home",
        "homes",
        "command",
        "control_socket",
        "root_control_socket",
        "native_agent_files",
        "orchestration_skill",
        "model_catalog_json",
        "mcp_caller_token_hash",
        "root_mcp_token_hash",
        "capabilities",
        "workspace",
    }
)
"""Keys removed at any depth, besides every ``*_path`` and ``*_socket`` key."""

AGENT_PAYLOAD_KEYS = frozenset({"content"})
"""Keys whose value is an agent's own output (``agent_result``'s ``content``): kept
verbatim, or a contract field such as ``tests_run[].command`` would vanish."""


def is_hidden(key: str) -> bool:
    return key in HIDDEN_KEYS or key.endswith("_path") or key.endswith("_socket")


def redact(value: Any) -> Any:
    """A copy of ``value`` without supervisor keys; paths become strings so JSON can carry them."""
    if isinstance(value, dict):
        return {str(k): v if str(k) in AGENT_PAYLOAD_KEYS else redact(v)
                for k, v in value.items() if not is_hidden(str(k))}
    if isinstance(value, (list, tuple)):
        return [redact(v) for v in value]
    if isinstance(value, PurePath):
        return str(value)
    return value

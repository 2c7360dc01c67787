"""Which mesh tools a caller gets: one function shared by ``tools/list`` and config generation.

Spec 07 requires the ``enabled_tools`` written into an agent's config to
equal exactly what ``tools/list`` returns for that caller, so both call
:func:`tools_for`. Stdlib only: imported on every request.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

CallerKind = Literal["root", "worker"]

SPAWN_TOOLS: tuple[str, ...] = ("agent_spawn", "agents_spawn")
READ_TOOLS: tuple[str, ...] = ("agent_status", "agents_wait", "agent_result")
DISPOSITION_TOOLS: tuple[str, ...] = ("agent_result_accept", "agent_result_reject")
INTEGRATE_TOOL = "agent_patch_integrate"
CANCEL_TOOL = "agent_cancel"

AGENT_MCP_CONTROL_TOOLS: tuple[str, ...] = (
    "agent_inspect",
    "agent_trace",
    "agent_trace_record",
    "agent_steer",
    "agent_interrupt",
    "agent_pause",
    "agent_continue",
    "agent_detach",
    "agent_stop",
    "agent_compact",
    "agent_finalize",
    "agent_set_effort",
    "agent_respond",
    "agent_fork",
)
"""The control tools every caller gets (the API decides per job whether the caller may act)."""

ALL_TOOLS: tuple[str, ...] = (
    *SPAWN_TOOLS,
    *READ_TOOLS,
    CANCEL_TOOL,
    *DISPOSITION_TOOLS,
    INTEGRATE_TOOL,
    *AGENT_MCP_CONTROL_TOOLS,
)
"""Every mesh tool, in the order ``tools/list`` presents them."""

TAINTED_ROOT_REMOVED: frozenset[str] = frozenset({*SPAWN_TOOLS, INTEGRATE_TOOL})


def may_spawn(spawnable: Sequence[str], depth: int, max_depth: int) -> bool:
    """Whether delegation is possible at all: someone to spawn and depth left."""
    return bool(spawnable) and depth < max_depth


def tools_for(
    kind: CallerKind,
    *,
    spawnable: Sequence[str] = (),
    depth: int = 0,
    max_depth: int = 1,
    tainted: bool = False,
) -> list[str]:
    """Tool names for a root (``depth`` 0) or a worker job at ``depth``, in listing order.

    A native agent gets exactly its parent's set, so callers pass the parent's
    values. Spawn tools need agents to spawn and depth below ``max_depth``; a
    tainted session never spawns or integrates. A worker gets ``agent_cancel``
    only when it can have descendants, and never accept/reject/integrate.
    """
    if kind not in ("root", "worker"):
        raise ValueError(f"caller kind must be one of root, worker (got {kind!r})")
    delegates = may_spawn(spawnable, depth, max_depth)
    chosen: set[str] = set(READ_TOOLS) | set(AGENT_MCP_CONTROL_TOOLS)
    if delegates and not tainted:
        chosen |= set(SPAWN_TOOLS)
    if kind == "root":
        chosen |= {CANCEL_TOOL, *DISPOSITION_TOOLS}
        if not tainted:
            chosen.add(INTEGRATE_TOOL)
    elif delegates:
        chosen.add(CANCEL_TOOL)
    return [name for name in ALL_TOOLS if name in chosen]

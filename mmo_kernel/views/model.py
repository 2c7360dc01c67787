"""What a refresh of the read model returns: the boundary ``mmo top`` and ``mmo ui`` read."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from mmo_kernel.views.routes import RouteFigures


class Doing(BaseModel):
    """What an agent is busy with now, and since when (epoch seconds)."""

    kind: str
    label: str
    since: float


class AgentView(BaseModel):
    """One agent of a session: the root (``job_id`` null) or a worker job."""

    key: str
    """``root`` or the job id: what ``parent`` refers to."""
    session_id: str
    job_id: str | None = None
    agent: str
    parent: str | None = None
    depth: int = 0
    status: str
    stored_status: str
    """The status on disk; differs from ``status`` while a reconciliation is pending."""
    route: str | None = None
    model: str | None = None
    mode: str | None = None
    write_scope: list[str] = Field(default_factory=list)
    started_at: str | None = None
    finished_at: str | None = None
    elapsed_seconds: float | None = None
    turns: int = 0
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    doing: Doing | None = None
    last_message: str | None = None
    result_state: str | None = None
    pending_requests: int = 0
    error: str | None = None
    timeline: list[dict[str, Any]] = Field(default_factory=list)
    """The newest spans (``kind``, ``label``, ``start``, ``end``, ``status``), oldest first.
    A closed span's dict is shared by the snapshots that follow: read it, never change it."""


class SessionView(BaseModel):
    """A live session with its agent tree (root first, each worker after its caller)."""

    session_id: str
    profile_id: str | None = None
    cwd: str | None = None
    status: str
    stored_status: str
    session_kind: str | None = None
    execution_mode: str | None = None
    goal_status: str | None = None
    created_at: str | None = None
    tainted: bool = False
    agents: list[AgentView] = Field(default_factory=list)
    audit: list[dict[str, Any]] = Field(default_factory=list)
    routes: list[RouteFigures] = Field(default_factory=list)


class TeamSnapshot(BaseModel):
    """Every live session of a state dir, the finished ones counted, the routes' figures."""

    generated_at: str
    state_dir: str
    sessions_total: int
    sessions_live: int
    finished: dict[str, int]
    """Terminal sessions by status."""
    tainted: int
    agents: dict[str, int]
    """Agents of the live sessions by status."""
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    """Of the live sessions' agents; null when any of them has no known price."""
    sessions: list[SessionView]
    routes: list[RouteFigures]
    refresh_ms: float
    bytes_read: int
    """Log bytes read by this refresh (only what was appended since the last)."""

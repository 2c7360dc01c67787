"""Loaded threads: in-memory state plus the rollout they are persisted to."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mmo_codex_standin import shapes, store
from mmo_codex_standin.protocol import now_s


@dataclass
class ActiveTurn:
    """A running turn; ``wake`` cuts a sleep short (steer, interrupt, finalize)."""

    record: dict[str, Any]
    started_monotonic: float
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    interrupted: bool = False
    steered: bool = False
    extra_text: list[str] = field(default_factory=list)
    task: asyncio.Task | None = None
    early: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass
class ThreadState:
    id: str
    created_at: int
    cwd: str
    model: str
    model_provider: str
    approval_policy: Any
    sandbox: dict[str, Any]
    ephemeral: bool = False
    forked_from: str | None = None
    originator: str | None = None
    turns: list[dict[str, Any]] = field(default_factory=list)
    total_usage: dict[str, int] | None = None
    dynamic_tools: list[dict[str, Any]] = field(default_factory=list)
    active: ActiveTurn | None = None
    updated_at: int = 0
    path: Path | None = None
    persisted: bool = False
    lock: store.WriterLock | None = None
    subscribers: set = field(default_factory=set)
    pending_requests: list = field(default_factory=list)
    contract_schema: dict | None = None
    waiting_flags: list[str] = field(default_factory=list)
    system_error: bool = False
    die_after_persist: bool = False
    """Set by ``FAKE_APP_SERVER_CRASH_BEFORE_GOAL_REPLY_ONCE``: the active turn's persisted
    terminal state is the last thing this process does."""
    goal_set: asyncio.Event = field(default_factory=asyncio.Event)
    """Set by every ``thread/goal/set``; a turn waiting for its goal wakes on it."""

    @property
    def first_input(self) -> str:
        return self.turns[0].get("input_text", "") if self.turns else ""

    @property
    def preview(self) -> str:
        return self.first_input.splitlines()[0][:200] if self.first_input else ""

    def status(self, loaded: bool = True) -> dict[str, Any]:
        if not loaded:
            return {"type": "notLoaded"}
        if self.active is not None:
            return {"type": "active", "activeFlags": list(self.waiting_flags)}
        return {"type": "systemError"} if self.system_error else {"type": "idle"}

    def wire(self, *, include_turns: bool = False, loaded: bool = True) -> dict[str, Any]:
        """The ``Thread`` object; turns only for resume, fork and read+includeTurns."""
        return {
            "id": self.id,
            "sessionId": self.id,
            "forkedFromId": self.forked_from,
            "parentThreadId": None,
            "preview": self.preview,
            "ephemeral": self.ephemeral,
            "projectId": None,
            "historyMode": "paginated",
            "modelProvider": self.model_provider,
            "model": self.model,
            "reasoningEffort": None,
            "createdAt": self.created_at,
            "updatedAt": self.updated_at or self.created_at,
            "recencyAt": self.updated_at or self.created_at,
            "status": self.status(loaded),
            "path": str(self.path) if self.path else None,
            "cwd": self.cwd,
            "cliVersion": shapes.CLI_VERSION,
            "originator": self.originator,
            "source": "vscode",
            "threadSource": None,
            "agentNickname": None,
            "agentRole": None,
            "gitInfo": None,
            "name": None,
            "turns": [shapes.turn(t, view="full") for t in self.turns] if include_turns else [],
        }

    # -- persistence -------------------------------------------------------
    def persist(self, kind: str, payload: dict[str, Any]) -> None:
        """Append to the rollout; ``session_meta`` first (the file appears at the first turn)."""
        if self.ephemeral or self.path is None:
            return
        if not self.persisted:
            store.append(self.path, "session_meta", self.meta())
            self.persisted = True
        store.append(self.path, kind, payload)
        self.updated_at = now_s()

    def meta(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "session_id": self.id,
            "timestamp": store.iso_now(),
            "cwd": self.cwd,
            "originator": self.originator,
            "cli_version": shapes.CLI_VERSION,
            "source": "vscode",
            "model_provider": self.model_provider,
            "model": self.model,
            "created_at": self.created_at,
            "forked_from_id": self.forked_from,
            "approval_policy": self.approval_policy,
            "sandbox": self.sandbox,
        }

    def persist_history(self) -> None:
        """Write every known turn (a fork materialises its copied history at once)."""
        for record in self.turns:
            self.persist(
                "event_msg",
                {
                    "type": "task_started",
                    "turn_id": record["id"],
                    "started_at": record["startedAt"],
                    "input_text": record.get("input_text", ""),
                    "output_schema": record.get("output_schema"),
                },
            )
            for item in record["items"]:
                self.persist(
                    "event_msg", {"type": "item_completed", "turn_id": record["id"], "item": item}
                )
            if record["status"] != "inProgress":
                self.persist(
                    "event_msg",
                    {
                        "type": "task_complete",
                        "turn_id": record["id"],
                        "status": record["status"],
                        "error": record["error"],
                        "completed_at": record["completedAt"],
                        "duration_ms": record["durationMs"],
                    },
                )
        if self.total_usage:
            self.persist(
                "event_msg",
                {
                    "type": "token_count",
                    "info": {"total": self.total_usage, "last": self.total_usage},
                },
            )


def from_rollout(path: Path) -> ThreadState:
    """A thread rebuilt from its rollout by a new process."""
    data = store.read_rollout(path)
    meta = data["meta"]
    thread = ThreadState(
        id=meta["id"],
        created_at=meta.get("created_at", now_s()),
        cwd=meta.get("cwd", ""),
        model=meta.get("model", ""),
        model_provider=meta.get("model_provider", ""),
        approval_policy=meta.get("approval_policy", "on-request"),
        sandbox=meta.get("sandbox") or shapes.sandbox_policy("read-only"),
        forked_from=meta.get("forked_from_id"),
        originator=meta.get("originator"),
        turns=data["turns"],
        path=path,
        persisted=True,
    )
    if data["usage"]:
        thread.total_usage = data["usage"].get("total")
    thread.updated_at = max(
        [t.get("completedAt") or t.get("startedAt") or 0 for t in thread.turns] + [0]
    )
    return thread

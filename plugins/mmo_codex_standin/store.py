"""Persistence under ``CODEX_HOME`` in real Codex's layout.

One ``sessions/YYYY/MM/DD/rollout-<ts>-<thread_id>.jsonl`` per thread,
created by the first turn; each line is ``{timestamp, type, payload}`` like
Codex's rollout lines. A turn with ``task_started`` but no ``task_complete``
reads back ``interrupted`` (the process died during it), exactly as real
Codex reports a turn killed mid-flight. Writer locks live in
``thread-writer-locks/<id>.lock`` (an ``flock`` the kernel drops when the
holder dies, with the holder's pid written inside); goals and once-only
marker memory live in ``standin/``.
"""

from __future__ import annotations

import fcntl
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mmo_codex_standin.protocol import RpcError
from mmo_kernel.workspace import atomic_write_json


def iso_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def rollout_path(home: Path, thread_id: str, created_at: int) -> Path:
    stamp = datetime.fromtimestamp(created_at, UTC)
    day = home / "sessions" / stamp.strftime("%Y/%m/%d")
    return day / f"rollout-{stamp.strftime('%Y-%m-%dT%H-%M-%S')}-{thread_id}.jsonl"


def find_rollout(home: Path, thread_id: str) -> Path | None:
    matches = sorted((home / "sessions").glob(f"*/*/*/rollout-*-{thread_id}.jsonl"))
    return matches[0] if matches else None


def append(path: Path, kind: str, payload: dict[str, Any]) -> None:
    """Append one rollout line and fsync it: a crash right after must not lose it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps({"timestamp": iso_now(), "type": kind, "payload": payload}) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line.encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)


def read_rollout(path: Path) -> dict[str, Any]:
    """Rebuild ``{meta, turns, usage}`` from a rollout file; torn lines are skipped."""
    meta: dict[str, Any] = {}
    turns: dict[str, dict[str, Any]] = {}
    usage = None
    for raw in path.read_text(encoding="utf-8").splitlines():
        try:
            line = json.loads(raw)
        except json.JSONDecodeError:
            continue
        kind, payload = line.get("type"), line.get("payload", {})
        if kind == "session_meta":
            meta = payload
        elif kind == "event_msg":
            event = payload.get("type")
            turn_id = payload.get("turn_id")
            if event == "task_started":
                turns[turn_id] = {
                    "id": turn_id,
                    "status": "interrupted",
                    "error": None,
                    "items": [],
                    "startedAt": payload.get("started_at"),
                    "completedAt": None,
                    "durationMs": None,
                    "input_text": payload.get("input_text", ""),
                    "output_schema": payload.get("output_schema"),
                }
            elif event == "item_completed" and turn_id in turns:
                turns[turn_id]["items"].append(payload["item"])
            elif event == "user_input" and turn_id in turns:
                turns[turn_id]["input_text"] = payload.get("input_text", "")
            elif event == "task_complete" and turn_id in turns:
                turns[turn_id].update(
                    status=payload["status"],
                    error=payload.get("error"),
                    completedAt=payload.get("completed_at"),
                    durationMs=payload.get("duration_ms"),
                )
            elif event == "token_count":
                usage = payload.get("info")
    return {"meta": meta, "turns": list(turns.values()), "usage": usage}


class WriterLock:
    """An exclusive per-thread lock a second live process cannot take."""

    def __init__(self, home: Path, thread_id: str) -> None:
        self.path = home / "thread-writer-locks" / f"{thread_id}.lock"
        self.thread_id = thread_id
        self.fd: int | None = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise RpcError(f"thread {self.thread_id} already has an active writer") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self.fd = fd

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class SideStore:
    """Stand-in state that real Codex keeps in sqlite: goals and once-only markers."""

    def __init__(self, home: Path) -> None:
        self.root = home / "standin"

    def _goal_path(self, thread_id: str) -> Path:
        return self.root / "goals" / f"{thread_id}.json"

    def load_goal(self, thread_id: str) -> dict[str, Any] | None:
        path = self._goal_path(thread_id)
        if not path.is_file():
            return None
        return json.loads(path.read_text(encoding="utf-8"))

    def save_goal(self, thread_id: str, goal: dict[str, Any] | None) -> None:
        path = self._goal_path(thread_id)
        if goal is None:
            path.unlink(missing_ok=True)
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(path, goal)

    def once(self, thread_id: str, marker: str) -> bool:
        """True the first time ``marker`` fires for ``thread_id``, across processes."""
        path = self.root / "once" / f"{thread_id}.{marker}"
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return False
        os.fsync(fd)
        os.close(fd)
        return True

    def fired(self, thread_id: str, marker: str) -> bool:
        return (self.root / "once" / f"{thread_id}.{marker}").exists()

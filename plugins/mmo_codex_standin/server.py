"""The app-server core: dispatch, thread lifecycle and fan-out to subscribers."""

from __future__ import annotations

import asyncio
import os
import platform
import tomllib
from pathlib import Path
from typing import Any

from mmo_codex_standin import goals, params, shapes, store, turns
from mmo_codex_standin.connection import Connection
from mmo_codex_standin.protocol import RpcError, check_thread_id, now_s, uuid7
from mmo_codex_standin.threads import ThreadState, from_rollout


class Server:
    """State shared by every connection of one app-server process."""

    def __init__(self, home: Path, cwd: Path) -> None:
        self.home = home
        self.cwd = cwd
        self.threads: dict[str, ThreadState] = {}
        self.connections: set[Connection] = set()
        self.side = store.SideStore(home)
        self.config = _read_config(home)
        self.handlers = {
            "initialize": self.initialize,
            "thread/start": self.thread_start,
            "thread/resume": self.thread_resume,
            "thread/fork": self.thread_fork,
            "thread/read": self.thread_read,
            "thread/goal/set": lambda c, p, a: goals.set_goal(self, c, p, a),
            "thread/goal/get": lambda c, p, a: goals.get_goal(self, c, p, a),
            "thread/goal/clear": lambda c, p, a: goals.clear_goal(self, c, p, a),
            "thread/compact/start": lambda c, p, a: turns.compact_start(self, c, p, a),
            "turn/start": lambda c, p, a: turns.turn_start(self, c, p, a),
            "turn/steer": lambda c, p, a: turns.turn_steer(self, c, p, a),
            "turn/interrupt": lambda c, p, a: turns.turn_interrupt(self, c, p, a),
        }

    # -- dispatch ----------------------------------------------------------
    async def handle(self, conn: Connection, message: Any) -> None:
        if not isinstance(message, dict):
            return
        self.connections.add(conn)
        if "method" not in message:
            conn.on_response(message)
            return
        if "id" not in message:
            return  # a notification such as `initialized`: nothing to answer
        after: list = []
        try:
            method = message["method"]
            if not conn.initialized and method != "initialize":
                raise RpcError("Not initialized")
            handler = self.handlers.get(method)
            if handler is None:
                raise RpcError(f"Invalid request: unknown variant `{method}`")
            result = await handler(conn, message.get("params"), after)
            conn.send({"id": message["id"], "result": result})
        except RpcError as exc:
            conn.send({"id": message["id"], "error": exc.payload()})
            return
        for callback in after:
            callback()

    def start_goal_turn(self, thread: ThreadState) -> None:
        """Continue an active goal on an idle thread (goals and the runner call back here)."""
        turns.start_goal_turn(self, thread)

    def emit(self, thread: ThreadState, method: str, body: dict[str, Any]) -> None:
        for conn in list(thread.subscribers):
            conn.notify(method, body)

    async def ask(
        self, thread: ThreadState, method: str, body: dict[str, Any], prefix: str | None = None
    ) -> dict[str, Any]:
        """Send a server request to every subscriber; the first answer wins."""
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        ids: dict[Connection, Any] = {}
        entry = {"method": method, "params": body, "prefix": prefix, "future": future, "ids": ids}
        thread.pending_requests.append(entry)
        for conn in list(thread.subscribers):
            ids[conn] = conn.request(method, body, future, prefix)
        try:
            return await future
        finally:
            thread.pending_requests.remove(entry)
            for conn, request_id in ids.items():
                conn.waiting.pop(request_id, None)
                conn.notify(
                    "serverRequest/resolved", {"threadId": thread.id, "requestId": request_id}
                )

    def subscribe(self, thread: ThreadState, conn: Connection) -> None:
        if conn in thread.subscribers:
            return
        thread.subscribers.add(conn)
        for entry in thread.pending_requests:  # a re-attached client sees what is waiting
            entry["ids"][conn] = conn.request(
                entry["method"], entry["params"], entry["future"], entry["prefix"]
            )

    def drop(self, conn: Connection) -> None:
        conn.closed = True
        self.connections.discard(conn)
        for thread in self.threads.values():
            thread.subscribers.discard(conn)

    def loaded(self, thread_id: Any) -> ThreadState:
        thread_id = check_thread_id(thread_id)
        thread = self.threads.get(thread_id)
        if thread is None:
            raise RpcError(f"thread not found: {thread_id}")
        return thread

    # -- handshake -----------------------------------------------------------
    async def initialize(self, conn: Connection, raw: Any, after: list) -> dict[str, Any]:
        if conn.initialized:
            raise RpcError("Already initialized")
        body = params.parse(params.InitializeParams, raw)
        delay = float(os.environ.get("FAKE_CODEX_APP_SERVER_INITIALIZE_DELAY", "0") or 0)
        if delay > 0:
            await asyncio.sleep(delay)
        caps = body.capabilities
        conn.experimental = bool(caps and caps.experimentalApi)
        conn.opt_out = set(caps.optOutNotificationMethods or []) if caps else set()
        conn.client_name = body.clientInfo.name
        conn.initialized = True
        info = body.clientInfo
        return {
            "userAgent": f"{info.name}/{shapes.CLI_VERSION} (mmo stand-in; {platform.machine()}) "
            f"({info.name}; {info.version})",
            "codexHome": str(self.home),
            "platformFamily": "unix",
            "platformOs": "linux",
        }

    # -- threads ---------------------------------------------------------------
    def _overrides(
        self, body: params.ThreadOverrides, thread: ThreadState | None = None
    ) -> dict[str, Any]:
        base_cwd = Path(thread.cwd) if thread else self.cwd
        cwd = str((self.cwd / body.cwd).resolve()) if body.cwd else str(base_cwd)
        return {
            "cwd": cwd,
            "model": body.model
            or (thread.model if thread else self.config.get("model", "gpt-5.5")),
            "model_provider": body.modelProvider
            or (thread.model_provider if thread else self.config.get("model_provider", "openai")),
            "approval_policy": body.approvalPolicy
            or (
                thread.approval_policy
                if thread
                else self.config.get("approval_policy", "on-request")
            ),
            "sandbox": shapes.sandbox_policy(body.sandbox)
            if body.sandbox
            else (
                thread.sandbox
                if thread
                else shapes.sandbox_policy(self.config.get("sandbox_mode", "read-only"))
            ),
        }

    def _response(self, thread: ThreadState, include_turns: bool) -> dict[str, Any]:
        return {
            "thread": thread.wire(include_turns=include_turns),
            "model": thread.model,
            "modelProvider": thread.model_provider,
            "serviceTier": None,
            "cwd": thread.cwd,
            "instructionSources": [],
            "approvalPolicy": thread.approval_policy,
            "approvalsReviewer": "user",
            "sandbox": thread.sandbox,
            "reasoningEffort": None,
        }

    def _new_thread(
        self, conn: Connection, settings: dict[str, Any], ephemeral: bool
    ) -> ThreadState:
        thread_id = uuid7()
        created = now_s()
        thread = ThreadState(
            id=thread_id,
            created_at=created,
            ephemeral=ephemeral,
            originator=conn.client_name,
            **settings,
        )
        if not ephemeral:
            thread.path = store.rollout_path(self.home, thread_id, created)
            thread.lock = store.WriterLock(self.home, thread_id)
            thread.lock.acquire()
        self.threads[thread_id] = thread
        self.subscribe(thread, conn)
        return thread

    async def thread_start(self, conn: Connection, raw: Any, after: list) -> dict[str, Any]:
        body = params.parse(params.ThreadStartParams, raw)
        if body.dynamicTools and not conn.experimental:
            raise RpcError("thread/start.dynamicTools requires experimentalApi capability")
        thread = self._new_thread(conn, self._overrides(body), bool(body.ephemeral))
        thread.dynamic_tools = list(body.dynamicTools or [])
        after.append(lambda: self.announce_thread(thread))
        return self._response(thread, include_turns=False)

    def announce_thread(self, thread: ThreadState) -> None:
        """``thread/started`` goes to every initialized client, as real Codex sends it:
        a root host learns of the thread its user's TUI started on the same server."""
        for other in list(self.connections):
            if other.initialized and not other.closed:
                other.notify("thread/started", {"thread": thread.wire()})

    async def thread_resume(self, conn: Connection, raw: Any, after: list) -> dict[str, Any]:
        body = params.parse(params.ThreadResumeParams, raw)
        thread_id = check_thread_id(body.threadId)
        thread = self.threads.get(thread_id)
        if thread is None:
            path = store.find_rollout(self.home, thread_id)
            if path is None:
                raise RpcError(f"no rollout found for thread id {thread_id}")
            thread = from_rollout(path)
            thread.lock = store.WriterLock(self.home, thread_id)
            thread.lock.acquire()
            self.threads[thread_id] = thread
        settings = self._overrides(body, thread)
        for key, value in settings.items():
            setattr(thread, key, value)
        self.subscribe(thread, conn)
        conn.notify("thread/status/changed", {"threadId": thread.id, "status": thread.status()})
        after.append(lambda: self._after_resume(conn, thread))
        return self._response(thread, include_turns=not body.excludeTurns)

    def _after_resume(self, conn: Connection, thread: ThreadState) -> None:
        if thread.total_usage:
            last = thread.turns[-1]["id"] if thread.turns else ""
            conn.notify(
                "thread/tokenUsage/updated",
                {
                    "threadId": thread.id,
                    "turnId": last,
                    "tokenUsage": shapes.token_usage(thread.total_usage, thread.total_usage),
                },
            )
        goal = self.side.load_goal(thread.id)
        if goal is None:
            conn.notify("thread/goal/cleared", {"threadId": thread.id})
        else:
            conn.notify(
                "thread/goal/updated", {"threadId": thread.id, "turnId": None, "goal": goal}
            )

    def _source(self, thread_id: str) -> ThreadState:
        if thread_id in self.threads:
            return self.threads[thread_id]
        path = store.find_rollout(self.home, thread_id)
        if path is None:
            raise RpcError(f"no rollout found for thread id {thread_id}")
        return from_rollout(path)

    async def thread_fork(self, conn: Connection, raw: Any, after: list) -> dict[str, Any]:
        body = params.parse(params.ThreadForkParams, raw)
        source = self._source(check_thread_id(body.threadId))
        history = [t for t in source.turns if t["status"] != "inProgress"]
        if body.lastTurnId is not None:
            ids = [t["id"] for t in history]
            if body.lastTurnId not in ids:
                raise RpcError(f"turn {body.lastTurnId} not found in thread {source.id}")
            history = history[: ids.index(body.lastTurnId) + 1]
        if body.ephemeral and not body.excludeTurns:
            raise RpcError("ephemeral thread fork requires excludeTurns: true")
        thread = self._new_thread(conn, self._overrides(body, source), body.ephemeral)
        thread.forked_from = source.id
        thread.turns = [dict(t, items=list(t["items"])) for t in history]
        thread.total_usage = dict(source.total_usage) if source.total_usage else None
        if thread.turns:
            thread.persist_history()
        after.append(lambda: conn.notify("thread/started", {"thread": thread.wire()}))
        return self._response(thread, include_turns=not body.excludeTurns)

    async def thread_read(self, conn: Connection, raw: Any, after: list) -> dict[str, Any]:
        body = params.parse(params.ThreadReadParams, raw)
        thread_id = check_thread_id(body.threadId)
        thread = self.threads.get(thread_id)
        if thread is not None:
            if body.includeTurns and not thread.persisted and not thread.turns:
                raise RpcError("list_turns is not supported yet", code=-32601)
            return {"thread": thread.wire(include_turns=body.includeTurns)}
        path = store.find_rollout(self.home, thread_id)
        if path is None:
            raise RpcError(f"thread not loaded: {thread_id}")
        return {"thread": from_rollout(path).wire(include_turns=body.includeTurns, loaded=False)}


def _read_config(home: Path) -> dict[str, Any]:
    """Defaults from ``config.toml``; a broken file is ignored like unknown keys are."""
    path = home / "config.toml"
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return {}

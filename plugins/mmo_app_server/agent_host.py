"""What every app-server host does, whether it runs a session's root or a worker job.

A host is a detached process leading its own group. It publishes its
identity before the protocol handshake, spawns the Codex app-server (its own
group too), serves a control socket, binds a thread, waits through turns and
recovers the thread when the app-server dies. Subclasses say where their
record lives (``HostFields`` names the record keys) and what a finished run
means for them.
"""

from __future__ import annotations

import os
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mmo_kernel import package_version
from mmo_kernel.host_api import (
    EvidenceLog,
    load_snapshot,
    process_start_token,
    set_process_actor,
    snapshot_catalog,
    terminate_process_groups,
)
from mmo_kernel.hosts import ControlServer, app_server_socket_path, write_partial
from mmo_kernel.plugin import ToolBridge, opt_ins_by_bridge, tool_bridge
from mmo_kernel.tools import load_tool_servers

from .approvals import ApprovalPolicy
from .client import KEEP_PENDING, AppServerClient
from .errors import AppServerError, TransportLost
from .host_controls import ControlState, check_response
from .launch import app_server_argv
from .messages import ServerRequest
from .runtime import runtime_digest
from .session import AppServerSession

WAIT_SLICE_SECONDS = 0.5
AUTO_TURN_WAIT_SECONDS = 15.0
CONTINUE_TURN_SECONDS = 25.0
"""How long ``continue`` waits for its turn to start: a loaded machine's Codex can take
several seconds, and the answer must still beat the caller's 30 s control timeout."""
CONTINUE_AFTER_LOSS = (
    "The app-server restarted while you were working; your previous turn was interrupted. "
    "Continue the task from where you left off."
)
FINALIZE_INPUT = (
    "Stop the work now and give your final answer: summarize what is done, what is not, "
    "and the evidence."
)
REMOVE_FIELD = None

# once per interpreter, at import: a warm host (``mmo_kernel.hosts.warm_host``) then does
# it before it forks, not every host it forks (reading the package's metadata, hashing
# this package's code: ~2 ms of each job's start)
package_version()
runtime_digest()


@dataclass
class TurnRequest:
    """The last ``turn/start`` a host sent, kept so a transport loss can be recovered.

    ``known`` are the thread's turn ids the host knew of before sending it, so when
    the reply was lost (``turn_id`` unknown) only a turn newer than those can be it.
    """

    text: str
    images: list[str]
    overrides: dict[str, Any]
    known: frozenset[str]
    turn_id: str | None = None


@dataclass
class _Seen:
    """Turn ids of the thread seen so far (resume and read replies, turn/start replies,
    notifications), oldest first."""

    ids: dict[str, None] = field(default_factory=dict)

    def add(self, turn_id: Any) -> None:
        if isinstance(turn_id, str) and turn_id:
            self.ids[turn_id] = None

    def add_turns(self, turns: Any) -> None:
        for turn in turns if isinstance(turns, list) else []:
            if isinstance(turn, dict):
                self.add(turn.get("id"))

    def snapshot(self) -> frozenset[str]:
        return frozenset(self.ids)


class HostStopped(Exception):
    """The host ends early on purpose (stop, pause); the caller writes the status."""


@dataclass(frozen=True)
class HostFields:
    """The record keys a host writes (roots prefix theirs with ``root_``)."""

    thread: str
    active_turn: str
    last_turn: str
    runner_pid: str
    runner_pgid: str
    runner_token: str
    app_pid: str
    app_pgid: str
    app_token: str
    socket: str
    socket_ready: str
    revision: str
    recoveries: str
    host_package: str
    host_digest: str


class AgentHost(ABC):
    """The shared turn loop; ``store``/``read`` persist, ``socket_name`` names the socket."""

    fields: HostFields
    socket_name: str
    events_path: Path
    stderr_path: Path

    def __init__(self, record: dict[str, Any], max_recoveries: int = 3) -> None:
        self.record = record
        self.client: AppServerClient | None = None
        self.app: AppServerSession | None = None
        self.thread_id: str | None = record.get(self.fields.thread)
        self.controls = ControlState(record.get(self.fields.revision) or 0)
        self.control_server: ControlServer | None = None
        self.lock = threading.RLock()
        self.event_log: EvidenceLog | None = None
        """The protocol events, fsynced before each record write rather than per line."""
        self.active_turn: str | None = None
        self.wake = threading.Event()
        self.intent: str | None = None  # "stop" | "pause" | "finalize"
        self.continue_input: str | None = None
        self.continue_waiter: Future[str] | None = None
        self.effort: str | None = None
        self.recoveries = int(record.get(self.fields.recoveries) or 0)
        self.max_recoveries = max_recoveries
        self.approval_policy = "never"
        self.on_pending: Callable[[list[dict[str, Any]]], None] | None = None
        self.bridges: dict[str, ToolBridge] = {}
        """Bridges serving this agent's tools as dynamic tools, by bridge name."""
        self.tool_owners: dict[str, ToolBridge] = {}
        self.dynamic_tools: list[dict[str, Any]] = []
        self.seen_turns = _Seen()
        self.turn_request: TurnRequest | None = None

    # -- persistence, supplied by subclasses --------------------------------

    @abstractmethod
    def store(self, **fields: Any) -> dict[str, Any]:
        """Supplied by the root and job hosts."""

    @abstractmethod
    def environment(self) -> dict[str, str]:
        """Supplied by the root and job hosts."""

    @abstractmethod
    def cwd(self) -> str:
        """Supplied by the root and job hosts."""

    @abstractmethod
    def sandbox(self) -> str:
        """Supplied by the root and job hosts."""

    def _put(self, **logical: Any) -> dict[str, Any]:
        """Store by logical field names (``thread=...``); ``None`` removes a field."""
        self.record = self.store(**{getattr(self.fields, k): v for k, v in logical.items()})
        return self.record

    # -- set-up --------------------------------------------------------------

    def publish_host(self, **extra: Any) -> None:
        """The host's identity and ``extra`` (record fields: its status, say) in one write."""
        me = os.getpid()
        identity = {"runner_pid": me, "runner_pgid": os.getpgid(0),
                    "runner_token": process_start_token(me), "host_package": package_version(),
                    "host_digest": runtime_digest()}
        self.record = self.store(**{getattr(self.fields, k): v for k, v in identity.items()},
                                 **extra)

    def start_tool_bridges(self) -> None:
        """Ask each bridge the agent's opt-ins name for dynamic tools; keep those that serve some.

        A bridge that renders its servers into Codex's config (``native_mcp``)
        serves none here and is closed at once.
        """
        spec = getattr(self, "spec", None)
        if spec is None or self.bridges:
            return
        grouped = opt_ins_by_bridge(spec.tool_mcp_servers)
        if not grouped:
            return
        servers = load_tool_servers()
        for name, opt_ins in sorted(grouped.items()):
            bridge = tool_bridge(name, env=self.environment(), stderr_dir=self.stderr_path.parent,
                                 preserve_tool_media=self.preserves_tool_media())
            tools = bridge.dynamic_tools(servers, opt_ins)
            if not tools:
                bridge.close()
                continue
            self.bridges[name] = bridge
            self.dynamic_tools.extend(tools)
            self.tool_owners.update(dict.fromkeys(bridge.alias_table(servers, opt_ins), bridge))

    def tool_call(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """An ``item/tool/call`` for the bridge that offered the tool (one bridge: always it,
        so its own message names an unknown tool)."""
        owner = self.tool_owners.get(params.get("tool"))  # type: ignore[arg-type]
        bridge = owner or next(iter(self.bridges.values()))
        return bridge.handle_tool_call(params)

    def preserves_tool_media(self) -> bool:
        """Whether the agent's route carries images back from tools (the root's as a worker's)."""
        routes, models = snapshot_catalog(load_snapshot(self.record["snapshot_hash"]))
        return routes[models[self.spec.model].route].preserves_tool_media

    def spawn_app_server(self) -> None:
        self.start_tool_bridges()
        if self.event_log is None:
            self.event_log = EvidenceLog(self.events_path)
        self.client = self.open_client(
            recorder=self.event_log.append,
            approvals=ApprovalPolicy(approval_policy=self.approval_policy),
            request_handler=self._on_server_request)
        self.app = AppServerSession(self.client)
        self.client.add_notification_listener(self._note_turn)
        recorded = (self.record.get(self.fields.app_pid), self.record.get(self.fields.app_token))
        if recorded != (self.client.pid, self.client.start_token):  # else on record already
            self.publish_app_server(self.client.pid, self.client.pgid, self.client.start_token)
        self.before_initialize()
        self.client.initialize(experimental_api=bool(self.bridges))

    def before_initialize(self) -> None:  # noqa: B027 - optional hook
        """Hook: work that can overlap the app-server's start-up (it answers ``initialize``
        only once it is up)."""

    def _note_turn(self, message: Mapping[str, Any]) -> None:
        """Remember every turn id the app-server announces (goal mode starts its own)."""
        params = message.get("params")
        if message.get("method") in ("turn/started", "turn/completed") and isinstance(
                params, dict) and isinstance(params.get("turn"), dict):
            self.seen_turns.add(params["turn"].get("id"))

    def publish_app_server(self, pid: int, pgid: int, token: str | None) -> None:
        """On record before any handshake, so a cancel during bootstrap kills it."""
        self._put(app_pid=pid, app_pgid=pgid, app_token=token)

    def open_client(self, **wiring: Any) -> AppServerClient:
        """A stdio app-server; an interactive root overrides this to listen on a socket."""
        return AppServerClient.spawn(
            app_server_argv(self.record_codex_binary()), cwd=self.cwd(), env=self.environment(),
            stderr_path=self.stderr_path, **wiring)

    @abstractmethod
    def record_codex_binary(self) -> str:
        """Supplied by the root and job hosts."""

    def start_control_server(self) -> None:
        path = app_server_socket_path(self.socket_name)
        self.control_server = ControlServer(path, self._on_control).start(replace_live=False)
        self._put(socket=str(path), socket_ready=True)

    def thread_params(self) -> dict[str, Any]:
        return {"cwd": self.cwd(), "approvalPolicy": self.approval_policy,
                "sandbox": self.sandbox()}

    def bind_thread(self, fork_from: str | None = None) -> bool:
        """Start, fork or resume the thread; True when an existing thread was resumed."""
        assert self.app is not None
        if self.thread_id:
            resumed = self.app.resume_thread(self.thread_id, self.thread_params())
            self.seen_turns.add_turns((resumed.get("thread") or {}).get("turns"))
            return True
        if fork_from:
            result = self.app.client.request("thread/fork", {"threadId": fork_from,
                                                             **self.thread_params()})
        else:
            params = self.thread_params()
            if self.dynamic_tools:
                params["dynamicTools"] = self.dynamic_tools
            result = self.app.start_thread(params)
        self.seen_turns.add_turns(result["thread"].get("turns"))
        self.thread_id = result["thread"]["id"]
        self._put(thread=self.thread_id)
        return False

    # -- turns ---------------------------------------------------------------

    def text_items(self, text: str, images: list[str] | None = None) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = [{"type": "text", "text": text, "text_elements": []}]
        items.extend({"type": "localImage", "path": image} for image in images or [])
        return items

    def start_turn(self, text: str, images: list[str] | None = None, **overrides: Any) -> str:
        """``turn/start``; the request is kept (``turn_request``) for ``recover``."""
        assert self.app is not None and self.thread_id is not None
        if self.effort and "effort" not in overrides:
            overrides["effort"] = self.effort
        request = TurnRequest(text, list(images or []), dict(overrides),
                              self.seen_turns.snapshot())
        self.turn_request = request
        turn = self.app.start_turn(self.thread_id, self.text_items(text, images),
                                   **overrides)["id"]
        request.turn_id = turn
        self.seen_turns.add(turn)
        return turn

    def start_turn_recovering(self, text: str, images: list[str] | None = None,
                              **overrides: Any) -> tuple[str | None, dict[str, Any] | None]:
        """``start_turn`` that survives a transport loss before its reply: recovered like
        a loss while waiting (``recover``), so ``(turn to wait for, None)`` or
        ``(None, terminal turn)``."""
        try:
            return self.start_turn(text, images, **overrides), None
        except TransportLost:
            return self.recover(None)

    def set_active(self, turn_id: str | None) -> None:
        with self.lock:
            self.active_turn = turn_id
        if turn_id:
            self._put(active_turn=turn_id, last_turn=turn_id)
        else:
            self._put(active_turn=REMOVE_FIELD)

    def wait_turn(self, turn_id: str) -> Any:
        """Block until the turn is terminal (raises ``TransportLost``)."""
        assert self.app is not None
        self.set_active(turn_id)
        while True:
            try:
                outcome = self.app.wait_turn_completed(turn_id, WAIT_SLICE_SECONDS)
            except TimeoutError:
                continue
            self.finish_turn(outcome)
            return outcome

    def finish_turn(self, outcome: Any) -> None:
        """The turn is over: no active turn on record, then ``on_turn_done``."""
        self.set_active(None)
        self.on_turn_done(outcome)

    def on_turn_done(self, outcome: Any) -> None:  # noqa: B027 - optional hook
        """Hook: record usage and progress of a finished turn."""

    def next_auto_turn(self, after: str) -> str | None:
        """Codex continues an active goal by itself; wait for the turn it starts."""
        assert self.app is not None and self.thread_id is not None
        deadline = time.monotonic() + AUTO_TURN_WAIT_SECONDS
        while time.monotonic() < deadline:
            latest = self.app.turns.latest_turn_id(self.thread_id)
            if latest and latest != after:
                return latest
            time.sleep(0.05)
        return None

    def goal(self) -> dict[str, Any] | None:
        assert self.app is not None and self.thread_id is not None
        return self.app.turns.goal(self.thread_id) or self.app.get_goal(self.thread_id)

    def wait_goal_work(self, turn_id: str) -> Any:
        """Follow goal turns (Codex starts them itself) until the goal stops being active."""
        while True:
            outcome = self.wait_turn(turn_id)
            if outcome.status != "completed" or self.intent in ("stop", "pause", "finalize"):
                return outcome
            goal = self.goal()
            status = goal.get("status") if goal else None
            self.on_goal_status(status)
            if status != "active":
                later = self.app.turns.latest_turn_id(self.thread_id) if self.app else None
                if later and later != turn_id:  # Codex's own turn ended the goal: it still
                    turn_id = later             # runs, and a turn/start into it is refused
                    continue
                return outcome
            following = self.next_auto_turn(turn_id)
            if following is None:
                return outcome
            turn_id = following

    def bootstrap_goal(self, apply: Callable[[], Any], turn: str | None,
                       terminal: dict[str, Any] | None,
                       ) -> tuple[str | None, dict[str, Any] | None]:
        """Set the goal (``apply``) after the first ``turn/start``, a transport loss
        recovered like one during a turn: ``(turn to wait for, None)`` or ``(None,
        terminal turn)``. A goal the lost ``thread/goal/set`` did apply is kept as it is;
        one it never applied is set now. Set on an idle thread, Codex continues the goal
        with a turn of its own: that turn is the one to wait for."""
        assert self.thread_id is not None
        try:
            apply()
            applied_now = True
        except TransportLost:
            turn, terminal = self.recover(turn)
            assert self.app is not None
            applied_now = self.app.get_goal(self.thread_id) is None
            if applied_now:
                apply()
        if terminal is not None and applied_now:
            following = self.next_auto_turn(str(terminal.get("id")))
            if following:
                return following, None
        return turn, terminal

    def on_goal_status(self, status: str | None) -> None:  # noqa: B027 - optional hook
        """Hook: persist the goal's status."""

    @abstractmethod
    def run(self) -> int:
        """The host's whole life; the process exit code."""

    def wait_for_continue(self) -> str:
        """After an interrupt the agent is paused; ``continue`` starts the next turn."""
        self.wake.clear()
        while not self.wake.wait(WAIT_SLICE_SECONDS):
            if self.intent in ("stop", "pause"):
                raise HostStopped()
        if self.intent in ("stop", "pause"):  # woken by stop/pause, not by continue
            raise HostStopped()
        return self.start_continued_turn(**self.continuation_overrides())

    def start_continued_turn(self, **overrides: Any) -> str:
        """Start the turn a ``continue`` asked for and hand its id to that control.

        The control waits on this hand-over, not on ``active_turn``: a turn that
        ends at once is never missed.
        """
        with self.lock:
            text, self.continue_input = self.continue_input or "Continue.", None
            waiter, self.continue_waiter = self.continue_waiter, None
        try:
            turn = self.start_turn(text, **overrides)
        except Exception as exc:
            if waiter is not None:
                waiter.set_exception(RuntimeError(f"the continued turn did not start: {exc}"))
            raise
        if waiter is not None:
            waiter.set_result(turn)
        return turn

    # -- recovery ------------------------------------------------------------

    def recover(self, waited_turn: str | None) -> tuple[str | None, dict[str, Any] | None]:
        """Restart the app-server on the same thread after transport loss.

        ``waited_turn`` is the turn the host was waiting for, or ``None`` when the loss
        came before the ``turn/start`` reply of ``turn_request``. Returns ``(turn to
        wait for, None)``, or ``(None, terminal turn)`` when the thread already holds
        *that* turn as terminal: no second turn/start. Another turn never stands in for
        it: an earlier turn's answer is never taken for the awaited one's. A loss
        during the recovery itself is recovered again (up to ``max_recoveries``).
        """
        while True:
            request = self.turn_request
            try:
                return self._recover_once(waited_turn)
            except TransportLost:
                if self.turn_request is not request and self.turn_request is not None:
                    waited_turn = self.turn_request.turn_id  # lost in recovery's turn/start

    def restart_app_server(self) -> None:
        """A new app-server on the same thread after a loss (one recovery); no turn."""
        self.recoveries += 1
        self._put(recoveries=self.recoveries)
        if self.recoveries > self.max_recoveries:
            raise RuntimeError(f"app-server was lost {self.recoveries} times; giving up")
        self.close_client()
        self.spawn_app_server()
        assert self.app is not None and self.thread_id is not None
        self.bind_thread()

    def _recover_once(self, waited_turn: str | None) -> tuple[str | None, dict[str, Any] | None]:
        self.restart_app_server()
        assert self.app is not None and self.thread_id is not None
        thread = self.app.read_thread(self.thread_id, include_turns=True)
        turns = [t for t in thread.get("turns") or [] if isinstance(t, dict)]
        awaited = self._awaited_turn(turns, waited_turn)
        self.seen_turns.add_turns(turns)
        if awaited is not None and awaited.get("status") in ("completed", "failed"):
            return None, awaited
        request = self.turn_request
        if awaited is None and request is not None and request.turn_id == waited_turn:
            # the thread never got the turn this host asked for: ask again, same input
            return self.start_turn(request.text, request.images, **request.overrides), None
        return self.start_turn(CONTINUE_AFTER_LOSS, **self.continuation_overrides()), None

    def _awaited_turn(self, turns: list[dict[str, Any]],
                      waited_turn: str | None) -> dict[str, Any] | None:
        """The awaited turn as the thread holds it: by id; with the id unknown (the
        ``turn/start`` reply was lost), the newest turn the host did not know before
        sending it. ``None`` when the thread does not hold it."""
        if waited_turn is not None:
            return next((t for t in reversed(turns) if t.get("id") == waited_turn), None)
        known = self.turn_request.known if self.turn_request else self.seen_turns.snapshot()
        newer = [t for t in turns if t.get("id") not in known]
        return newer[-1] if newer else None

    def continuation_overrides(self) -> dict[str, Any]:
        """``turn/start`` fields for a turn that continues interrupted work."""
        return {}

    def read_history(self) -> dict[str, Any]:
        """The thread's turns; an app-server lost meanwhile (after the turn ended, before
        its evidence was read) is restarted on the thread and asked again: the turn is
        persisted, so nothing runs twice."""
        while True:
            assert self.app is not None and self.thread_id is not None
            try:
                thread = self.app.read_thread(self.thread_id, include_turns=True)
            except TransportLost:
                self.restart_app_server()
                continue
            return {"thread_id": self.thread_id, "turns": thread.get("turns") or []}

    # -- server requests -----------------------------------------------------

    def _on_server_request(self, request: ServerRequest) -> Any:
        """Bridged tool calls go to their MCP server; anything the approval policy does
        not answer waits for a control ``respond``."""
        assert self.client is not None
        if request.method == "item/tool/call" and self.bridges:
            return self.tool_call(request.params)
        pending = self.client.pending_server_requests() + [request.public()]
        if self.on_pending is not None:
            self.on_pending(pending)
        return KEEP_PENDING

    # -- controls ------------------------------------------------------------

    def _on_control(self, request: dict[str, Any]) -> dict[str, Any]:
        action = request["action"]
        if action == "inspect":
            return self.inspect()
        handler = getattr(self, f"control_{action}", None)
        if handler is None:
            raise ValueError(f"unknown control action {action!r}")
        self.controls.consume(request.get("expected_revision"))
        self._put(revision=self.controls.revision)
        result = handler(request)
        self.control_applied(request, action)
        return result

    def control_applied(self, request: dict[str, Any], action: str) -> None:  # noqa: B027
        """Hook: acknowledge an applied control on the record."""

    def inspect(self) -> dict[str, Any]:
        return {"control_revision": self.controls.revision, "active_turn_id": self.active_turn,
                "thread_id": self.thread_id,
                "pending_requests": self.client.pending_server_requests() if self.client else []}

    def require_active(self) -> str:
        with self.lock:
            if self.active_turn is None:
                raise RuntimeError("there is no active turn")
            return self.active_turn

    def control_steer(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.app is not None and self.thread_id is not None
        turn = self.require_active()
        result = self.app.steer(self.thread_id, turn, str(request.get("input") or ""))
        return {"turn_id": result.get("turnId", turn)}

    def control_interrupt(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.app is not None and self.thread_id is not None
        self.app.interrupt(self.thread_id, self.require_active())
        return {}

    def control_continue(self, request: dict[str, Any]) -> dict[str, Any]:
        waiter: Future[str] = Future()
        with self.lock:
            if self.active_turn is not None:
                raise RuntimeError("there is an active turn; steer it instead")
            self.continue_input = str(request.get("input") or "Continue.")
            self.continue_waiter = waiter
        self.wake.set()
        try:
            return {"turn_id": waiter.result(timeout=CONTINUE_TURN_SECONDS)}
        except FutureTimeout:
            with self.lock:
                if self.continue_waiter is waiter:
                    self.continue_waiter = None
            raise RuntimeError(f"no new turn started within {CONTINUE_TURN_SECONDS:g} s") \
                from None

    def control_respond(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.client is not None
        request_id = request.get("request_id")
        pending = {str(p["id"]): p for p in self.client.pending_server_requests()}
        if str(request_id) not in pending:
            raise RuntimeError(f"invalid fields: no pending request {request_id!r}")
        original = pending[str(request_id)]
        self.client.respond(original["id"], check_response(original["method"],
                                                           request.get("response")))
        if self.on_pending is not None:
            self.on_pending(self.client.pending_server_requests())
        return {"responded": True}

    def control_compact(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.app is not None and self.thread_id is not None
        return dict(self.app.compact(self.thread_id))

    def control_set_effort(self, request: dict[str, Any]) -> dict[str, Any]:
        effort = request.get("effort")
        if not isinstance(effort, str) or not effort:
            raise RuntimeError("invalid fields: set_effort takes an effort")
        self.effort = effort
        return {"effort": effort, "applies_to": "next turn"}

    def control_stop(self, request: dict[str, Any]) -> dict[str, Any]:
        """Graceful stop: steer the active turn to finalize; never a second turn/start."""
        self.intent = "stop"
        delivered = self._steer_quietly(FINALIZE_INPUT)
        self.wake.set()
        return {"finalize_delivered": delivered}

    def control_pause(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.app is not None and self.thread_id is not None
        self.intent = "pause"
        with self.lock:
            turn = self.active_turn
        if turn is not None:
            try:
                self.app.interrupt(self.thread_id, turn)
            except AppServerError:
                pass
        self.wake.set()
        return {"pausing": True}

    def _steer_quietly(self, text: str) -> bool:
        assert self.app is not None and self.thread_id is not None
        with self.lock:
            turn = self.active_turn
        if turn is None:
            return False
        try:
            self.app.steer(self.thread_id, turn, text)
            return True
        except AppServerError:
            return False

    # -- shutdown ------------------------------------------------------------

    def close_client(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None

    def shutdown(self) -> None:
        with self.lock:
            waiter, self.continue_waiter = self.continue_waiter, None
        if waiter is not None and not waiter.done():  # answer it before the socket goes
            waiter.set_exception(RuntimeError("the host is ending; no new turn was started"))
        if self.control_server is not None:
            self.control_server.close()
        self.close_client()
        if self.event_log is not None:
            self.event_log.close()
        for bridge in self.bridges.values():
            bridge.close()
        pgid = self.record.get(self.fields.app_pgid)
        if isinstance(pgid, int):
            try:
                terminate_process_groups([pgid], grace_seconds=2.0)
            except RuntimeError:
                pass

    def partial(self, path: Path, reason: str) -> str:
        return write_partial(path, self.events_path, reason)


def host_main(host_class: Callable[[str], AgentHost], argv: list[str] | None,
              usage: str) -> int:
    """``python -m mmo_app_server.<host> ID``: build the host for ID and run it."""
    import sys

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print(f"usage: {usage}", file=sys.stderr)
        return 2
    host = host_class(args[0])
    # a job record names its agent, a session record its root: the host acts as that agent
    set_process_actor("agent", host.record.get("agent") or host.record["root_agent"])
    return host.run()


__all__ = ["AgentHost", "host_main", "FINALIZE_INPUT", "HostFields", "HostStopped", "TransportLost",
           "TurnRequest"]

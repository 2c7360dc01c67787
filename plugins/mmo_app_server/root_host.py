"""The root host: the detached controller process that owns a session's root agent.

Started as ``python -m mmo_app_server.root_host SESSION_ID`` in its own process
group. It publishes its identity before the protocol handshake, spawns the
Codex app-server (its own group too), serves the root control socket, binds
the root thread, drives turns (goal or turn mode) and writes the terminal
evidence: ``root-events.jsonl``, ``root-terminal-history.json``,
``root-result.md`` or a partial result. If the app-server dies it is
restarted and the same thread resumed; a turn already persisted as terminal
is taken from the thread, never started again.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from mmo_kernel.audit import append_audit
from mmo_kernel.control_socket import ControlServer, app_server_socket_path
from mmo_kernel.evidence import final_message, write_partial
from mmo_kernel.goals import cap_objective, goal_prompt
from mmo_kernel.processes import process_start_token, terminate_process_groups
from mmo_kernel.session_env import root_environment
from mmo_kernel.session_records import read_session_record, session_file
from mmo_kernel.session_state import HOST_FIELDS, REMOVE, transition, update_session
from mmo_kernel.state import atomic_write_json, atomic_write_text
from mmo_kernel.turn_failures import normalize_turn_failure

from .approvals import ApprovalPolicy
from .client import KEEP_PENDING, AppServerClient
from .errors import AppServerError, TransportLost
from .events import jsonl_recorder
from .host_controls import ControlState, check_response
from .launch import app_server_argv
from .messages import ServerRequest
from .runtime import runtime_digest
from .session import AppServerSession

MAX_RECOVERIES = 3
WAIT_SLICE_SECONDS = 0.5
AUTO_TURN_WAIT_SECONDS = 5.0
CONTINUE_AFTER_LOSS = (
    "The app-server restarted while you were working; your previous turn was interrupted. "
    "Continue the task from where you left off."
)
FINALIZE_INPUT = (
    "Stop the work now and give your final answer: summarize what is done, what is not, "
    "and the evidence."
)


class RootStopped(Exception):
    """The host ends early on purpose (stop, pause); the status is already written."""


class RootHost:
    """One root controller: app-server, control socket and turn loop for one session."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.record = read_session_record(session_id)
        self.events_path = session_file(session_id, "root-events.jsonl")
        self.agent = self.record["root_agent"]
        self.client: AppServerClient | None = None
        self.app: AppServerSession | None = None
        self.thread_id: str | None = self.record.get("root_thread_id")
        self.controls = ControlState(self.record.get("root_control_revision") or 0)
        self.control_server: ControlServer | None = None
        self.lock = threading.RLock()
        self.active_turn: str | None = None
        self.wake = threading.Event()
        self.intent: str | None = None  # "stop" | "pause" | "interrupt"
        self.continue_input: str | None = None
        self.recoveries = int(self.record.get("root_recovery_attempts") or 0)

    # ------------------------------------------------------------ set-up --

    def _policy(self) -> str:
        from mmo_kernel.snapshots import snapshot_profile

        spec = snapshot_profile(self.record["snapshot_hash"]).agents[self.agent]
        self.goal_budget = spec.goal_token_budget
        return spec.approval_policy

    def publish_host(self) -> None:
        me = os.getpid()
        fields: dict[str, Any] = {
            "root_pid": me, "root_pgid": os.getpgid(0), "root_start_token": process_start_token(me),
            "root_host_package_version": _package_version(),
            "root_host_runtime_digest": runtime_digest(),
        }
        if self.record["status"] == "starting":
            fields["status"] = "running"
        if not self.record.get("started_at"):
            fields["started_at"] = _now()
        self.record = update_session(self.session_id, **fields)

    def spawn_app_server(self) -> None:
        env = root_environment(self.record)
        self.client = AppServerClient.spawn(
            app_server_argv(self.record["codex_binary"]), cwd=self.record["cwd"], env=env,
            stderr_path=session_file(self.session_id, "app-server.stderr.log"),
            recorder=jsonl_recorder(self.events_path),
            approvals=ApprovalPolicy(approval_policy=self.approval_policy),
            request_handler=self._on_server_request)
        self.app = AppServerSession(self.client)
        self.record = update_session(
            self.session_id, root_app_server_pid=self.client.pid,
            root_app_server_pgid=self.client.pgid,
            root_app_server_start_token=self.client.start_token)
        self.client.initialize()

    def start_control_server(self) -> None:
        path = app_server_socket_path(f"control:root:{self.session_id}")
        self.control_server = ControlServer(path, self._on_control).start(replace_live=False)
        self.record = update_session(self.session_id, root_control_socket=str(path),
                                     root_control_socket_ready=True)

    def bind_thread(self) -> bool:
        """Start or resume the root thread; True when it already has turns to inspect."""
        assert self.app is not None
        params = {"cwd": self.record["cwd"], "approvalPolicy": self.approval_policy,
                  "sandbox": self.record.get("sandbox_mode") or "workspace-write"}
        if self.thread_id:
            self.app.resume_thread(self.thread_id, params)
            return True
        result = self.app.start_thread(params)
        self.thread_id = result["thread"]["id"]
        self.record = update_session(self.session_id, root_thread_id=self.thread_id)
        return False

    # ------------------------------------------------------------- turns --

    def _prompt_items(self, text: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = [{"type": "text", "text": text, "text_elements": []}]
        for image in self.record.get("root_images") or []:
            items.append({"type": "localImage", "path": image})
        return items

    def start_first_turn(self) -> str:
        assert self.app is not None and self.thread_id is not None
        prompt = session_file(self.session_id, "root-prompt.txt").read_text(encoding="utf-8")
        goal = self.record.get("root_execution_mode") == "goal"
        turn = self.app.start_turn(self.thread_id, self._prompt_items(
            goal_prompt(prompt) if goal else prompt))
        if goal:
            objective = cap_objective(prompt)
            self.app.set_goal(self.thread_id, objective=objective, status="active",
                              token_budget=self.goal_budget)
            self.record = update_session(self.session_id, root_goal_objective=objective,
                                         root_goal_status="active",
                                         root_goal_token_budget=self.goal_budget)
        return turn["id"]

    def start_turn(self, text: str) -> str:
        assert self.app is not None and self.thread_id is not None
        return self.app.start_turn(self.thread_id, self._prompt_items(text))["id"]

    def _set_active(self, turn_id: str | None) -> None:
        with self.lock:
            self.active_turn = turn_id
        fields: dict[str, Any] = {"active_root_turn_id": turn_id if turn_id else REMOVE,
                                  "last_active_at": _now()}
        if turn_id:
            fields["root_last_turn_id"] = turn_id
        self.record = update_session(self.session_id, **fields)

    def wait_turn(self, turn_id: str) -> Any:
        assert self.app is not None
        self._set_active(turn_id)
        while True:
            try:
                return self.app.wait_turn_completed(turn_id, WAIT_SLICE_SECONDS)
            except TimeoutError:
                continue

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

    def goal_status(self) -> str | None:
        assert self.app is not None and self.thread_id is not None
        goal = self.app.turns.goal(self.thread_id) or self.app.get_goal(self.thread_id)
        return goal.get("status") if goal else None

    def drive(self, turn_id: str) -> dict[str, Any]:
        """Wait through turns until the root is done; returns the last terminal turn."""
        goal_mode = self.record.get("root_execution_mode") == "goal"
        while True:
            outcome = self.wait_turn(turn_id)
            self._record_usage(outcome)
            if outcome.status == "failed":
                return outcome.turn
            if self.intent in ("stop", "pause"):
                return outcome.turn
            if outcome.status == "interrupted":
                turn_id = self.wait_for_continue()
                continue
            if not goal_mode:
                return outcome.turn
            status = self.goal_status()
            self.record = update_session(self.session_id, root_goal_status=status)
            if status in ("complete", "budgetLimited", None):
                return outcome.turn
            following = self.next_auto_turn(turn_id)
            if following is None:
                return outcome.turn
            turn_id = following

    def wait_for_continue(self) -> str:
        """A turn-mode interrupt pauses the root; ``continue`` starts the next turn."""
        self._set_active(None)
        self.record = update_session(self.session_id, status="paused")
        self.wake.clear()
        while not self.wake.wait(WAIT_SLICE_SECONDS):
            if self.intent in ("stop", "pause"):
                raise RootStopped()
        with self.lock:
            text, self.continue_input = self.continue_input or "Continue.", None
            self.intent = None
        self.record = update_session(self.session_id, status="running")
        return self.start_turn(text)

    def _record_usage(self, outcome: Any) -> None:
        usage = (outcome.token_usage or {}).get("total") if outcome.token_usage else None
        if isinstance(usage, dict):
            self.record = update_session(self.session_id, root_usage={
                "input_tokens": int(usage.get("inputTokens", 0)),
                "output_tokens": int(usage.get("outputTokens", 0)),
                "total_tokens": int(usage.get("totalTokens", 0)),
            })

    # ---------------------------------------------------------- recovery --

    def recover(self, waited_turn: str | None) -> tuple[str | None, dict[str, Any] | None]:
        """Restart the app-server on the same thread after transport loss.

        Returns ``(turn to wait for, None)`` or ``(None, terminal turn)`` when the
        thread already holds the waited turn as terminal (no second turn/start).
        """
        self.recoveries += 1
        self.record = update_session(self.session_id, root_recovery_attempts=self.recoveries)
        if self.recoveries > MAX_RECOVERIES:
            raise RuntimeError(f"app-server was lost {self.recoveries} times; giving up")
        self._close_client()
        self.spawn_app_server()
        assert self.app is not None and self.thread_id is not None
        self.bind_thread()
        thread = self.app.read_thread(self.thread_id, include_turns=True)
        turns = thread.get("turns") or []
        last = next((t for t in reversed(turns) if t.get("id") == waited_turn), None)
        if last is None and turns:
            last = turns[-1]
        if last is not None and last.get("status") in ("completed", "failed"):
            return None, last
        return self.start_turn(CONTINUE_AFTER_LOSS), None

    # ------------------------------------------------------------ finish --

    def finish(self, turn: dict[str, Any]) -> None:
        assert self.app is not None and self.thread_id is not None
        thread = self.app.read_thread(self.thread_id, include_turns=True)
        history = {"thread_id": self.thread_id, "turns": thread.get("turns") or []}
        atomic_write_json(session_file(self.session_id, "root-terminal-history.json"), history)
        failure = normalize_turn_failure(turn)
        if failure is not None:
            self._fail_or_suspend(failure)
            return
        persisted = next((t for t in history["turns"] if t.get("id") == turn.get("id")), turn)
        text = final_message(persisted) or final_message(turn)
        if self.intent == "stop":
            self._write_result(text) if text else None
            self._terminal("stopped", text is not None)
            return
        if self.intent == "pause":
            self._cold_paused()
            return
        if not text:
            partial = session_file(self.session_id, "root-partial-result.md")
            write_partial(partial, self.events_path,
                          "root completed without a readable terminal result")
            transition(self.session_id, "failed", result_kind="partial",
                       result_path=str(partial), partial_result_path=str(partial),
                       error="root completed without a readable terminal result")
            return
        self._write_result(text)
        transition(self.session_id, "completed", result_kind="final",
                   result_path=str(session_file(self.session_id, "root-result.md")))
        self._audit("agent_finished", agent=self.agent, status="completed")

    def _write_result(self, text: str) -> None:
        atomic_write_text(session_file(self.session_id, "root-result.md"), text)

    def _terminal(self, status: str, has_result: bool) -> None:
        fields: dict[str, Any] = {}
        if has_result:
            fields.update(result_kind="final",
                          result_path=str(session_file(self.session_id, "root-result.md")))
        else:
            partial = session_file(self.session_id, "root-partial-result.md")
            write_partial(partial, self.events_path, f"root {status}")
            fields.update(result_kind="partial", partial_result_path=str(partial),
                          result_path=str(partial))
        transition(self.session_id, status, **fields)

    def _fail_or_suspend(self, failure: dict[str, Any]) -> None:
        partial = session_file(self.session_id, "root-partial-result.md")
        write_partial(partial, self.events_path, f"root turn failed: {failure['message']}")
        fields = {"failure": failure, "partial_result_path": str(partial),
                  "result_kind": "partial", "result_path": str(partial)}
        if failure["retryable"]:
            update_session(self.session_id, status="suspended", error=failure["message"],
                           **fields)
        else:
            transition(self.session_id, "failed", error=failure["message"], **fields)

    def _cold_paused(self) -> None:
        partial = session_file(self.session_id, "root-partial-result.md")
        write_partial(partial, self.events_path, "session cold-paused")
        update_session(self.session_id, status="paused", partial_result_path=str(partial),
                       cold_pause_pending=REMOVE, **{f: REMOVE for f in HOST_FIELDS})

    def _audit(self, event: str, **fields: Any) -> None:
        run_id = self.record.get("current_run_id") or self.record.get("last_run_id") or ""
        append_audit(session_file(self.session_id, "audit.jsonl"), event, run_id, **fields)

    # ---------------------------------------------------- server requests --

    def _on_server_request(self, request: ServerRequest) -> Any:
        """Anything not auto-answered waits for an operator (control ``respond``)."""
        assert self.client is not None
        pending = self.client.pending_server_requests() + [request.public()]
        partial = session_file(self.session_id, "root-partial-result.md")
        write_partial(partial, self.events_path, "requested operator input")
        self.record = update_session(self.session_id, status="detached",
                                     pending_requests=pending,
                                     partial_result_path=str(partial))
        return KEEP_PENDING

    # ----------------------------------------------------------- controls --

    def _on_control(self, request: dict[str, Any]) -> dict[str, Any]:
        action = request["action"]
        if action == "inspect":
            return {"control_revision": self.controls.revision, "active_turn_id": self.active_turn,
                    "thread_id": self.thread_id,
                    "pending_requests": self.client.pending_server_requests()
                    if self.client else []}
        self.controls.consume(request.get("expected_revision"))
        self.record = update_session(self.session_id, root_control_revision=self.controls.revision)
        handler = getattr(self, f"_control_{action}", None)
        if handler is None:
            raise ValueError(f"unknown root control action {action!r}")
        return handler(request)

    def _control_steer(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.app is not None and self.thread_id is not None
        turn = self._require_active()
        result = self.app.steer(self.thread_id, turn, str(request.get("input") or ""))
        return {"turn_id": result.get("turnId", turn)}

    def _control_interrupt(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.app is not None and self.thread_id is not None
        self.app.interrupt(self.thread_id, self._require_active())
        return {}

    def _control_continue(self, request: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            if self.active_turn is not None:
                raise RuntimeError("the root has an active turn; steer it instead")
            self.continue_input = str(request.get("input") or "Continue.")
        self.wake.set()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.active_turn:
                return {"turn_id": self.active_turn}
            time.sleep(0.02)
        raise RuntimeError("the root did not start a new turn within 10 s")

    def _control_respond(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.client is not None
        request_id = request.get("request_id")
        pending = {str(p["id"]): p for p in self.client.pending_server_requests()}
        if str(request_id) not in pending:
            raise RuntimeError(f"invalid fields: no pending request {request_id!r}")
        original = pending[str(request_id)]
        response = check_response(original["method"], request.get("response"))
        self.client.respond(original["id"], response)
        remaining = self.client.pending_server_requests()
        fields: dict[str, Any] = {"pending_requests": remaining if remaining else REMOVE}
        if not remaining:
            fields["status"] = "running"
        self.record = update_session(self.session_id, **fields)
        return {"responded": True}

    def _control_finalize(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.app is not None and self.thread_id is not None
        self.app.steer(self.thread_id, self._require_active(), FINALIZE_INPUT)
        return {"action": "finalize"}

    def _control_compact(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.app is not None and self.thread_id is not None
        return dict(self.app.compact(self.thread_id))

    def _control_stop(self, request: dict[str, Any]) -> dict[str, Any]:
        """Graceful stop: steer the active turn to finalize; never a second turn/start."""
        assert self.app is not None and self.thread_id is not None
        self.intent = "stop"
        delivered = False
        with self.lock:
            turn = self.active_turn
        if turn is not None:
            try:
                self.app.steer(self.thread_id, turn, FINALIZE_INPUT)
                delivered = True
            except AppServerError:
                delivered = False
        self.wake.set()
        return {"finalize_delivered": delivered}

    def _control_pause(self, request: dict[str, Any]) -> dict[str, Any]:
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

    def _require_active(self) -> str:
        with self.lock:
            if self.active_turn is None:
                raise RuntimeError("the root has no active turn")
            return self.active_turn

    # -------------------------------------------------------------- run --

    def compact_only(self) -> None:
        """Compaction mode: resume the thread, compact it, leave the session cold-paused."""
        assert self.app is not None and self.thread_id is not None
        try:
            self.app.compact(self.thread_id)
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                turn = self.app.turns.latest_turn_id(self.thread_id)
                if turn:
                    self.wait_turn(turn)
                    break
                time.sleep(0.05)
        except Exception as exc:
            update_session(self.session_id, root_compaction_error=f"{exc.__class__.__name__}: {exc}")
        self._cold_paused()

    def run(self) -> int:
        self.approval_policy = self._policy()
        self.publish_host()
        try:
            self.spawn_app_server()
            self.start_control_server()
            resumed = self.bind_thread()
            if os.environ.get("MMO_ROOT_HOST_MODE") == "compact":
                self.compact_only()
                return 0
            turn_id = self.resume_point() if resumed else self.start_first_turn()
            terminal: dict[str, Any] | None = None
            while terminal is None:
                try:
                    if turn_id is None:
                        break
                    terminal = self.drive(turn_id)
                except TransportLost:
                    turn_id, terminal = self.recover(self.active_turn)
            if terminal is not None:
                self.finish(terminal)
            return 0
        except RootStopped:
            if self.intent == "pause":
                self._cold_paused()
            else:
                self._terminal("stopped", False)
            return 0
        except Exception as exc:
            self._host_failed(exc)
            return 1
        finally:
            self._shutdown()

    def resume_point(self) -> str | None:
        """After a relaunch: wait on an in-progress turn, or continue with the operator input."""
        assert self.app is not None and self.thread_id is not None
        text = self.record.get("root_continue_input") or "Continue."
        self.record = update_session(self.session_id, root_continue_input=REMOVE)
        return self.start_turn(text)

    def _host_failed(self, exc: Exception) -> None:
        message = f"{exc.__class__.__name__}: {exc}"
        try:
            partial = session_file(self.session_id, "root-partial-result.md")
            write_partial(partial, self.events_path, f"root host failed: {message}")
            update_session(self.session_id, status="suspended", error=message,
                           failure={"kind": "host_error", "retryable": True, "message": message},
                           partial_result_path=str(partial), result_kind="partial")
        except Exception:  # the record may be terminal already (cancelled): nothing to add
            pass

    def _close_client(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None

    def _shutdown(self) -> None:
        if self.control_server is not None:
            self.control_server.close()
        self._close_client()
        record = read_session_record(self.session_id)
        pgid = record.get("root_app_server_pgid")
        if isinstance(pgid, int):
            try:
                terminate_process_groups([pgid], grace_seconds=2.0)
            except RuntimeError:
                pass
        if record["status"] in ("running", "paused", "detached", "stopped"):
            try:
                update_session(self.session_id, **{f: REMOVE for f in HOST_FIELDS})
            except RuntimeError:
                pass  # terminal records keep what they have


def _now() -> str:
    from mmo_kernel.session_records import utc_now

    return utc_now()


def _package_version() -> str:
    from mmo_kernel import package_version

    return package_version()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m mmo_app_server.root_host SESSION_ID", file=sys.stderr)
        return 2
    return RootHost(args[0]).run()


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["RootHost", "main", "Path"]

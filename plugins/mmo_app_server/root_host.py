"""The root host: the detached controller that owns a session's root agent (spec 03).

Started as ``python -m mmo_app_server.root_host SESSION_ID``. On top of the
shared host loop it delivers the root prompt (with the goal harness in goal
mode), reports operator-input requests as a detached session, and writes the
root's terminal evidence: ``root-terminal-history.json``, ``root-result.md``
or a partial result. ``MMO_ROOT_HOST_MODE=compact`` only compacts the thread
and leaves the session cold-paused.
"""

from __future__ import annotations

import os
import time
from typing import Any

from mmo_kernel.host_api import (
    REMOVE,
    ROOT_HOST_FIELDS,
    atomic_write_json,
    atomic_write_text,
    audit_event,
    defer_root_completion,
    end_root_completion_deferral,
    process_matches,
    read_session_record,
    root_environment,
    session_file,
    snapshot_profile,
    terminate_process_groups,
    transition_session,
    update_session,
    utc_now,
    wait_for_recoverable_jobs,
    watch_orphaned,
)
from mmo_kernel.hosts import (
    cap_objective,
    final_message,
    goal_prompt,
    normalize_turn_failure,
    root_app_server_socket_path,
    thread_persisted,
)

from .agent_host import (
    CONTINUE_AFTER_LOSS,
    WAIT_SLICE_SECONDS,
    AgentHost,
    HostFields,
    HostStopped,
    host_main,
)
from .errors import AppServerError, TransportLost

ROOT_FIELDS = HostFields(
    thread="root_thread_id", active_turn="active_root_turn_id", last_turn="root_last_turn_id",
    runner_pid="root_pid", runner_pgid="root_pgid", runner_token="root_start_token",
    app_pid="root_app_server_pid", app_pgid="root_app_server_pgid",
    app_token="root_app_server_start_token", socket="root_control_socket",
    socket_ready="root_control_socket_ready", revision="root_control_revision",
    recoveries="root_recovery_attempts", host_package="root_host_package_version",
    host_digest="root_host_runtime_digest",
)


DEFERRED = "root completion deferred: workers are still running"
UNPERSISTED_THREAD = "no rollout found"
"""Codex's refusal to resume a thread that never ran a turn (nothing of it was saved)."""
TERMINAL_TURN = ("completed", "failed")


class RootHost(AgentHost):
    """One session's root: prompt, goal, controls and terminal evidence."""

    fields = ROOT_FIELDS

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        record = read_session_record(session_id)
        self.agent = record["root_agent"]
        self.socket_name = f"control:root:{session_id}"
        self.events_path = session_file(session_id, "root-events.jsonl")
        self.stderr_path = session_file(session_id, "app-server.stderr.log")
        self.spec = snapshot_profile(record["snapshot_hash"]).agents[self.agent]
        options = self.spec.host_options or {}
        super().__init__(record, max_recoveries=int(options.get("max_recoveries", 3)))
        self.approval_policy = self.spec.approval_policy
        self.on_pending = self._pending_changed
        self.adopt_app_server = True  # once: an app-server left by a dead host
        self.adopted = False
        self.detached_for_input = False
        """Whether this host detached the session for operator input (and so may put
        ``running`` back when it is answered); a wall detach is the caller's, never undone."""

    # -- persistence ---------------------------------------------------------

    def store(self, **fields: Any) -> dict[str, Any]:
        return update_session(self.session_id,
                              **{k: (REMOVE if v is None else v) for k, v in fields.items()})

    def environment(self) -> dict[str, str]:
        return root_environment(self.record)

    def cwd(self) -> str:
        return self.record["cwd"]

    def sandbox(self) -> str:
        return self.record.get("sandbox_mode") or self.spec.permissions

    def record_codex_binary(self) -> str:
        return self.record["codex_binary"]

    def goal_mode(self) -> bool:
        return self.record.get("root_execution_mode") == "goal"

    def on_turn_done(self, outcome: Any) -> None:
        usage = outcome.thread_usage()
        if usage is not None:
            self.store(root_usage=usage, last_active_at=utc_now())

    def on_goal_status(self, status: str | None) -> None:
        self.store(root_goal_status=status)

    def _pending_changed(self, pending: list[dict[str, Any]]) -> None:
        """A non-interactive root waiting for an operator is detached until answered."""
        pending = list({str(p["id"]): p for p in pending}.values())  # each request once
        if self.interactive():  # the user's TUI answers; the status is the client's business
            self.store(pending_requests=pending or None)
        elif pending:
            partial = session_file(self.session_id, "root-partial-result.md")
            self.partial(partial, "requested operator input")
            if read_session_record(self.session_id)["status"] == "running":
                self.detached_for_input = True
            self.record = update_session(self.session_id, status="detached",
                                         status_if=("running",), pending_requests=pending,
                                         partial_result_path=str(partial))
        else:
            # only undo this host's own detach: a wall detach meanwhile stays detached
            status_if = ("detached",) if self.detached_for_input else ()
            self.detached_for_input = False
            self.record = update_session(self.session_id, status="running",
                                         status_if=status_if, pending_requests=REMOVE)

    # -- start-up ------------------------------------------------------------

    def connect(self) -> bool:
        """Spawn (or adopt) the app-server, bind the thread, then serve the control
        socket; True when an existing thread was resumed.

        An app-server lost on the way (killed before it answered ``initialize`` or
        ``thread/start``) is restarted like any later loss, within ``max_recoveries``:
        the session proceeds instead of failing before its first turn. The control
        socket is published once the thread is bound, so a caller waiting for it
        (``root_control_socket_ready``) finds the thread the host really runs.
        """
        while True:
            try:
                self.spawn_app_server()
                resumed = self.bind_thread()
                if self.control_server is None:
                    self.start_control_server()
                return resumed
            except Exception as exc:
                if not self.app_server_lost(exc):
                    raise
            self.count_recovery()
            self.close_client()

    def app_server_lost(self, exc: Exception) -> bool:
        """A transport loss, or any failure while the app-server just spawned is dead
        (e.g. it exited before listening on its socket)."""
        if isinstance(exc, TransportLost):
            return True
        if isinstance(exc, AppServerError):
            return False
        pid = self.record.get(self.fields.app_pid)
        return isinstance(pid, int) and not process_matches(
            pid, self.record.get(self.fields.app_token))

    def count_recovery(self) -> None:
        self.recoveries += 1
        self._put(recoveries=self.recoveries)
        if self.recoveries > self.max_recoveries:
            raise RuntimeError(f"app-server was lost {self.recoveries} times; giving up")

    def bind_thread(self, fork_from: str | None = None) -> bool:
        """As for every host; but a root thread that never ran a turn was never persisted
        by Codex (``no rollout found`` once its app-server is gone): nothing of it can be
        lost, so a new thread replaces it (audit ``root_thread_replaced``) and the
        recorded prompt starts it."""
        try:
            return super().bind_thread(fork_from)
        except AppServerError as exc:
            if not (self.thread_id and not self.record.get("root_last_turn_id")
                    and UNPERSISTED_THREAD in exc.message):
                raise
        lost, self.thread_id = self.thread_id, None
        self._put(thread=None)
        super().bind_thread()
        self._audit("root_thread_replaced", previous_thread_id=lost,
                    root_thread_id=self.thread_id,
                    reason="the thread never ran a turn and was not persisted")
        return False

    def thread_turns(self) -> list[dict[str, Any]]:
        assert self.app is not None and self.thread_id is not None
        return self.app.read_thread(self.thread_id, include_turns=True).get("turns") or []

    def first_turn(self) -> tuple[str | None, dict[str, Any] | None]:
        """Deliver the recorded prompt (``start_first_turn``), also after a relaunch of a
        root that never started a turn. If the app-server is lost before the turn is on
        the thread, it is restarted and the prompt delivered then; once the thread holds
        the turn it is recovered like any other (no second ``turn/start``)."""
        self.store(root_continue_input=None)
        while True:
            try:
                return self.start_first_turn()
            except TransportLost:
                self.count_recovery()
                self.close_client()
                self.connect()
            turns = self.thread_turns()
            if turns:
                return self.after_lost_first_turn(turns[-1])

    def after_lost_first_turn(self, turn: dict[str, Any]
                              ) -> tuple[str | None, dict[str, Any] | None]:
        """The prompt's turn reached the lost app-server: take it as it is now."""
        terminal = turn if turn.get("status") in TERMINAL_TURN else None
        turn_id: str | None = None
        if terminal is None:
            turn_id = (str(turn["id"]) if turn.get("status") == "inProgress" else
                       self.start_turn(CONTINUE_AFTER_LOSS, **self.continuation_overrides()))
        if self.goal_mode():
            prompt = session_file(self.session_id, "root-prompt.txt").read_text(
                encoding="utf-8")
            objective = cap_objective(prompt)
            turn_id, terminal = self.goal_after_loss(objective, turn_id, terminal)
            self.store(root_goal_objective=objective,
                       root_goal_status=(self.goal() or {}).get("status", "active"),
                       root_goal_token_budget=self.spec.goal_token_budget)
        return turn_id, terminal

    # -- turns ---------------------------------------------------------------

    def start_first_turn(self) -> tuple[str | None, dict[str, Any] | None]:
        """``(turn to wait for, None)`` or, after a transport loss during goal bootstrap,
        ``(None, terminal turn)`` when the thread already holds the turn as terminal."""
        prompt = session_file(self.session_id, "root-prompt.txt").read_text(encoding="utf-8")
        images = self.record.get("root_images") or []
        if not self.goal_mode():
            return self.start_turn(prompt, images), None
        turn: str | None = self.start_turn(goal_prompt(prompt), images)
        objective = cap_objective(prompt)
        terminal: dict[str, Any] | None = None
        status = "active"
        try:
            self.set_root_goal(objective)
        except TransportLost:  # recovered like any other loss: no second turn/start
            turn, terminal = self.recover(turn)
            turn, terminal = self.goal_after_loss(objective, turn, terminal)
            status = (self.goal() or {}).get("status", status)
        self.store(root_goal_objective=objective, root_goal_status=status,
                   root_goal_token_budget=self.spec.goal_token_budget)
        return turn, terminal

    def set_root_goal(self, objective: str) -> None:
        assert self.app is not None and self.thread_id is not None
        self.app.set_goal(self.thread_id, objective=objective, status="active",
                          token_budget=self.spec.goal_token_budget)

    def goal_after_loss(self, objective: str, turn: str | None, terminal: dict[str, Any] | None,
                        ) -> tuple[str | None, dict[str, Any] | None]:
        """A goal the lost ``thread/goal/set`` did apply is kept as it is; one it never
        applied is set now. Set on an idle thread, Codex continues it with a turn of its
        own: that turn is the one to wait for."""
        assert self.app is not None and self.thread_id is not None
        if self.app.get_goal(self.thread_id) is not None:
            return turn, terminal
        self.set_root_goal(objective)
        if terminal is None:
            return turn, None
        following = self.next_auto_turn(str(terminal.get("id")))
        return (following, None) if following else (None, terminal)

    def resume_turn(self) -> str:
        """After a relaunch the operator's input (or a plain continue) starts the next turn."""
        text = self.record.get("root_continue_input") or "Continue."
        self.store(root_continue_input=None)
        return self.start_turn(text)

    def drive(self, turn_id: str) -> dict[str, Any]:
        """Wait through turns until the root is done; returns the last terminal turn."""
        while True:
            outcome = self.wait_goal_work(turn_id) if self.goal_mode() else self.wait_turn(turn_id)
            if outcome.status == "interrupted" and self.intent not in ("stop", "pause"):
                self.store(status="paused")
                turn_id = self.wait_for_continue()
                self.store(status="running")
                continue
            return outcome.turn

    # -- finishing -----------------------------------------------------------

    def finish(self, turn: dict[str, Any]) -> None:
        history = self.read_history()
        atomic_write_json(session_file(self.session_id, "root-terminal-history.json"), history)
        failure = normalize_turn_failure(turn)
        if failure is not None:
            self._fail_or_suspend(failure)
            return
        persisted = next((t for t in history["turns"] if t.get("id") == turn.get("id")), turn)
        text = final_message(persisted) or final_message(turn)
        if self.intent == "pause":
            self.cold_paused()
        elif self.intent == "stop":  # a stopped root's last message is a partial, never final
            self._end("stopped", None)
        elif not text:
            partial = session_file(self.session_id, "root-partial-result.md")
            self.partial(partial, "root completed without a readable terminal result")
            transition_session(self.session_id, "failed", result_kind="partial",
                               result_path=str(partial), partial_result_path=str(partial),
                               error="root completed without a readable terminal result")
        else:
            self._end("completed", text)

    def _defer_while_workers_run(self) -> None:
        """The root is not complete while recoverable workers still run (spec 03).

        Meanwhile its last message is the partial result the detached caller reads.
        """
        if not wait_for_recoverable_jobs(self.session_id, timeout_seconds=0):
            return  # nothing runs: no partial to write
        partial = session_file(self.session_id, "root-partial-result.md")
        self.partial(partial, DEFERRED)
        if defer_root_completion(self.session_id, result_kind="partial",
                                 partial_result_path=str(partial), result_path=str(partial)):
            wait_for_recoverable_jobs(self.session_id)
            end_root_completion_deferral(self.session_id)

    def _end(self, status: str, text: str | None) -> None:
        if status == "completed":
            self._defer_while_workers_run()
        if text:
            atomic_write_text(session_file(self.session_id, "root-result.md"), text)
            transition_session(self.session_id, status, result_kind="final",
                               result_path=str(session_file(self.session_id, "root-result.md")))
        else:
            partial = session_file(self.session_id, "root-partial-result.md")
            self.partial(partial, f"root {status}")
            transition_session(self.session_id, status, result_kind="partial",
                               partial_result_path=str(partial), result_path=str(partial))
        self._audit("agent_finished", agent=self.agent, status=status)

    def _fail_or_suspend(self, failure: dict[str, Any]) -> None:
        partial = session_file(self.session_id, "root-partial-result.md")
        self.partial(partial, f"root turn failed: {failure['message']}")
        fields = {"failure": failure, "partial_result_path": str(partial),
                  "result_kind": "partial", "result_path": str(partial),
                  "error": failure.get("summary") or failure["message"]}
        if failure["retryable"]:
            self.store(status="suspended", **fields)
        else:
            transition_session(self.session_id, "failed", **fields)

    def cold_paused(self) -> None:
        partial = session_file(self.session_id, "root-partial-result.md")
        self.partial(partial, "session cold-paused")
        self.store(status="paused", partial_result_path=str(partial), cold_pause_pending=None,
                   **{f: None for f in ROOT_HOST_FIELDS})

    def _audit(self, event: str, **fields: Any) -> None:
        audit_event(self.record, event, **fields)

    def _host_failed(self, exc: Exception) -> None:
        message = f"{exc.__class__.__name__}: {exc}"
        try:
            partial = session_file(self.session_id, "root-partial-result.md")
            self.partial(partial, f"root host failed: {message}")
            self.store(status="suspended", error=message, result_kind="partial",
                       failure={"kind": "host_error", "retryable": True, "message": message},
                       partial_result_path=str(partial))
        except RuntimeError:  # the record is terminal already (cancelled): nothing to add
            pass

    # -- modes ---------------------------------------------------------------

    def compact_only(self) -> None:
        """Resume the thread, compact it, leave the session cold-paused."""
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
        except Exception as exc:  # reported on the record; the session stays safely paused
            self.store(root_compaction_error=f"{exc.__class__.__name__}: {exc}")
        self.cold_paused()

    def interactive(self) -> bool:
        return self.record.get("session_kind") == "interactive"

    def spawn_app_server(self) -> None:
        super().spawn_app_server()
        if self.interactive() and self.client is not None:
            self.client.add_notification_listener(self._adopt_tui_thread)

    def _adopt_tui_thread(self, message: Any) -> None:
        """Before its first turn the root thread is not saved, so the TUI cannot resume it
        and starts a thread of its own (``tui_argv``): that thread becomes the root thread.

        Only a top-level thread (not a sub-agent's or a fork) counts, and only while the
        current root thread has no rollout: once it ran a turn the TUI resumes it instead.
        """
        params = message.get("params") if message.get("method") == "thread/started" else None
        thread = params.get("thread") if isinstance(params, dict) else None
        if not isinstance(thread, dict) or not isinstance(thread.get("id"), str):
            return
        new = thread["id"]
        if not self.thread_id:
            return  # this host is binding a thread itself: the announcement is its own
        if new == self.thread_id or any(thread.get(k) for k in (
                "parentThreadId", "forkedFromId", "attachedToThreadId", "ephemeral")):
            return
        home = self.record["homes"][self.agent]["home"]  # the app-server's CODEX_HOME
        if self.thread_id and thread_persisted(home, self.thread_id):
            return
        previous, self.thread_id = self.thread_id, new
        self._put(thread=new)
        self._audit("root_thread_replaced", previous_thread_id=previous, root_thread_id=new,
                    reason="the TUI started the thread: Codex cannot resume a thread that "
                           "never ran a turn")

    def open_client(self, **wiring: Any) -> Any:
        """The root's app-server listens on a socket, not on this host's pipes, so it
        outlives a host that dies (spec 03); the TUI of an interactive root reaches it
        there too. A live one left by a dead host is adopted once instead of replaced."""
        from .launch import app_server_argv
        from .ws_transport import adopt_listening, spawn_listening, unix_endpoint

        path = root_app_server_socket_path(self.session_id)
        pid = self.record.get("root_app_server_pid")
        token = self.record.get("root_app_server_start_token")
        if self.adopt_app_server and isinstance(pid, int) and token:
            self.adopt_app_server = False
            if process_matches(pid, token):
                try:
                    client = adopt_listening(pid, token, path, stderr_path=self.stderr_path,
                                             **wiring)
                    self.adopted = True
                    return client
                except (RuntimeError, TimeoutError, OSError):
                    terminate_process_groups([self.record.get("root_app_server_pgid") or pid],
                                             grace_seconds=2.0)
        self.adopt_app_server = False
        argv = app_server_argv(self.record_codex_binary(), listen=unix_endpoint(path))
        return spawn_listening(argv, path, cwd=self.cwd(), env=self.environment(),
                               stderr_path=self.stderr_path, on_spawn=self.publish_app_server,
                               **wiring)

    def adopted_turn(self) -> str | None:
        """The turn an adopted app-server is still running: wait for it, never start
        another beside it. An explicit continue input steers it."""
        if not self.adopted:
            return None
        assert self.app is not None and self.thread_id is not None
        turns = self.app.read_thread(self.thread_id, include_turns=True).get("turns") or []
        if not turns or turns[-1].get("status") != "inProgress":
            return None
        turn_id = str(turns[-1]["id"])
        text = self.record.get("root_continue_input")
        self.store(root_continue_input=None)
        if text and text != "Continue.":
            self.app.steer(self.thread_id, turn_id, text)
        return turn_id

    def serve_interactive(self) -> None:
        """The user's TUI drives the thread; keep app-server, thread and controls alive.

        Ends only through a control (``stop``/``pause`` raise ``HostStopped``);
        ``continue`` runs one turn; a lost app-server is restarted on the thread.
        """
        while True:
            if not self.wake.wait(WAIT_SLICE_SECONDS):
                if self.client is not None and self.client.transport_lost is not None:
                    self.reconnect_interactive()
                continue
            if self.intent in ("stop", "pause"):
                raise HostStopped()
            self.wake.clear()
            try:
                self.wait_turn(self.start_continued_turn())
            except TransportLost:
                self.reconnect_interactive()

    def reconnect_interactive(self) -> None:
        self.recoveries += 1
        self.store(root_recovery_attempts=self.recoveries)
        if self.recoveries > self.max_recoveries:
            raise RuntimeError(f"app-server was lost {self.recoveries} times; giving up")
        self.set_active(None)
        self.close_client()
        self.spawn_app_server()
        self.bind_thread()

    def run(self) -> int:
        fields = {"started_at": utc_now()} if not self.record.get("started_at") else {}
        self.publish_host(**fields)
        f = ROOT_FIELDS  # session deleted (its state dir, say): retire the app-server, exit
        watch_orphaned([session_file(self.session_id, "session.json")], lambda: self.record,
                       [(f.app_pid, f.app_pgid, f.app_token)], lambda: [
                           self.record.get(f.socket), root_app_server_socket_path(self.session_id)])
        # only a session still ``starting``: the caller may have detached it (wall) meanwhile
        self.record = update_session(self.session_id, status="running", status_if=("starting",))
        try:
            resumed = self.connect()
            if self.interactive() and os.environ.get("MMO_ROOT_HOST_MODE") != "compact":
                self.serve_interactive()
            if os.environ.get("MMO_ROOT_HOST_MODE") == "compact":
                self.compact_only()
                return 0
            terminal: dict[str, Any] | None = None
            turn_id: str | None = self.adopted_turn()
            if turn_id is None:
                if resumed and self.thread_turns():
                    turn_id = self.resume_turn()
                else:  # a new thread, or one whose first turn never started
                    turn_id, terminal = self.first_turn()
            while terminal is None and turn_id is not None:
                try:
                    terminal = self.drive(turn_id)
                except TransportLost:
                    turn_id, terminal = self.recover(self.active_turn or turn_id)
            if terminal is not None:
                self.finish(terminal)
            return 0
        except HostStopped:
            if self.intent == "pause":
                self.cold_paused()
            else:
                self._end("stopped", None)
            return 0
        except Exception as exc:
            self._host_failed(exc)
            return 1
        finally:
            self.shutdown()
            self._clear_host_fields()

    def _clear_host_fields(self) -> None:
        record = read_session_record(self.session_id)
        if record["status"] in ("running", "paused", "detached"):
            try:
                self.store(**{f: None for f in ROOT_HOST_FIELDS})
            except RuntimeError:
                pass


def main(argv: list[str] | None = None) -> int:
    return host_main(RootHost, argv, "python -m mmo_app_server.root_host SESSION_ID")


if __name__ == "__main__":
    raise SystemExit(main())

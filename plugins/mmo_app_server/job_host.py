"""The job host: the detached runner that owns one worker job (spec 04, 05).

Started as ``python -m mmo_app_server.job_host JOB_ID`` with the agent's
environment (its caller token included). On top of the shared host loop it
runs the job's contract transport — which turns carry an ``outputSchema``,
the single repair turn — goal budgets and finalization, and publishes
``result.md`` (exactly the final message), ``result.json`` when the contract
validated, ``terminal-history.json`` and, for writers, the captured patch.
"""

from __future__ import annotations

import os
from typing import Any

from mmo_kernel.contracts import check_result
from mmo_kernel.host_api import (
    JOB_HOST_FIELDS,
    atomic_write_json,
    atomic_write_text,
    audit_event,
    capture_job_patch,
    job_file,
    read_job_record,
    read_session_record,
    session_file,
    snapshot_profile,
    transition_job,
    update_job,
    utc_now,
    watch_orphaned,
)
from mmo_kernel.hosts import (
    ControlServer,
    app_server_socket_path,
    final_message,
    goal_prompt,
    normalize_turn_failure,
)
from mmo_kernel.plugin import get_driver

from .agent_host import AgentHost, HostFields, HostStopped, host_main
from .errors import AppServerError, TransportLost
from .launch import app_server_argv

JOB_FIELDS = HostFields(
    thread="app_server_thread_id", active_turn="active_turn_id", last_turn="last_turn_id",
    runner_pid="runner_pid", runner_pgid="runner_pgid", runner_token="runner_start_token",
    app_pid="app_server_pid", app_pgid="app_server_pgid", app_token="app_server_start_token",
    socket="control_socket_path", socket_ready="control_socket_ready",
    revision="control_revision", recoveries="recovery_attempts",
    host_package="host_package_version", host_digest="host_runtime_digest",
)
FINAL_RESULT_INPUT = (
    "The goal is complete. Now give only the final result as JSON that satisfies the "
    "required output schema."
)
PERSISTED_THREAD_NOTE = (
    "The work is on a persisted app-server thread and can be continued with `continue`."
)
Started = tuple[str | None, dict[str, Any] | None]
"""``(turn to wait for, None)`` or ``(None, terminal turn)`` (see ``AgentHost.recover``)."""
CONTINUE_AFTER_COMPACTION = (
    "Your context was compacted while you were working; your previous turn was interrupted "
    "for it. Continue the task from where you left off."
)


class JobHost(AgentHost):
    """One worker job: turns by contract transport, goal budget, result publication."""

    fields = JOB_FIELDS

    def __init__(self, job_id: str) -> None:
        self.job_id = job_id
        record = read_job_record(job_id)
        self.session = read_session_record(record["session_id"])
        self.socket_name = f"control:job:{job_id}"
        self.events_path = job_file(job_id, "events.jsonl")
        self.stderr_path = job_file(job_id, "stderr.log")
        self.spec = snapshot_profile(record["snapshot_hash"]).agents[record["agent"]]
        options = self.spec.host_options or {}
        super().__init__(record, max_recoveries=int(options.get("max_recoveries", 3)))
        self.approval_policy = record.get("approval_policy") or self.spec.approval_policy
        self.schema = record.get("output_contract")
        name = record.get("contract_transport")
        self.transport = get_driver("contract_transports", name) if self.schema and name else None
        self.on_pending = self._pending_changed
        self.retired = False
        self.compaction_requested = False
        self.unpublished: dict[str, Any] = {}
        """Record fields that go with the host's next write (``store``): its control
        socket's, written with its thread. A host that ends before names no socket."""

    # -- persistence ---------------------------------------------------------

    def store(self, **fields: Any) -> dict[str, Any]:
        record = update_job(self.job_id, **{**self.unpublished, **fields})
        self.unpublished = {}
        return record

    def environment(self) -> dict[str, str]:
        return dict(os.environ)

    def cwd(self) -> str:
        return self.record.get("cwd") or self.session["cwd"]

    def sandbox(self) -> str:
        return self.record.get("mode") or "read-only"

    def record_codex_binary(self) -> str:
        return self.session["codex_binary"]

    def publish_app_server(self, pid: int, pgid: int, token: str | None) -> None:
        """The job record also names the argv it runs (``command``, spec 04): one write
        with the app-server's identity, on record before any handshake."""
        f = self.fields
        self.record = self.store(command=app_server_argv(self.record_codex_binary()),
                                 **{f.app_pid: pid, f.app_pgid: pgid, f.app_token: token})

    def goal_mode(self) -> bool:
        return self.record.get("execution_mode") == "goal"

    def finish_turn(self, outcome: Any) -> None:
        """No active turn, and the turn's usage, in one record write."""
        with self.lock:
            self.active_turn = None
        usage = outcome.thread_usage()
        self.record = self.store(**{self.fields.active_turn: None},
                                 **({} if usage is None else {"usage": usage}))

    def before_initialize(self) -> None:
        """Listen on the control socket while the app-server starts; the record names it
        with the thread (``run``), so no control reaches a host without one."""
        if self.control_server is None:
            path = app_server_socket_path(self.socket_name)
            self.control_server = ControlServer(path, self._on_control).start(replace_live=False)
            f = self.fields
            self.unpublished.update({f.socket: str(path), f.socket_ready: True})

    def on_goal_status(self, status: str | None) -> None:
        self.store(goal_status=status)

    def control_applied(self, request: dict[str, Any], action: str) -> None:
        """Acknowledge exactly the pending revision this host applied."""
        record = read_job_record(self.job_id)
        if (record.get("last_control_status") == "pending"
                and record.get("control_revision") == request.get("revision")):
            self.store(last_control_status="applied")

    def _pending_changed(self, pending: list[dict[str, Any]]) -> None:
        if pending:
            self.store(status="waiting", pending_requests=pending)
        else:
            self.store(status="running", pending_requests=None)

    # -- controls specific to jobs ------------------------------------------

    def control_detach(self, request: dict[str, Any]) -> dict[str, Any]:
        self.store(status="detached")
        return {"detached": True}

    def control_finalize(self, request: dict[str, Any]) -> dict[str, Any]:
        """Ask for the final result now: steer a turn-mode turn, or end goal work."""
        self.intent = "finalize"
        if self.goal_mode():
            with self.lock:
                turn = self.active_turn
            if turn is not None and self.app is not None and self.thread_id is not None:
                self.app.interrupt(self.thread_id, turn)
        else:
            self._steer_quietly(str(request.get("instruction") or
                                    "Finish now and give your final answer."))
        self.wake.set()
        return {"action": "finalize"}

    def control_compact(self, request: dict[str, Any]) -> dict[str, Any]:
        """Compact now when idle; with an active turn, interrupt it, compact, then continue.

        Codex compacts only an idle thread, so the work turn is interrupted and
        the job loop (``work``) compacts and starts a continuation turn.
        """
        assert self.app is not None and self.thread_id is not None
        with self.lock:
            turn = self.active_turn
            self.compaction_requested = turn is not None
        if turn is None:
            return super().control_compact(request)
        try:
            self.app.interrupt(self.thread_id, turn)
        except AppServerError:  # the turn ended in between: the thread is idle now
            with self.lock:
                self.compaction_requested = False
            return super().control_compact(request)
        return {"compaction": "after_interrupt", "interrupted_turn_id": turn}

    def _take_compaction(self) -> bool:
        with self.lock:
            requested, self.compaction_requested = self.compaction_requested, False
        return requested

    def compact_then_continue(self, interrupted: str) -> str:
        """Compact the idle thread, wait for the compaction turn, start the next work turn."""
        assert self.app is not None and self.thread_id is not None
        self.app.compact(self.thread_id)
        compaction = self.next_auto_turn(interrupted)
        if compaction is not None:
            self.wait_turn(compaction)
        self.store(compacted_at=utc_now())
        return self.start_turn(CONTINUE_AFTER_COMPACTION, **self.continuation_overrides())

    # -- turns ---------------------------------------------------------------

    def overrides(self, final: bool) -> dict[str, Any]:
        if self.transport is None:
            return {}
        return self.transport.turn_overrides(self.schema, final=final)

    def continuation_overrides(self) -> dict[str, Any]:
        """In turn mode every turn may be the one that produces the result."""
        return self.overrides(final=not self.goal_mode())

    def with_contract(self, text: str) -> str:
        """``text`` as the agent receives it: a transport whose schema travels as text
        (``validated_text``) appends the schema, so a model can answer with a valid result."""
        if self.transport is None:
            return text
        return self.transport.task_text(text, self.schema)

    def first_turn(self) -> Started:
        """Deliver the task (and, in goal mode, set the goal); a transport loss on the way
        is recovered on the thread like one during a turn."""
        task = self.with_contract(job_file(self.job_id, "prompt.txt").read_text(encoding="utf-8"))
        images = self.record.get("attachments") or []
        if not self.goal_mode():
            return self.start_turn_recovering(task, images, **self.overrides(final=True))
        recoveries = self.recoveries
        turn, terminal = self.start_turn_recovering(goal_prompt(task), images)
        turn, terminal = self.bootstrap_goal(self._set_goal, turn, terminal)
        status = "active"
        if self.recoveries != recoveries:  # the goal may have moved on while we recovered
            status = (self.goal() or {}).get("status") or status
        self.store(goal_status=status)
        return turn, terminal

    def _set_goal(self) -> None:
        assert self.app is not None and self.thread_id is not None
        self.app.set_goal(self.thread_id, objective=self.record["goal_objective"],
                          status="active", token_budget=self.record.get("goal_token_budget"))

    def resumed_turn(self) -> Started | None:
        """A relaunch carries the control that caused it (``continue`` or ``finalize``)."""
        request = self.record.get("resume_request") or {}
        self.store(resume_request=None)
        if request.get("effort"):
            self.effort = request["effort"]
        if request.get("action") == "finalize":
            self.intent = "finalize"
            return None
        return self.start_turn_recovering(str(request.get("input") or "Continue."),
                                          **self.continuation_overrides())

    def work_from(self, started: Started) -> Any:
        """``work`` on a started turn, or the terminal turn a recovery already found."""
        turn_id, terminal = started
        if terminal is not None:
            return _Outcome(terminal)
        assert turn_id is not None
        return self.work(turn_id)

    def work(self, turn_id: str) -> Any:
        """Wait through the work turns; returns the outcome the result comes from."""
        while True:
            try:
                outcome = (self.wait_goal_work(turn_id) if self.goal_mode()
                           else self.wait_turn(turn_id))
            except TransportLost:
                next_turn, terminal = self.recover(self.active_turn or turn_id)
                if terminal is not None:
                    return _Outcome(terminal)
                assert next_turn is not None
                turn_id = next_turn
                continue
            if (outcome.status == "interrupted"
                    and self.intent not in ("stop", "pause", "finalize")
                    and self._take_compaction()):
                turn_id = self.compact_then_continue(str(outcome.turn.get("id") or turn_id))
                continue
            if (outcome.status == "interrupted"
                    and self.intent not in ("stop", "pause", "finalize")):
                self.store(status="paused")
                turn_id = self.wait_for_continue()
                self.store(status="running")
                continue
            return outcome

    def final_turn(self, text: str) -> Any:
        """The strict final turn (goal completion or ``finalize``) on the same thread."""
        return self.work_from(self.start_turn_recovering(self.with_contract(text),
                                                         **self.overrides(final=True)))

    # -- results -------------------------------------------------------------

    def publish(self, turn: dict[str, Any], *, budget_limited: bool = False,
                finalized_partial: bool = False) -> None:
        history = self.read_history()
        atomic_write_json(job_file(self.job_id, "terminal-history.json"), history)
        persisted = next((t for t in history["turns"] if t.get("id") == turn.get("id")), turn)
        text = final_message(persisted) or final_message(turn) or ""
        check = check_result(text, self.schema) if self.schema else None
        if (check is not None and not check.valid and self.transport is not None
                and self.transport.repairs and self.record.get("contract_enforcement") == "strict"
                and not self.record.get("contract_repair_attempted")):
            self.store(contract_repair_attempted=True)
            repair = self.transport.repair_text(check.error, self.schema)
            outcome = self.work_from(self.start_turn_recovering(repair))
            self.publish(outcome.turn, budget_limited=budget_limited,
                         finalized_partial=finalized_partial)
            return
        self._write_result(text, check, budget_limited, finalized_partial)

    def _write_result(self, text: str, check: Any, budget_limited: bool,
                      finalized_partial: bool = False) -> None:
        atomic_write_text(job_file(self.job_id, "result.md"), text)
        fields: dict[str, Any] = {"result_path": str(job_file(self.job_id, "result.md")),
                                  "result_kind": "final", "result_state": "unread"}
        status = "completed"
        if check is not None:
            fields["contract_valid"] = check.valid
            if check.valid:
                atomic_write_json(job_file(self.job_id, "result.json"), check.value)
                fields["structured_result_path"] = str(job_file(self.job_id, "result.json"))
            elif self.record.get("contract_enforcement") == "warn":
                status = "completed_with_warnings"
                fields["warning"] = f"result does not satisfy the warn contract: {check.error}"
            else:
                partial = job_file(self.job_id, "partial-result.md")
                atomic_write_text(partial, text)
                self._end("failed", error=f"strict contract still invalid: {check.error}",
                          result_kind="partial", partial_result_path=str(partial),
                          result_path=str(partial), contract_valid=False)
                return
        if budget_limited:
            status = "completed_with_warnings"
            fields["warning"] = ("goal budget reached; published the fully validated strict "
                                 "result of the last terminal turn")
        if finalized_partial:
            status = "completed_with_warnings"
            fields["warning"] = ("finalized after suspension: the result comes from a final "
                                 "turn; the earlier partial result is kept")
        if self.record.get("mode") == "workspace-write":
            fields.update(self._capture_patch())
            if read_job_record(self.job_id)["status"] in ("failed",):
                return  # the patch capture failed the job (out-of-scope mutation)
        self._end(status, **fields)

    def _capture_patch(self) -> dict[str, Any]:
        if self.record.get("mode") != "workspace-write":
            return {}
        capture_job_patch(self.job_id)
        return {}

    def suspend(self, reason: str, failure: dict[str, Any] | None = None,
                **fields: Any) -> None:
        """Retire first, then say ``suspended``: a job that looks suspended never has a host
        that answers, so ``continue``/``finalize`` relaunch it (spec 04)."""
        partial = job_file(self.job_id, "partial-result.md")
        self.partial(partial, f"{reason}\n{PERSISTED_THREAD_NOTE}")
        update = {"result_kind": "partial", "partial_result_path": str(partial), **fields}
        if failure is not None:
            update["failure"] = failure
            update["error"] = failure.get("summary") or failure["message"]
        self.shutdown()
        transition_job(self.job_id, "suspended", **update)

    def shutdown(self) -> None:
        """Once: the control socket, the app-server group and the bridge are retired."""
        if not self.retired:
            self.retired = True
            super().shutdown()

    def _end(self, status: str, **fields: Any) -> None:
        transition_job(self.job_id, status, **fields)
        audit_event(self.session, "agent_finished", job_id=self.job_id,
                    agent=self.record["agent"], status=status)

    def handle_failure(self, turn: dict[str, Any]) -> bool:
        failure = normalize_turn_failure(turn)
        if failure is None:
            return False
        if failure["retryable"]:
            self.suspend(f"turn failed: {failure['message']}", failure)
        else:
            partial = job_file(self.job_id, "partial-result.md")
            self.partial(partial, f"turn failed: {failure['message']}")
            self._end("failed", failure=failure,
                      error=failure.get("summary") or failure["message"],
                      result_kind="partial", partial_result_path=str(partial))
        return True

    # -- the run ------------------------------------------------------------

    def complete(self, outcome: Any) -> None:
        """Decide what a finished work phase means for the job."""
        if self.handle_failure(outcome.turn):
            return
        if self.intent == "pause":
            self.cold_paused()
            return
        if self.intent == "stop":
            self._stopped()
            return
        goal = self.goal() if self.goal_mode() else None
        status = goal.get("status") if goal else None
        final_due = self.goal_mode() and (status == "complete" or self.intent == "finalize")
        if status == "budgetLimited" and self.intent != "finalize":
            self._budget_limited(outcome)
            return
        if self.goal_mode() and self.transport is not None and final_due \
                and self.transport.turn_overrides(self.schema, final=True):
            final = self.final_turn(FINAL_RESULT_INPUT)
            if not self.handle_failure(final.turn):
                self.publish(final.turn, budget_limited=status == "budgetLimited")
            return
        self.publish(outcome.turn, budget_limited=status == "budgetLimited")

    def _budget_limited(self, outcome: Any) -> None:
        text = final_message(outcome.turn) or ""
        check = check_result(text, self.schema) if self.schema else None
        self.store(goal_status="budgetLimited")
        strict = self.record.get("contract_enforcement") == "strict"
        if check is not None and check.valid and strict:
            self.publish(outcome.turn, budget_limited=True)
            return
        self.suspend("goal budget reached before a valid result; `finalize` runs the strict "
                     "final turn on the same thread")

    def _stopped(self) -> None:
        partial = job_file(self.job_id, "partial-result.md")
        self.partial(partial, "job stopped")
        self._end("stopped", result_kind="partial", partial_result_path=str(partial))

    def cold_paused(self) -> None:
        partial = job_file(self.job_id, "partial-result.md")
        self.partial(partial, f"job cold-paused\n{PERSISTED_THREAD_NOTE}")
        self.store(status="paused", partial_result_path=str(partial), cold_pause_pending=None,
                   **{f: None for f in JOB_HOST_FIELDS})

    def run(self) -> int:
        fields: dict[str, Any] = {}
        if self.record["status"] == "queued":
            fields["status"] = "running"
        if not self.record.get("started_at"):
            fields["started_at"] = utc_now()
        self.publish_host(**fields)
        f = JOB_FIELDS  # job or session deleted (its state dir, say): retire, exit
        watch_orphaned([job_file(self.job_id, "metadata.json"),
                        session_file(self.record["session_id"], "session.json")],
                       lambda: self.record, [(f.app_pid, f.app_pgid, f.app_token)],
                       lambda: [self.record.get(f.socket) or self.unpublished.get(f.socket)])
        try:
            self.spawn_app_server()
            if self.control_server is None:
                self.start_control_server()
            resumed = self.bind_thread(fork_from=self.record.get("fork_from_thread_id"))
            if self.unpublished:  # the control socket, with a resumed thread
                self.record = self.store()
            started = self.resumed_turn() if resumed else self.first_turn()
            if started is None:  # finalize of a suspended job: the strict final turn
                final = self.final_turn(FINAL_RESULT_INPUT)
                if not self.handle_failure(final.turn):
                    self.publish(final.turn, finalized_partial=True)
                return 0
            self.complete(self.work_from(started))
            return 0
        except HostStopped:
            if self.intent == "pause":
                self.cold_paused()
            else:
                self._stopped()
            return 0
        except Exception as exc:
            self.suspend(f"job host failed: {exc.__class__.__name__}: {exc}",
                         {"kind": "host_error", "retryable": True,
                          "message": f"{exc.__class__.__name__}: {exc}"})
            return 1
        finally:
            self.shutdown()


class _Outcome:
    """A terminal turn read back from the thread after recovery (no notification came)."""

    def __init__(self, turn: dict[str, Any]) -> None:
        self.turn = turn
        self.status = turn.get("status")
        self.token_usage = None


def main(argv: list[str] | None = None) -> int:
    return host_main(JobHost, argv, "python -m mmo_app_server.job_host JOB_ID")


if __name__ == "__main__":
    raise SystemExit(main())

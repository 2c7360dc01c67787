"""The kill matrix: SIGKILL one MMO component at one phase of a delegating session.

Components: the root host, a job host, the root app-server, a job app-server,
the root's ``mmo mcp`` (the ``mmo_mesh`` server its Codex started) and the
controlling ``mmo run`` — each killed with its whole process group (all of
them lead one). Phases: root starting, worker running, worker finishing,
integration in progress (harness.py says how each is held).

Cells that do not exist, and why:

- job host / job app-server / ``mmo mcp`` at *root starting*: none of them exists
  before the root's first turn.
- job host / job app-server at *integration*: the job finished (its host retired)
  before its patch can be integrated.
- root app-server, ``mmo run`` and ``mmo mcp`` at *worker finishing*: the root side is
  in the same ``agents_wait`` as at *worker running*; only the worker's state differs,
  and these kills do not touch it. (``root_host@worker_finishing`` stays because the
  root's turn then completes while no host watches, which *worker running* never
  reaches.)
- ``mmo run`` at *integration*: ``mmo run`` only watches the session record, so its
  loss is the same at every phase once the root's turn runs (``mmo_run@worker_running``).

Variants: the root host dies before it published itself (``root_starting_unpublished``,
session still ``starting``) or after (``root_starting``, app-server initializing); the
root host dies while the root's completion is deferred for a running worker
(``worker_running_deferred``, session ``detached``); the integrating ``mmo mcp`` dies
after the patch was applied and before ``integrated`` was written
(``integration_applied``).

After every trial (evidence.py): every record parses, no admitted job lost, thread
ids unchanged, no duplicate ``turn/start``, no process left once the session ended,
and the session ends ``completed`` — by itself, or after one ``mmo continue`` from
the continuable state the kill left (a session whose root host died reads as
``suspended``), as issue 13 says it should. Two trials end the session the
other way a user would, ``mmo cancel`` / ``mmo stop`` after a kill, and check that
nothing of it is left.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
from faults.evidence import (
    audit,
    describe,
    idle_warm_host,
    job_problems,
    record_problems,
    rollout_turns,
    thread_ids,
    thread_problems,
    trial_processes,
    turn_start_problems,
)
from faults.harness import (
    GREETING,
    INIT_DELAY_SECONDS,
    OUT_FILE,
    PHASES,
    Hold,
    Trial,
    mcp_items,
)
from support.waiting import wait_until

from mmo_kernel.jobs.records import TERMINAL_JOB_STATUSES
from mmo_kernel.sessions.records import TERMINAL_SESSION_STATUSES


@dataclass(frozen=True)
class Cell:
    """One kill and what must follow it.

    - ``continues``: the session needs exactly one ``mmo continue`` (True), none
      (False), or may take either path (None).
    - ``gate``: when the worker may finish: right after the kill (``kill``), once a
      continued root host has re-bound its thread so it adopts the turn still running
      (``rebound``), or not before the trial ends (``end``).
    - ``wait_root_turn``: continue only after the root's turn ended with no host watching.
    - ``job``: ``untouched`` (completes on its own), ``relaunched`` (its host died: the
      root's ``agent_continue`` resumes it on the same thread), ``recovered`` (its
      app-server died: the host restarts it on the same thread), ``recovered_persisted``
      (the same after the turn was persisted terminal: that turn is the result, no other
      turn), ``cancelled``, ``terminal`` (any terminal status).
    - ``integrated``: whether the patch ends up in the user's workspace (None: either,
      but consistently with the record).
    - ``end``: how the user ends the session after the kill: ``continue`` whatever is
      continuable until it completes, or ``stop``/``cancel`` it.
    """

    component: str
    phase: str
    script: str = "recovering"
    continues: bool | None = False
    gate: str = "kill"
    wait_root_turn: bool = False
    job: str = "untouched"
    root_recovered: bool = False
    integrated: bool | None = True
    end: str = "continue"

    @property
    def id(self) -> str:
        return f"{self.component}@{self.phase}" + ("" if self.end == "continue" else
                                                   f"+{self.end}")

    @property
    def final_status(self) -> str:
        return {"continue": "completed", "stop": "stopped", "cancel": "cancelled"}[self.end]


CELLS = [
    # -- root starting: no root thread yet -------------------------------------------
    Cell("root_host", "root_starting_unpublished", script="plain", continues=True),
    Cell("root_host", "root_starting", script="plain", continues=True),
    Cell("root_app_server", "root_starting", script="plain", continues=None),
    Cell("mmo_run", "root_starting", script="plain"),
    # -- worker running: the writer's turn holds; the root waits in agents_wait ---------
    Cell("root_host", "worker_running", continues=True, gate="rebound"),
    Cell("job_host", "worker_running", job="relaunched"),
    Cell("root_app_server", "worker_running", root_recovered=True, integrated=False),
    Cell("job_app_server", "worker_running", job="recovered"),
    Cell("mmo_mcp", "worker_running", integrated=False),
    Cell("mmo_run", "worker_running"),
    Cell("root_host", "worker_running_deferred", script="deferred", continues=True,
         integrated=False),
    # -- worker finishing: the turn is persisted terminal, its host not yet told --------
    Cell("job_host", "worker_finishing", job="relaunched"),
    Cell("job_app_server", "worker_finishing", job="recovered_persisted"),
    Cell("root_host", "worker_finishing", continues=True, wait_root_turn=True),
    # -- integration in progress ---------------------------------------------------------
    Cell("root_host", "integration", script="plain", continues=True, wait_root_turn=True),
    Cell("root_app_server", "integration", script="plain", root_recovered=True,
         integrated=None),
    Cell("mmo_mcp", "integration", script="plain", integrated=False),
    Cell("mmo_mcp", "integration_applied", script="plain", integrated=None),
    # -- the user ends the session instead: nothing of it may be left running -----------
    Cell("root_host", "worker_running", end="cancel", gate="end", continues=None,
         job="cancelled", integrated=False),
    Cell("mmo_run", "worker_running", end="stop", gate="end", job="terminal",
         integrated=None),
]


def _drive(trial: Trial, cell: Cell) -> dict:
    """From the kill to the end: settle, ``mmo continue`` what is continuable, settle."""
    if cell.gate == "kill":
        trial.open_gate()
    if cell.end == "stop":  # at once: graceful, the workers are asked to finalize
        trial.control("stop", "--grace", "20")
        return trial.settle()
    record = trial.settle()
    if cell.end == "cancel":
        trial.control("cancel")
        return trial.settle()
    for _ in range(2):
        if record["status"] in TERMINAL_SESSION_STATUSES:
            break
        if cell.wait_root_turn:
            trial.wait_root_turn_done()
        mark = len(trial.root_events())
        if trial.continue_session().returncode != 0:
            break
        if cell.gate == "rebound":
            trial.wait_rebound(mark)
        trial.open_gate()
        record = trial.settle()
    trial.open_gate()
    return record


def _continue_problems(trial: Trial, cell: Cell) -> list[str]:
    problems = [f"`mmo {c.args[1]}` failed (exit {c.returncode}): "
                f"{(c.stderr or c.stdout).strip()[-400:]}"
                for c in trial.continued + trial.controls if c.returncode != 0]
    if cell.component == "root_host" and trial.settled[:1] != ["suspended"]:
        problems.append(f"a session whose root host died must read as `suspended`, "
                        f"it settled {trial.settled[:1]} (statuses: {trial.statuses})")
    count = len(trial.continued)
    if cell.continues is True and count != 1:
        problems.append(f"expected one `mmo continue` from a continuable state, ran {count} "
                        f"(statuses: {trial.statuses})")
    if cell.continues is False and count:
        problems.append(f"the session stopped although nothing it needs was lost "
                        f"(statuses: {trial.statuses}); it needed `mmo continue`")
    return problems


def _job_problems(trial: Trial, cell: Cell, job: dict | None) -> list[str]:
    if job is None:
        return ["the root never spawned its writer"]
    problems = []
    expected = {"cancelled": ("cancelled",), "terminal": TERMINAL_JOB_STATUSES}.get(
        cell.job, ("completed",))
    if job["status"] not in expected:
        problems.append(f"job {job['job_id']} ended {job['status']}: "
                        f"{job.get('error') or job.get('failure')}")
    events = audit(trial.state_dir, trial.sid)
    resumed = [e for e in events if e["event"] == "agent_resumed"
               and e.get("job_id") == job["job_id"]]
    turns = rollout_turns(trial.state_dir, job.get("app_server_thread_id") or "")
    if cell.job == "relaunched":
        first = (mcp_items(trial.root_events(), "agents_wait") or [{}])[0]
        waited = (first.get("result") or {}).get("structuredContent") or {}
        if waited.get("timed_out_waiting") is not False or \
                job["job_id"] not in waited.get("changed_job_ids", []):
            problems.append("agents_wait did not return the job's suspension as a change "
                            f"(issue 13 item 1): {json.dumps(waited)[:300]}")
        if not resumed:
            problems.append("the job was not continued on its thread (no agent_resumed)")
    if cell.job in ("recovered", "recovered_persisted"):
        if not job.get("recovery_attempts"):
            problems.append("the job host did not recover its app-server by itself")
        if resumed:
            problems.append("the job needed a relaunch although only its app-server died")
    if cell.job == "recovered_persisted" and len(turns) != 1:
        problems.append(f"the persisted terminal turn was not taken as the result: "
                        f"{[(t['id'], t['status']) for t in turns]}")
    return problems


def _integration_problems(trial: Trial, cell: Cell, job: dict | None) -> list[str]:
    """After a read of the job (what ``mmo job show`` or the mesh does), the patch is in
    the user's workspace exactly when the job says it is integrated.

    (A worker whose turn was cut short and continued after an app-server loss may end
    with an empty patch: the stand-in does not redo a write in a continuation turn.)"""
    path = trial.workspace / OUT_FILE
    applied = path.is_file()
    state = (job or {}).get("result_state")
    changed = ((job or {}).get("patch") or {}).get("changed_paths") or []
    problems = []
    if applied and path.read_text() != GREETING + "\n":
        problems.append(f"{OUT_FILE} holds a torn change: {path.read_text()!r}")
    if cell.integrated is not None and (state == "integrated") != cell.integrated:
        problems.append(f"expected the patch {'' if cell.integrated else 'not '}integrated; "
                        f"result_state is {state}")
    if applied != (state == "integrated" and OUT_FILE in changed):
        problems.append(f"the workspace {'has' if applied else 'lacks'} {OUT_FILE} but the "
                        f"job says result_state={state}, changed_paths={changed}")
    if job and state == "accepted" and OUT_FILE in changed:
        problems += _retry_problems(trial, job, applied)
    return problems


def _retry_problems(trial: Trial, job: dict, applied: bool) -> list[str]:
    """An accepted patch the kill left unintegrated is not lost: integrating it again
    works. One the kill left applied but unrecorded is never applied twice: the retry
    refuses and changes nothing."""
    from mmo_kernel.jobs.workspace import integrate_patch

    try:
        integrate_patch(job["job_id"], "retry after the kill", trial.sid, "lead")
    except Exception as exc:  # noqa: BLE001 - a refusal is right only when applied
        if not applied:
            return [f"the accepted patch can no longer be integrated: {exc}"]
    else:
        if applied:
            return ["a retried integration applied the patch a second time"]
        return [] if (trial.workspace / OUT_FILE).is_file() else [
            "the retried integration did not apply the patch"]
    problems = []
    if (trial.workspace / OUT_FILE).read_text() != GREETING + "\n":
        problems.append("the refused retry changed the workspace")
    if trial.job()["result_state"] != "accepted":
        problems.append("the refused retry changed the job record")
    return problems


def _leftover_problems(trial: Trial, marker: str) -> list[str]:
    """Once the session has ended nothing of it runs (the shared gateway aside: the
    fixture stops it; and the state dir's warm host once none of its hosts runs: it
    exits on its own when idle)."""
    gateway = json.loads((trial.state_dir / "gateway" / "gateway.json").read_text())["pid"]

    def left() -> list:
        return [p for p in trial_processes(trial.state_dir, marker, {gateway})
                if not idle_warm_host(p)]

    try:
        wait_until(lambda: not left(), 30, "the trial's processes to exit", poll=0.25)
    except AssertionError:
        return [f"processes left after the session ended: {describe(left())}"]
    return []


@pytest.mark.parametrize("cell", CELLS, ids=lambda c: c.id)
def test_kill(cell: Cell, faults_env, mmo_git_workspace, tmp_path, mmo_process_guard):
    """Reach the phase, SIGKILL the component's group, drive the session to its end
    the way a user would, then check everything the kill could have broken."""
    trial = Trial(faults_env.state_dir, mmo_git_workspace, tmp_path, cell.script)
    hold = Hold()
    problems: list[str] = []
    try:
        delay = {"FAKE_CODEX_APP_SERVER_INITIALIZE_DELAY": INIT_DELAY_SECONDS}
        trial.start(**(delay if cell.phase == "root_starting" else {}))
        try:
            PHASES[cell.phase](trial, hold)
            before = thread_ids(trial.state_dir, trial.sid)
            seen = set(trial.job_ids())
            victim = trial.kill(cell.component)
        finally:
            hold.release()
        record = _drive(trial, cell)
        trial.finish_run()
        if record["status"] != cell.final_status:
            problems.append(f"session ended {record['status']} (statuses: {trial.statuses}): "
                            f"{record.get('error') or record.get('failure')}")
            trial.cleanup()  # the cancel a user would do: nothing may be left then either
        if cell.root_recovered and not record.get("root_recovery_attempts"):
            problems.append("the root host did not recover its app-server by itself")
        problems += _continue_problems(trial, cell)
        problems += _leftover_problems(trial, mmo_process_guard.marker)
        job = trial.loaded_job()
        problems += record_problems(trial.state_dir)
        problems += job_problems(trial.state_dir, trial.sid, seen | set(trial.job_ids()))
        problems += thread_problems(trial.state_dir, trial.sid, before)
        problems += turn_start_problems(trial.state_dir, trial.sid)
        problems += _job_problems(trial, cell, job)
        problems += _integration_problems(trial, cell, job)
    finally:
        trial.cleanup()
    assert not problems, (f"{cell.id} (killed group {victim.pgid}: {victim.cmdline}):\n- "
                          + "\n- ".join(problems))

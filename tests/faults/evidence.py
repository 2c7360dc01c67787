"""What must hold after every kill trial, read from the state dir and the stand-in's rollouts.

Each check returns a list of problems (empty when it holds), so one trial
reports everything that broke at once:

- every record parses, through MMO's own strict readers and models;
- every admitted job still has its record, and none was admitted twice;
- thread ids never change (and no agent ever got a second thread);
- no ``turn/start`` was repeated for a turn (none joined a running turn, none
  re-sent a prompt the thread already had, none followed a turn that had
  already completed when the app-server was lost);
- no process of the trial is left once the session has ended.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import psutil

from mmo_kernel.jobs.records import read_job_record
from mmo_kernel.sessions.records import read_run_record, read_session_record, run_ids
from mmo_kernel.testing import GUARD_ENV

AUDIT_KEYS = {"event", "at", "run_id"}
EVENT_KEYS = {"recorded_at", "direction", "message"}
CONTINUE_AFTER_LOSS_PREFIX = "The app-server restarted while you were working"


# ------------------------------------------------------------- records --


def _jsonl_problems(path: Path) -> list[str]:
    """Every line a JSON object, the file ending in a newline (one write per line: a
    SIGKILL cannot tear one), MMO's rows carrying their contract keys."""
    raw = path.read_bytes()
    if not raw:
        return []
    problems = [] if raw.endswith(b"\n") else [f"{path}: last line is torn"]
    keys = AUDIT_KEYS if path.name == "audit.jsonl" else (
        EVENT_KEYS if path.name.endswith("events.jsonl") else set())
    for number, line in enumerate(raw.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            problems.append(f"{path}: line {number} does not parse: {exc}")
            continue
        if not isinstance(row, dict) or not keys <= row.keys():
            problems.append(f"{path}: line {number} is not a {sorted(keys)} row")
    return problems


def record_problems(state_dir: Path) -> list[str]:
    """Sessions, runs and jobs through MMO's readers; every JSON and JSONL file under them."""
    problems: list[str] = []
    sessions, jobs = state_dir / "sessions", state_dir / "jobs"
    for entry in sorted(sessions.iterdir()) if sessions.is_dir() else []:
        if entry.name.startswith("."):
            continue
        try:
            read_session_record(entry.name)
            runs = run_ids(entry.name)
            if len(runs) != 1:
                problems.append(f"{entry}: {len(runs)} runs, a session has exactly one")
            for run in runs:
                read_run_record(entry.name, run)
        except Exception as exc:  # noqa: BLE001 - every failure is a finding
            problems.append(f"{entry}: {type(exc).__name__}: {exc}")
    for entry in sorted(jobs.iterdir()) if jobs.is_dir() else []:
        if entry.name.startswith("."):
            continue
        try:
            read_job_record(entry.name)
        except Exception as exc:  # noqa: BLE001
            problems.append(f"{entry}: {type(exc).__name__}: {exc}")
    for root in (sessions, jobs):
        if not root.is_dir():
            continue
        for path in sorted(root.rglob("*.json")):
            try:
                json.loads(path.read_bytes())
            except ValueError as exc:
                problems.append(f"{path}: does not parse: {exc}")
        for path in sorted(root.rglob("*.jsonl")):
            problems.extend(_jsonl_problems(path))
    return problems


def audit(state_dir: Path, session_id: str) -> list[dict[str, Any]]:
    path = state_dir / "sessions" / session_id / "audit.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def job_problems(state_dir: Path, session_id: str, seen: set[str]) -> list[str]:
    """Every job admitted (audited ``agent_started``, or seen during the trial) has its
    record; none was admitted twice."""
    started = [e["job_id"] for e in audit(state_dir, session_id) if e["event"] == "agent_started"]
    problems = [f"job {j} was admitted {started.count(j)} times"
                for j in sorted(set(started)) if started.count(j) > 1]
    for job_id in sorted(set(started) | seen):
        if not (state_dir / "jobs" / job_id / "metadata.json").is_file():
            problems.append(f"job {job_id} was admitted but its record is gone")
    return problems


# ------------------------------------------------------------- threads --


def rollouts(state_dir: Path) -> dict[str, Path]:
    """``thread id -> rollout file`` for every thread the stand-in persisted in any home."""
    found = {}
    for path in (state_dir / "sessions").rglob("rollout-*.jsonl"):
        found[path.stem[-36:]] = path
    return found


def rollout_turns(state_dir: Path, thread_id: str) -> list[dict[str, Any]]:
    """The thread's turns as the stand-in persisted them (its own reader)."""
    from mmo_codex_standin.store import read_rollout

    path = rollouts(state_dir).get(thread_id)
    return read_rollout(path)["turns"] if path else []


def thread_ids(state_dir: Path, session_id: str) -> dict[str, str | None]:
    """``{"root": root thread, <job id>: job thread}`` as recorded now."""
    ids = {"root": read_session_record(session_id).get("root_thread_id")}
    jobs = state_dir / "jobs"
    for entry in sorted(jobs.iterdir()) if jobs.is_dir() else []:
        if (entry / "metadata.json").is_file():
            ids[entry.name] = read_job_record(entry.name).get("app_server_thread_id")
    return ids


def thread_problems(state_dir: Path, session_id: str, before: dict[str, str | None]
                    ) -> list[str]:
    """A recorded thread id never changes, and each agent run has exactly one thread."""
    after = thread_ids(state_dir, session_id)
    problems = [f"{who}: thread {old} became {after.get(who)}"
                for who, old in before.items() if old and after.get(who) != old]
    recorded = {t for t in after.values() if t}
    extra = sorted(set(rollouts(state_dir)) - recorded)
    if extra:
        problems.append(f"threads no record names (a second thread was started): {extra}")
    return problems


# ----------------------------------------------------------- turn/start --


def _turn_starts(path: Path) -> list[tuple[str | None, str | None]]:
    """``(thread id, turn id)`` per ``turn/start`` MMO sent in an events log; the turn id
    is ``None`` when no answer came (request ids restart with every client, so an answer
    belongs to the latest request with its id)."""
    if not path.is_file():
        return []
    starts: list[tuple[str | None, str | None]] = []
    pending: dict[Any, int] = {}
    for line in path.read_text().splitlines():
        row = json.loads(line) if line.strip() else {}
        message = row.get("message") or {}
        if row.get("direction") == "sent" and "id" in message and "method" in message:
            pending.pop(message["id"], None)
            if message["method"] == "turn/start":
                pending[message["id"]] = len(starts)
                starts.append(((message.get("params") or {}).get("threadId"), None))
        elif row.get("direction") == "received" and "method" not in message:
            index = pending.pop(message.get("id"), None)
            if index is not None:
                turn = ((message.get("result") or {}).get("turn") or {}).get("id")
                starts[index] = (starts[index][0], turn)
    return starts


def turn_start_problems(state_dir: Path, session_id: str) -> list[str]:
    """No ``turn/start`` joined a running turn, re-sent a thread's first prompt, or
    re-ran work the thread had already completed before a loss."""
    logs = [state_dir / "sessions" / session_id / "root-events.jsonl"]
    logs += sorted((state_dir / "jobs").glob("*/events.jsonl"))
    problems = []
    sent_per_thread: dict[str, int] = {}
    for log in logs:
        starts = _turn_starts(log)
        turn_ids = [turn for _, turn in starts if turn]
        for turn in sorted(set(turn_ids)):
            if turn_ids.count(turn) > 1:
                problems.append(f"{log.name}: {turn_ids.count(turn)} turn/start answered with "
                                f"the same turn {turn}")
        for thread, _ in starts:
            if thread:
                sent_per_thread[thread] = sent_per_thread.get(thread, 0) + 1
    for thread, sent in sorted(sent_per_thread.items()):
        turns = rollout_turns(state_dir, thread)
        if sent > len(turns):
            problems.append(f"thread {thread}: {sent} turn/start for {len(turns)} turns "
                            "(a turn/start joined a running turn)")
        inputs = [t.get("input_text", "") for t in turns]
        if inputs and inputs[0] in inputs[1:]:
            problems.append(f"thread {thread}: its first prompt was sent again")
        for previous, turn in zip(turns, turns[1:], strict=False):
            if (turn.get("input_text", "").startswith(CONTINUE_AFTER_LOSS_PREFIX)
                    and previous.get("status") == "completed"):
                problems.append(f"thread {thread}: turn {turn['id']} re-ran the work of turn "
                                f"{previous['id']}, which had completed before the loss")
    return problems


# ----------------------------------------------------------- processes --


def trial_processes(state_dir: Path, marker: str, exclude: set[int]) -> list[psutil.Process]:
    """Live processes of this trial: their environment names its state dir or carries
    the test's process-guard marker, or their command line names the state dir."""
    needles = (f"MMO_STATE_DIR={state_dir}".encode(), f"{GUARD_ENV}={marker}".encode())
    me, found = os.getpid(), []
    for proc in psutil.process_iter():
        if proc.pid == me or proc.pid in exclude:
            continue
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            with open(f"/proc/{proc.pid}/environ", "rb") as handle:
                environ = handle.read().split(b"\0")
            if any(n in environ for n in needles) or str(state_dir) in " ".join(proc.cmdline()):
                found.append(proc)
        except (OSError, psutil.Error):
            continue
    return found


def idle_warm_host(proc: psutil.Process) -> bool:
    """The state dir's warm host (``mmo_kernel.hosts.warm_host``) with no live host of its
    own: shared like the gateway, not a process of the trial's session."""
    from mmo_kernel.hosts.warm_host import SERVER_NAME

    try:
        return proc.name() == SERVER_NAME and all(
            child.status() == psutil.STATUS_ZOMBIE for child in proc.children())
    except psutil.Error:
        return False


def describe(procs: list[psutil.Process]) -> str:
    names = []
    for proc in procs:
        try:
            names.append(f"pid {proc.pid} ({' '.join(proc.cmdline())[:140]})")
        except psutil.Error:
            names.append(f"pid {proc.pid}")
    return ", ".join(names)

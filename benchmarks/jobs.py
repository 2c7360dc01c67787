"""Per-job orchestration cost: MMO's spawn -> terminal against a bare JSON-RPC client.

Run: ``.venv/bin/python benchmarks/jobs.py [--reps 12] [--wake 10] [--batch 50] [--quick]``

Everything runs on the deterministic stand-in (``mmo-codex-standin``), offline,
in private temp state/config dirs:

* **overhead** — the same one-turn task ("say hi", read-only) run ``--reps``
  times both ways, interleaved (the order alternates per repetition) so
  background load on a shared machine hits both alike:
  MMO: ``api.spawn_job`` then ``api.wait_for_jobs`` until it returns the job
  terminal; bare: a JSON-RPC client (``mmo_codex_standin.fixtures``) starts
  ``mmo-codex-standin app-server`` and sends what the job host sends
  (``initialize``, ``thread/start``, ``turn/start``) until ``turn/completed``.
  Both include starting the app-server process; neither includes retiring it
  (each repetition waits, untimed, for the job host to exit). Reports p50/p99
  of both, the paired delta (MMO minus bare of the same repetition) and the
  ratio, plus where MMO's time goes, from the job record and its events log
  (the host's first message, the app-server's ``initialize`` reply,
  ``turn/completed``, ``finished_at``), and, measured apart after the first
  repetitions, a fresh interpreter and the job host's imports.
* **wake-up** — a job held by ``FAKE_HOLD_UNTIL=<file>`` is waited on; a timer
  creates the file; latency = ``wait_for_jobs`` returning minus the job
  record's ``finished_at`` (stamped just before the terminal record is
  published, so the publication itself is included). One job at a time.
* **batch** — ``api.spawn_jobs`` with ``--batch`` held jobs: time from the call
  to every record ``running`` (the target), and to every job having its turn
  started on its app-server (``active_turn_id``), for information.
* **memory** — with the batch live, the USS (``psutil`` ``memory_full_info``)
  of each job host process (MMO's own cost per worker) beside the stand-in
  app-server's (a real Codex app-server is far larger).

Targets (issue 15): overhead delta p50 <= 60 ms, batch of 50 all ``running``
within 3 s, job host USS <= 10 MiB.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import psutil
from _bench import load, machine_line, pct, summary

BENCH = "jobs"
AUTH = '{"OPENAI_API_KEY": null, "tokens": null, "last_refresh": null}\n'
TASK = "say hi"
AGENT = "plain"
PROFILE_TOML = """\
schema_version = 1
id = "bench-jobs"
description = "Benchmark team: a lead and one plain read-only worker on the offline model."
root_agent = "lead"

[coordination]
max_depth = 1
max_active_agents = {capacity}
max_active_writers = 1

[agents.lead]
model = "local_scripted__scripted"
permissions = "workspace-write"
execution_mode = "turn"
can_spawn = ["plain"]

[agents.plain]
model = "local_scripted__scripted"
permissions = "read-only"
execution_mode = "turn"
"""
SKILL = """---
name: mmo-orchestration
description: How the benchmark team delegates.
---

Spawn workers with `agent_spawn` and wait with `agents_wait`.
"""
OVERHEAD_TARGET_MS = 60.0
BATCH_TARGET_S = 3.0
USS_TARGET_MIB = 10.0
MIB = 1024 * 1024
PHASE_SPAWN = "spawn_job call (admit, record, launch the host)"
PHASE_HOST = "spawn_job return to the host's first message"
PHASE_APP = "app-server start to initialize reply"
PHASE_TURN = "initialize reply to turn/completed"
HOST_IMPORTS = "import mmo_kernel.state.redaction, mmo_app_server.job_host"
"""What ``python -m mmo_kernel.state.redaction mmo_app_server.job_host ID`` imports first."""
IMPORT_SAMPLES = 5
"""Repetitions that also time a fresh interpreter and the host's imports (each costs ~2 s)."""
KEEP_ENV = frozenset({"MMO_TEST_PROCESS_GUARD"})
"""Kept from the caller: the test suite's process guard finds leftovers by it."""


# ------------------------------------------------------------------ setup ---

def prepare(work: Path, capacity: int) -> dict[str, Path]:
    """Private MMO dirs, a profile, a workspace; the process environment points at them."""
    dirs = {name: work / name for name in ("state", "config", "codex-home", "bare-home", "home",
                                           "xdg-state", "xdg-config", "ws", "profile", "hold")}
    for path in dirs.values():
        path.mkdir(mode=0o700, parents=True)
    for home in ("codex-home", "bare-home"):
        (dirs[home] / "auth.json").write_text(AUTH)
        os.chmod(dirs[home] / "auth.json", 0o600)
    profile = dirs["profile"]
    (profile / "profile.toml").write_text(PROFILE_TOML.format(capacity=capacity))
    (profile / "skill.md").write_text(SKILL)
    (profile / "agents").mkdir()
    for agent in ("lead", "plain"):
        (profile / "agents" / f"{agent}.md").write_text(
            f"# Role: {agent}\n\nDo the task you are given and answer briefly.\n")
    for name in [n for n in os.environ if n.startswith("MMO_") and n not in KEEP_ENV]:
        del os.environ[name]  # a caller's identity or dirs must not leak into the run
    os.environ.update(
        MMO_STATE_DIR=str(dirs["state"]), MMO_CONFIG_DIR=str(dirs["config"]),
        CODEX_HOME=str(dirs["codex-home"]), HOME=str(dirs["home"]),
        XDG_STATE_HOME=str(dirs["xdg-state"]), XDG_CONFIG_HOME=str(dirs["xdg-config"]),
        MMO_CODEX_BIN=str(standin()))
    return dirs


def standin() -> Path:
    return Path(sys.executable).with_name("mmo-codex-standin")


def wall(stamp: str) -> float:
    return datetime.fromisoformat(stamp).timestamp()


def job_record(job_id: str) -> dict[str, Any]:
    from mmo_kernel.jobs.records import read_job_record

    return read_job_record(job_id)


def wait_host_gone(record: dict[str, Any], timeout: float = 60) -> None:
    """A finished host still retires its app-server; let it exit before the next sample."""
    from mmo_kernel.state.processes import process_matches, reap_spawned

    deadline = time.monotonic() + timeout
    while process_matches(record.get("runner_pid"), record.get("runner_start_token")):
        if time.monotonic() > deadline:
            raise RuntimeError(f"job host {record.get('runner_pid')} did not exit")
        time.sleep(0.02)
    reap_spawned()


# --------------------------------------------------------------- overhead ---

def bare_once(dirs: dict[str, Path]) -> dict[str, float]:
    """One one-turn task on a fresh stand-in app-server through a bare JSON-RPC client."""
    from mmo_codex_standin.fixtures import StdioAppServer

    env = dict(os.environ, CODEX_HOME=str(dirs["bare-home"]))
    start = time.perf_counter()
    client = StdioAppServer([str(standin()), "app-server"], env, dirs["ws"])
    try:
        client.call("initialize", {"clientInfo": {"name": "bench", "version": "1"}}, timeout=120)
        client.send({"method": "initialized"})
        ready = time.perf_counter()
        thread = client.start_thread(cwd=str(dirs["ws"]), approvalPolicy="never",
                                     sandbox="read-only")
        turn = client.run_turn(thread, TASK, timeout=120)
        end = time.perf_counter()
        if turn.get("status") != "completed":
            raise RuntimeError(f"bare turn ended {turn.get('status')}")
    finally:
        client.close()
    return {"total": (end - start) * 1000, "initialized": (ready - start) * 1000}


def events(record: dict[str, Any]) -> list[dict[str, Any]]:
    path = Path(record["events_path"])
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def phases(record: dict[str, Any], t0: float, spawned: float, returned: float) -> dict[str, float]:
    """Milliseconds of each phase of one MMO job, from wall-clock stamps (see module doc)."""
    rows = events(record)
    first_sent = next(wall(r["recorded_at"]) for r in rows if r["direction"] == "sent")
    init_reply = next(wall(r["recorded_at"]) for r in rows
                      if r["direction"] == "received" and r["message"].get("id") == 1)
    completed = next(wall(r["recorded_at"]) for r in rows
                     if r["message"].get("method") == "turn/completed")
    finished = wall(record["finished_at"])
    marks = [(PHASE_SPAWN, t0, spawned),
             (PHASE_HOST, spawned, first_sent),
             (PHASE_APP, first_sent, init_reply),
             (PHASE_TURN, init_reply, completed),
             ("turn/completed to finished_at", completed, finished),
             ("finished_at to wait return", finished, returned)]
    return {name: (b - a) * 1000 for name, a, b in marks}


def import_cost() -> dict[str, float]:
    """A fresh interpreter, and one importing what the job host imports before it runs."""
    out = {}
    for name, code in (("interpreter", "pass"), ("imports", HOST_IMPORTS)):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        out[name] = (time.perf_counter() - start) * 1000
    out["imports"] -= out["interpreter"]
    return out


def mmo_once(session_id: str) -> tuple[dict[str, float], dict[str, float]]:
    from mmo_kernel import api

    t0 = time.time()
    start = time.perf_counter()
    job_id = api.spawn_job(session_id, "lead", None, AGENT, task=TASK)["job_id"]
    spawned = time.time()
    waited = api.wait_for_jobs([job_id], session_id, 120)
    end = time.perf_counter()
    returned = time.time()
    if waited["unfinished"] or waited["results"][job_id]["status"] != "completed":
        raise RuntimeError(f"MMO job {job_id} did not complete: {waited}")
    record = job_record(job_id)
    wait_host_gone(record)
    return {"total": (end - start) * 1000}, phases(record, t0, spawned, returned)


def overhead(args: argparse.Namespace, dirs: dict[str, Path], session_id: str) -> dict[str, Any]:
    bare: list[dict[str, float]] = []
    mmo: list[dict[str, float]] = []
    marks: list[dict[str, float]] = []
    imports: list[dict[str, float]] = []
    loads = []
    for rep in range(args.warmup + args.reps):
        order = ("bare", "mmo") if rep % 2 == 0 else ("mmo", "bare")
        row: dict[str, Any] = {}
        for which in order:
            row[which] = bare_once(dirs) if which == "bare" else mmo_once(session_id)
        loads.append(load())
        if rep >= args.warmup and len(imports) < IMPORT_SAMPLES:
            imports.append(import_cost())
        if rep >= args.warmup:
            bare.append(row["bare"])
            mmo.append(row["mmo"][0])
            marks.append(row["mmo"][1])
            print(f"  rep {rep - args.warmup + 1}/{args.reps}: bare {row['bare']['total']:.0f} ms,"
                  f" mmo {row['mmo'][0]['total']:.0f} ms, load {loads[-1]:.2f}", flush=True)
    b = [x["total"] for x in bare]
    m = [x["total"] for x in mmo]
    delta = [mi - bi for mi, bi in zip(m, b, strict=True)]
    return {"bare": b, "mmo": m, "delta": delta, "marks": marks, "loads": loads,
            "bare_init": [x["initialized"] for x in bare], "imports": imports}


def report_overhead(res: dict[str, Any], reps: int) -> None:
    b, m, d = res["bare"], res["mmo"], res["delta"]
    print(f"\none-turn task, spawn -> terminal, {reps} interleaved repetitions "
          f"(load {min(res['loads']):.2f}-{max(res['loads']):.2f})")
    print(f"{'':28}{'p50':>9}{'p99':>9}{'mean':>9}")
    for name, values in (("bare JSON-RPC client ms", b), ("MMO spawn->terminal ms", m),
                         ("delta (MMO - bare) ms", d)):
        print(f"{name:28}{pct(values, .5):9.1f}{pct(values, .99):9.1f}"
              f"{statistics.mean(values):9.1f}")
    ratio = pct(m, .5) / pct(b, .5)
    print(f"ratio p50 MMO / bare: {ratio:.2f}x")
    bare_phase = {PHASE_APP: res["bare_init"],
                  PHASE_TURN: [t - i for t, i in zip(b, res["bare_init"], strict=True)]}
    print("where the time goes (p50 per phase, ms; consecutive phases, they sum to ~ the total):")
    print(f"  {'phase':48}{'MMO':>9}{'bare':>9}")
    for name in res["marks"][0]:
        same = bare_phase.get(name)
        print(f"  {name:48}{pct([x[name] for x in res['marks']], .5):9.1f}"
              + (f"{pct(same, .5):9.1f}" if same else ""))
    interp = pct([x["interpreter"] for x in res["imports"]], .5)
    imports = pct([x["imports"] for x in res["imports"]], .5)
    print(f"  the host's start, measured apart after {len(res['imports'])} of the repetitions: "
          f"a fresh interpreter {interp:.1f} ms, then its imports {imports:.1f} ms "
          f"({HOST_IMPORTS!r})")
    summary(BENCH, "host_imports_ms", imports)
    delta_p50 = pct(d, .5)
    print(f"target overhead delta p50 <= {OVERHEAD_TARGET_MS:.0f} ms: "
          f"{'met' if delta_p50 <= OVERHEAD_TARGET_MS else 'NOT met'} ({delta_p50:.1f} ms)")
    summary(BENCH, "overhead_delta_p50_ms", delta_p50, f"<={OVERHEAD_TARGET_MS:.0f}",
            delta_p50 <= OVERHEAD_TARGET_MS)
    summary(BENCH, "overhead_delta_p99_ms", pct(d, .99))
    summary(BENCH, "overhead_ratio_p50", ratio)


# ---------------------------------------------------------------- wake-up ---

def held_task(hold: Path) -> str:
    return f"{TASK} FAKE_HOLD_UNTIL={hold}"


def wait_for(predicate, timeout: float, what: str, interval: float = 0.01) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} within {timeout:.0f} s")
        time.sleep(interval)


def wake_once(dirs: dict[str, Path], session_id: str, index: int) -> float:
    """Milliseconds from the held job's ``finished_at`` to ``wait_for_jobs`` returning."""
    from mmo_kernel import api

    hold = dirs["hold"] / f"wake-{index}"
    job_id = api.spawn_job(session_id, "lead", None, AGENT, task=held_task(hold))["job_id"]
    wait_for(lambda: job_record(job_id).get("active_turn_id"), 120, "the held turn to start")
    timer = threading.Timer(0.15, hold.touch)
    timer.start()
    waited = api.wait_for_jobs([job_id], session_id, 120)
    returned = time.time()
    timer.join()
    record = job_record(job_id)
    if waited["unfinished"] or record["status"] != "completed":
        raise RuntimeError(f"held job {job_id} did not complete: {waited}")
    wait_host_gone(record)
    return (returned - wall(record["finished_at"])) * 1000


def report_wake(samples: list[float]) -> None:
    p50, p99 = pct(samples, .5), pct(samples, .99)
    print(f"\nwake-up, job terminal (finished_at) -> wait_for_jobs returns, {len(samples)} jobs: "
          f"p50 {p50:.1f} ms, p99 {p99:.1f} ms (woken by the watch on the jobs' directories; "
          "50 ms polls without it)")
    summary(BENCH, "wakeup_p50_ms", p50)
    summary(BENCH, "wakeup_p99_ms", p99)


# ------------------------------------------------------- batch and memory ---

def uss(pid: int | None) -> float | None:
    try:
        return psutil.Process(pid).memory_full_info().uss / MIB
    except (psutil.Error, TypeError, ValueError):
        return None


def batch(args: argparse.Namespace, dirs: dict[str, Path], session_id: str) -> dict[str, Any]:
    from mmo_kernel import api

    hold = dirs["hold"] / "batch"
    specs = [{"agent": AGENT, "task": held_task(hold)} for _ in range(args.batch)]
    load_before = load()
    start = time.perf_counter()
    accepted = api.spawn_jobs(specs, session_id, "lead")["accepted"]
    returned = time.perf_counter() - start
    ids = [job["job_id"] for job in accepted]
    wait_for(lambda: all(job_record(j)["status"] == "running" for j in ids), 300,
             "every batch job running")
    running = time.perf_counter() - start
    wait_for(lambda: all(job_record(j).get("active_turn_id") for j in ids), 600,
             "every batch job to start its turn", interval=0.05)
    turns = time.perf_counter() - start
    time.sleep(1.0)  # let every host settle into waiting on its turn
    records = [job_record(j) for j in ids]
    hosts = [uss(r.get("runner_pid")) for r in records]
    apps = [uss(r.get("app_server_pid")) for r in records]
    hold.touch()
    waited = api.wait_for_jobs(ids, session_id, 600)
    if waited["unfinished"]:
        raise RuntimeError(f"batch jobs did not finish: {waited['unfinished']}")
    for job_id in ids:
        wait_host_gone(job_record(job_id), timeout=300)
    return {"returned": returned, "running": running, "turns": turns, "load": load_before,
            "hosts": [x for x in hosts if x is not None],
            "apps": [x for x in apps if x is not None]}


def report_batch(res: dict[str, Any], size: int) -> None:
    print(f"\nbatch of {size} (load {res['load']:.2f} at the call): spawn_jobs returned after "
          f"{res['returned']:.2f} s; all `running` after {res['running']:.2f} s; all turns "
          f"started after {res['turns']:.2f} s")
    print(f"target batch all running <= {BATCH_TARGET_S:.0f} s: "
          f"{'met' if res['running'] <= BATCH_TARGET_S else 'NOT met'}")
    summary(BENCH, f"batch{size}_all_running_s", res["running"], f"<={BATCH_TARGET_S:.0f}",
            res["running"] <= BATCH_TARGET_S if size >= 50 else None)
    summary(BENCH, f"batch{size}_all_turns_started_s", res["turns"])
    hosts, apps = res["hosts"], res["apps"]
    if not hosts:
        print("no job host could be measured")
        return
    host, app = statistics.median(hosts), statistics.median(apps) if apps else float("nan")
    print(f"USS per live worker ({len(hosts)} live): job host median {host:.1f} MiB "
          f"(min {min(hosts):.1f}, max {max(hosts):.1f}); stand-in app-server median {app:.1f} "
          f"MiB (the stand-in is Python; a real Codex app-server is ~87 MiB)")
    print(f"target job host USS <= {USS_TARGET_MIB:.0f} MiB: "
          f"{'met' if host <= USS_TARGET_MIB else 'NOT met'}")
    summary(BENCH, "job_host_uss_mib", host, f"<={USS_TARGET_MIB:.0f}", host <= USS_TARGET_MIB)
    summary(BENCH, "standin_app_server_uss_mib", app)


# ------------------------------------------------------------------- main ---

def cleanup(dirs: dict[str, Path]) -> None:
    """Stop the gateway and any job host still alive (a failed run), by the pids recorded."""
    import signal

    from mmo_kernel.gateway.process import stop_gateway
    from mmo_kernel.state.processes import process_matches

    jobs = dirs["state"] / "jobs"
    for meta in jobs.glob("*/metadata.json") if jobs.is_dir() else []:
        try:
            record = json.loads(meta.read_text())
        except (OSError, ValueError):
            continue
        for pid, token in ((record.get("runner_pid"), record.get("runner_start_token")),
                           (record.get("app_server_pid"), record.get("app_server_start_token"))):
            if pid and process_matches(pid, token):
                try:
                    os.killpg(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
    try:
        stop_gateway()
    except Exception as exc:  # noqa: BLE001 - cleanup must go on
        print(f"could not stop the gateway: {exc}", file=sys.stderr)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=12, help="overhead repetitions")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--wake", type=int, default=10, help="wake-up samples")
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--quick", action="store_true", help="tiny sizes (smoke test)")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir")
    args = parser.parse_args()
    if args.quick:
        args.reps, args.warmup, args.wake, args.batch = 2, 0, 2, 3
    print(machine_line(), flush=True)
    work = Path(tempfile.mkdtemp(prefix="mmo-jobs-bench-"))
    dirs = prepare(work, capacity=max(args.batch, 4) + 2)
    try:
        from mmo_kernel import api

        session = api.create_session(dirs["profile"], cwd=dirs["ws"],
                                     bindings={"*": "local_scripted"})
        sid = session["session_id"]
        report_overhead(overhead(args, dirs, sid), args.reps)
        report_wake([wake_once(dirs, sid, i) for i in range(args.wake)])
        report_batch(batch(args, dirs, sid), args.batch)
        print(machine_line())
    finally:
        cleanup(dirs)
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

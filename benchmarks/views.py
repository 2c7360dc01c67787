"""The live view's read model: refresh cost with a long history and a busy team.

Run: ``.venv/bin/python benchmarks/views.py [--jobs 10000] [--agents 50] [--rate 20]
[--refreshes 30] [--quick] [--profile FILE]``

Set-up, in a private temp state dir: the history of ``benchmarks/state.py``
(``--jobs`` finished jobs in ``jobs / 5`` sessions, at most 2,000, synthesized from
real records), plus ``--agents`` live agents: sessions of one root and nine workers
each, ``running``, whose host is a writer process that appends ``--rate`` event
lines a second to every agent's ``events.jsonl`` (a realistic mix: tool items,
output deltas, token updates), as real hosts do.

Measured in a fresh interpreter (the viewer), while the writer runs:

* **cold start** — ``Collector()`` and its first ``refresh()`` (imports separately);
* **refresh CPU** — ``time.process_time()`` of each 1 Hz ``refresh()`` (the writer is
  another process, so only the viewer's work counts), p50 and p95;
* **memory** — the viewer's USS after the last refresh;
* **bytes** — log bytes the refreshes read against the bytes the writer appended
  meanwhile (1.0: every byte read once, nothing re-read);
* **baseline, same run** — a naive refresh that re-reads everything: ``peek_sessions()``,
  ``peek_jobs()`` and every live agent's whole event log parsed. Reported as a ratio.

Targets (issue 17): refresh <= 15 ms CPU (p95 <= 30 ms), cold start <= 200 ms,
<= 50 MB, reads proportional to new bytes only.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import jobs as jobs_bench
import state as state_bench
from _bench import machine_line, pct, summary

BENCH = "views"
REFRESH_TARGET_MS, REFRESH_P95_TARGET_MS = 15.0, 30.0
COLD_TARGET_MS, MEMORY_TARGET_MB = 200.0, 50.0
WORKERS_PER_SESSION = 9

WRITER = r"""
import json, os, sys, time
paths_file, rate, counter = sys.argv[1], float(sys.argv[2]), sys.argv[4]
lines = [l.encode() for l in json.loads(sys.argv[3])]
while not os.path.exists(paths_file):  # the records naming this process as host come first
    time.sleep(0.05)
handles = [open(p, "ab", buffering=0) for p in json.loads(open(paths_file).read())]
written, n, period = 0, 0, 1.0 / rate
next_tick = time.monotonic()
while True:
    line = lines[n % len(lines)]
    for h in handles:
        h.write(line)
    written += len(line) * len(handles)
    n += 1
    with open(counter + ".tmp", "w") as out:
        out.write(str(written))
    os.replace(counter + ".tmp", counter)
    next_tick += period
    time.sleep(max(0.0, next_tick - time.monotonic()))
"""

VIEWER = r"""
import json, sys, time, os
started = time.perf_counter()
from mmo_kernel.views.collector import Collector
imported = time.perf_counter()
collector = Collector()
collector.refresh()
cold = time.perf_counter()
cpu, wall, read = [], [], []
profiler = None
if len(sys.argv) > 3:
    import cProfile
    profiler = cProfile.Profile()
def appended():
    return int(open(sys.argv[2]).read())
first_bytes, start_appended = collector.refresh().bytes_read, appended()
for _ in range(int(sys.argv[1])):
    time.sleep(1.0)
    c0, w0 = time.process_time(), time.perf_counter()
    if profiler is not None:
        profiler.enable()
    snap = collector.refresh()
    if profiler is not None:
        profiler.disable()
    cpu.append((time.process_time() - c0) * 1000)
    wall.append((time.perf_counter() - w0) * 1000)
    read.append(snap.bytes_read)
if profiler is not None:
    profiler.dump_stats(sys.argv[3])
import psutil
uss = psutil.Process().memory_full_info().uss / 2**20
print(json.dumps({"appended": appended() - start_appended,
                  "import_ms": (imported - started) * 1000, "cold_ms": (cold - imported) * 1000,
                  "cpu_ms": cpu, "wall_ms": wall, "bytes": [first_bytes] + read, "uss_mb": uss,
                  "agents": sum(len(s.agents) for s in snap.sessions),
                  "statuses": snap.agents}))
"""

NAIVE = r"""
import json, sys, time
from pathlib import Path
from mmo_kernel import api
paths = json.loads(sys.argv[1])
def naive():
    api.peek_sessions()
    api.peek_jobs()
    for p in paths:
        for line in Path(p).read_bytes().splitlines():
            try:
                json.loads(line)
            except ValueError:
                pass
naive()
cpu = []
for _ in range(int(sys.argv[2])):
    c0 = time.process_time()
    naive()
    cpu.append((time.process_time() - c0) * 1000)
print(json.dumps({"cpu_ms": cpu}))
"""


def event_lines() -> list[str]:
    """One minute of a working agent, as its host records it (a repeating mix)."""
    at = datetime.now(UTC).isoformat()

    def line(method: str, params: dict[str, Any]) -> str:
        return json.dumps({"recorded_at": at, "direction": "received",
                           "message": {"method": method, "params": params}},
                          separators=(",", ":")) + "\n"

    item = {"id": "call_1", "type": "commandExecution", "command": "pytest -q tests/io",
            "status": "inProgress"}
    out = [line("item/started", {"threadId": "t", "turnId": "u", "item": item})]
    out += [line("item/commandExecution/outputDelta",
                 {"threadId": "t", "turnId": "u", "itemId": "call_1",
                  "delta": f"tests/io/test_{i:02d}.py .......... [ {i * 5}%]\n"})
            for i in range(16)]
    out.append(line("item/completed", {"threadId": "t", "turnId": "u",
                                       "item": {**item, "status": "completed"}}))
    out.append(line("thread/tokenUsage/updated", {"threadId": "t", "turnId": "u", "tokenUsage": {
        "total": {"inputTokens": 41000, "outputTokens": 900, "totalTokens": 41900},
        "last": {"inputTokens": 4100, "outputTokens": 90, "totalTokens": 4190}}}))
    out.append(line("item/completed", {"threadId": "t", "turnId": "u", "item": {
        "id": "msg_1", "type": "agentMessage", "text": "The io tests pass; moving on."}}))
    return out


def live_team(history: state_bench.History, agents: int, writer_pid: int) -> list[str]:
    """Live sessions of a root and nine workers, hosted by ``writer_pid``; their logs."""
    from mmo_kernel.state.processes import process_start_token

    token = process_start_token(writer_pid)
    host = {"root_pid": writer_pid, "root_pgid": writer_pid, "root_start_token": token,
            "root_app_server_pid": writer_pid, "root_app_server_pgid": writer_pid,
            "root_app_server_start_token": token}
    now = datetime.now(UTC)
    logs: list[str] = []
    sessions = max(1, agents // (WORKERS_PER_SESSION + 1))
    for n in range(sessions):
        sid = state_bench.new_id(now + timedelta(seconds=n), "live-team")
        record = state_bench.retarget(history.session, history.session["session_id"], sid)
        for key in ("finished_at", "result_kind", "result_path"):
            record.pop(key, None)
        record.update(session_id=sid, status="running", created_at=now.isoformat(),
                      started_at=now.isoformat(), current_run_id=record.get("last_run_id"),
                      **host)
        sdir = history.state / "sessions" / sid
        history.write("session", record, sdir / "session.json")
        logs.append(str(sdir / "root-events.jsonl"))
        audit = []
        for w in range(WORKERS_PER_SESSION):
            job_id = state_bench.new_id(now + timedelta(seconds=n, milliseconds=w), "plain")
            _, job = history.job_variant(99, job_id, sid, now)  # the running variant
            job.update(runner_pid=writer_pid, runner_pgid=writer_pid, runner_start_token=token,
                       events_path=str(history.state / "jobs" / job_id / "events.jsonl"))
            history.write("job (running)", job, history.state / "jobs" / job_id / "metadata.json")
            logs.append(job["events_path"])
            audit.append(json.dumps({"event": "agent_started", "at": now.isoformat(),
                                     "run_id": "r", "job_id": job_id, "agent": job["agent"],
                                     "caller_agent": record.get("root_agent")}))
        (sdir / "audit.jsonl").write_text("\n".join(audit) + "\n")
    for path in logs:
        Path(path).touch()
    return logs


def python(code: str, *argv: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        raise SystemExit(f"benchmarks/views.py: the viewer failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def report(viewer: dict[str, Any], naive: dict[str, Any], jobs: int) -> None:
    cpu, wall = viewer["cpu_ms"], viewer["wall_ms"]
    p50, p95 = pct(cpu, 0.5), pct(cpu, 0.95)
    base = pct(naive["cpu_ms"], 0.5)
    read, appended = viewer["bytes"][-1] - viewer["bytes"][0], viewer["appended"]
    print(f"\n{jobs:,} past jobs, {viewer['agents']} live agents shown "
          f"({viewer['statuses']}), {len(cpu)} refreshes at 1 Hz")
    print(f"  imports {viewer['import_ms']:.0f} ms; cold start (first refresh) "
          f"{viewer['cold_ms']:.0f} ms")
    print(f"  refresh CPU p50 {p50:.1f} ms, p95 {p95:.1f} ms (wall p50 {pct(wall, 0.5):.1f} ms)")
    print(f"  naive refresh (re-read everything) CPU p50 {base:.0f} ms: "
          f"{base / max(p50, 0.01):.0f}x the read model's")
    print(f"  log bytes read by the refreshes {read:,} vs appended meanwhile ~{appended:,} "
          f"(ratio {read / max(appended, 1):.2f})")
    print(f"  viewer USS {viewer['uss_mb']:.1f} MiB")
    summary(BENCH, "refresh_cpu_p50_ms", p50, f"<={REFRESH_TARGET_MS:g}", p50 <= REFRESH_TARGET_MS)
    summary(BENCH, "refresh_cpu_p95_ms", p95, f"<={REFRESH_P95_TARGET_MS:g}",
            p95 <= REFRESH_P95_TARGET_MS)
    summary(BENCH, "cold_start_ms", viewer["cold_ms"], f"<={COLD_TARGET_MS:g}",
            viewer["cold_ms"] <= COLD_TARGET_MS)
    summary(BENCH, "viewer_uss_mib", viewer["uss_mb"], f"<={MEMORY_TARGET_MB:g}",
            viewer["uss_mb"] <= MEMORY_TARGET_MB)
    summary(BENCH, "bytes_read_per_byte_appended", read / max(appended, 1), "~1", None)
    summary(BENCH, "naive_over_read_model_cpu", base / max(p50, 0.01), "-", None)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--agents", type=int, default=50)
    parser.add_argument("--rate", type=float, default=20.0, help="event lines/s per agent")
    parser.add_argument("--refreshes", type=int, default=30)
    parser.add_argument("--quick", action="store_true", help="tiny sizes (smoke test)")
    parser.add_argument("--profile", metavar="FILE",
                        help="write cProfile stats of the 1 Hz refreshes to FILE (slows them)")
    args = parser.parse_args()
    if args.quick:
        args.jobs, args.agents, args.refreshes = 200, 10, 3
    print(machine_line(), flush=True)
    work = Path(tempfile.mkdtemp(prefix="mmo-views-bench-"))
    dirs = jobs_bench.prepare(work, capacity=4)
    writer = None
    try:
        history = state_bench.History(dirs["state"], *state_bench.templates(dirs))
        jobs_bench.cleanup(dirs)  # no gateway or host is needed from here on
        start = time.perf_counter()
        history.grow_sessions(min(2000, max(1, args.jobs // 5)))
        history.grow_jobs(args.jobs)
        print(f"synthesized {args.jobs:,} jobs in {time.perf_counter() - start:.1f} s",
              flush=True)
        counter, paths_file = work / "written", work / "logs.json"
        writer = subprocess.Popen([sys.executable, "-c", WRITER, str(paths_file), str(args.rate),
                                   json.dumps(event_lines()), str(counter)],
                                  stdin=subprocess.DEVNULL)
        logs = live_team(history, args.agents, writer.pid)
        paths_file.write_text(json.dumps(logs))
        while not counter.exists():
            time.sleep(0.05)
        time.sleep(2.0)  # a backlog for the cold start to read, as a viewer opened late finds
        viewer = python(VIEWER, str(args.refreshes), str(counter),
                        *([str(Path(args.profile).resolve())] if args.profile else []))
        naive = python(NAIVE, json.dumps(logs), "3")
        writer.kill()
        writer.wait()
        report(viewer, naive, args.jobs)
        print(machine_line())
    finally:
        if writer is not None and writer.poll() is None:
            writer.kill()
        jobs_bench.cleanup(dirs)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

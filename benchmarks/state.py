"""Listing cost at 1k/10k (and, with ``--large``, 100k) jobs against the raw-read floor.

Run: ``.venv/bin/python benchmarks/state.py [--sizes 1000,10000] [--large] [--repeat 3]
[--quick]``

The history is synthesized in a private temp state dir in the exact current
record format: one real session and one real job are made through the API
on the offline stand-in (``create_session``, ``spawn_job``, ``stop_session``),
then their records are copied with new ids and times. A sample of each record
variant is written with the real writers (``write_job_record`` /
``write_session_record``) and the bulk copies must serialize byte for byte like
them (otherwise every copy goes through the real writer). Jobs: 90 %
``completed``, 9 % ``failed``, 1 % ``running`` on a live runner (this process, so
reconciliation keeps them); sessions: ``min(2000, jobs / 5)``, terminal.

Measured per size, warm page cache, medians of ``--repeat`` interleaved rounds:

* **raw floor** — scan ``jobs/`` and ``json.loads`` every ``metadata.json``
  (nothing else), in this process and in a fresh interpreter;
* ``api.list_jobs()`` (and ``list_jobs(limit=50)`` when the index exists);
* ``live_jobs()`` — what admission scans before every spawn;
* ``mmo jobs --json`` — a subprocess, wall time including interpreter start;
* sessions: ``api.iter_sessions()`` and ``mmo sessions --json`` against their floor.

"With the index" is reported when the kernel has one (``list_jobs`` takes
``limit`` or ``mmo_kernel.state.index`` exists); the first listing after the
bulk write is then timed on its own (it has to notice and index every record).
Targets (issue 15, 10,000 jobs and 2,000 sessions): ``list_jobs()`` <= 100 ms,
``mmo jobs --json`` <= 250 ms; at 100,000 jobs a limited listing within 2x.
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import inspect
import json
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import jobs as jobs_bench
from _bench import load, machine_line, summary

BENCH = "state"
LIST_TARGET_MS = 100.0
CLI_TARGET_MS = 250.0
PAGE = 50
MMO = str(Path(sys.executable).with_name("mmo"))
FLOOR_CODE = """\
import json, os, sys
root = sys.argv[1]
n = 0
for entry in os.scandir(root):
    if entry.name.startswith("."):
        continue
    try:
        with open(os.path.join(entry.path, sys.argv[2]), "rb") as handle:
            json.loads(handle.read())
        n += 1
    except FileNotFoundError:
        pass
print(n)
"""


# ------------------------------------------------------------------ floor ---

def raw_floor(root: Path, name: str) -> int:
    """Scan ``root`` and parse every ``<entry>/<name>``; nothing else."""
    count = 0
    for entry in os.scandir(root):
        if entry.name.startswith("."):
            continue
        try:
            with open(os.path.join(entry.path, name), "rb") as handle:
                json.loads(handle.read())
            count += 1
        except FileNotFoundError:
            pass
    return count


# -------------------------------------------------------------- templates ---

INDEX_FILES = ("index.sqlite3", "index.sqlite", "index.db")


def index_features(state: Path) -> tuple[bool, str]:
    """Whether listings are served from an index, by feature: ``list_jobs`` takes
    ``limit``, or an index file exists in the state dir after a listing."""
    from mmo_kernel import api

    api.list_jobs()
    takes_limit = "limit" in inspect.signature(api.list_jobs).parameters
    files = [name for name in INDEX_FILES if (state / name).exists()]
    module = any(importlib.util.find_spec(m) is not None
                 for m in ("mmo_kernel.state.index", "mmo_kernel.index"))
    indexed = takes_limit or bool(files)
    return indexed, (f"list_jobs takes limit: {'yes' if takes_limit else 'no'}; index file: "
                     f"{', '.join(files) or 'none'}; index module: {'yes' if module else 'no'}")


def templates(dirs: dict[str, Path]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """A real finished job record, its stopped session's record and run record."""
    from mmo_kernel import api

    session = api.create_session(dirs["profile"], cwd=dirs["ws"],
                                 bindings={"*": "local_scripted"})
    sid = session["session_id"]
    job_id = api.spawn_job(sid, "lead", None, jobs_bench.AGENT, task=jobs_bench.TASK)["job_id"]
    api.wait_for_jobs([job_id], sid, 120)
    jobs_bench.wait_host_gone(jobs_bench.job_record(job_id))
    try:
        api.stop_session(sid, grace_seconds=2)
    except RuntimeError as exc:
        print(f"note: stop_session: {exc}")
    job = json.loads((dirs["state"] / "jobs" / job_id / "metadata.json").read_text())
    sdir = dirs["state"] / "sessions" / sid
    record = json.loads((sdir / "session.json").read_text())
    run = json.loads(next((sdir / "runs").glob("*/run.json")).read_text())
    return job, record, run


def serialize(record: dict[str, Any]) -> bytes:
    return (json.dumps(record, indent=2, sort_keys=True) + "\n").encode()


def write_file(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def stamp(moment: datetime) -> str:
    return moment.isoformat()


def new_id(moment: datetime, slug: str) -> str:
    return f"{moment:%Y%m%d-%H%M%S}-{slug}-{secrets.token_hex(3)}"


def retarget(value: Any, old: str, new: str) -> Any:
    """Every string in ``value`` with ``old`` (an id) replaced by ``new``."""
    if isinstance(value, str):
        return value.replace(old, new)
    if isinstance(value, dict):
        return {k: retarget(v, old, new) for k, v in value.items()}
    if isinstance(value, list):
        return [retarget(v, old, new) for v in value]
    return value


class History:
    """Synthesized sessions and jobs, grown in place from the real templates."""

    def __init__(self, state: Path, job: dict[str, Any], session: dict[str, Any],
                 run: dict[str, Any]) -> None:
        from mmo_kernel.state.processes import process_start_token

        self.state = state
        self.job, self.session, self.run = job, session, run
        self.session_ids: list[str] = [session["session_id"]]
        self.jobs = 1
        self.start = datetime.now(UTC) - timedelta(days=400)
        self.live = (os.getpid(), process_start_token(os.getpid()))
        self.exact: dict[str, bool] = {}

    # -- variants ------------------------------------------------------------

    def job_variant(self, index: int, job_id: str, session_id: str,
                    moment: datetime) -> tuple[str, dict[str, Any]]:
        record = retarget(self.job, self.job["job_id"], job_id)
        record = retarget(record, self.job["session_id"], session_id)
        record.update(job_id=job_id, session_id=session_id, created_at=stamp(moment),
                      started_at=stamp(moment + timedelta(seconds=1)),
                      finished_at=stamp(moment + timedelta(seconds=30)))
        if index % 100 == 99:
            for key in ("finished_at", "result_kind", "result_path", "result_state",
                        "app_server_pid", "app_server_pgid", "app_server_start_token"):
                record.pop(key, None)
            record.update(status="running", runner_pid=self.live[0], runner_pgid=self.live[0],
                          runner_start_token=self.live[1])
            return "running", record
        if index % 100 >= 90:
            record.update(status="failed", error="synthetic failure for the benchmark")
            record.pop("result_state", None)
            return "failed", record
        return "completed", record

    def write(self, kind: str, record: dict[str, Any], path: Path) -> None:
        """The first record of each kind through the real writer; the others in bulk when
        they serialize byte for byte like it (else through the real writer too)."""
        exact = self.exact.get(kind)
        if exact:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            write_file(path, serialize(record))
            return
        written = real_writer(kind)(copy.deepcopy(record))
        if exact is None:
            self.exact[kind] = path.read_bytes() == serialize(written)
            if not self.exact[kind]:
                print(f"note: {kind} records are not serialized like the bulk copies; "
                      "every one goes through the real writer (slower)")

    # -- growth ----------------------------------------------------------------

    def grow_sessions(self, count: int) -> None:
        template_dir = self.state / "sessions" / self.session["session_id"]
        while len(self.session_ids) < count:
            moment = self.start + timedelta(minutes=len(self.session_ids))
            sid = new_id(moment, self.session["profile_id"])
            record = retarget(self.session, self.session["session_id"], sid)
            record.update(session_id=sid, created_at=stamp(moment),
                          last_active_at=stamp(moment + timedelta(minutes=5)))
            sdir = self.state / "sessions" / sid
            self.write("session", record, sdir / "session.json")
            run = retarget(self.run, self.session["session_id"], sid)
            self.write("run", run, sdir / "runs" / run["run_id"] / "run.json")
            if (template_dir / "capabilities.json").exists():
                shutil.copyfile(template_dir / "capabilities.json", sdir / "capabilities.json")
            self.session_ids.append(sid)

    def grow_jobs(self, count: int) -> None:
        jobs_root = self.state / "jobs"
        while self.jobs < count:
            moment = self.start + timedelta(seconds=self.jobs * 3)
            job_id = new_id(moment, self.job["agent"])
            sid = self.session_ids[self.jobs % len(self.session_ids)]
            kind, record = self.job_variant(self.jobs, job_id, sid, moment)
            self.write(f"job ({kind})", record, jobs_root / job_id / "metadata.json")
            self.jobs += 1


def real_writer(kind: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    from mmo_kernel.jobs.records import write_job_record
    from mmo_kernel.sessions.records import write_run_record, write_session_record

    return {"session": write_session_record, "run": write_run_record}.get(
        kind, write_job_record)


# -------------------------------------------------------------- measuring ---

def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    value = fn()
    return (time.perf_counter() - start) * 1000, value


def cli(*argv: str) -> Callable[[], int]:
    def run() -> int:
        proc = subprocess.run([MMO, *argv], capture_output=True, stdin=subprocess.DEVNULL)
        if proc.returncode != 0:
            raise RuntimeError(f"mmo {' '.join(argv)} failed: {proc.stderr.decode()[-400:]}")
        return len(proc.stdout)
    return run


def python(*argv: str) -> Callable[[], int]:
    def run() -> int:
        return subprocess.run([sys.executable, *argv], stdout=subprocess.DEVNULL,
                              check=True).returncode
    return run


def measure(size: int, state: Path, repeat: int, indexed: bool) -> dict[str, Any]:
    from mmo_kernel import api
    from mmo_kernel.jobs.listing import live_jobs

    jobs_root, sessions_root = state / "jobs", state / "sessions"
    cases: dict[str, Callable[[], Any]] = {
        "python -c pass": python("-c", "pass"),
        "raw floor: jobs": lambda: raw_floor(jobs_root, "metadata.json"),
        "raw floor: jobs, fresh interpreter": python("-c", FLOOR_CODE, str(jobs_root),
                                                     "metadata.json"),
        "api.list_jobs()": api.list_jobs,
        "live_jobs() (admission scan)": live_jobs,
        "mmo jobs --json": cli("jobs", "--json"),
        "raw floor: sessions": lambda: raw_floor(sessions_root, "session.json"),
        "raw floor: sessions, fresh interpreter": python("-c", FLOOR_CODE, str(sessions_root),
                                                         "session.json"),
        "api.iter_sessions()": api.iter_sessions,
        "mmo sessions --json": cli("sessions", "--json"),
    }
    if indexed and "limit" in inspect.signature(api.list_jobs).parameters:
        cases[f"api.list_jobs(limit={PAGE})"] = lambda: api.list_jobs(limit=PAGE)
    first: dict[str, float] = {}
    if indexed:
        first["api.list_jobs() first call after the bulk write"] = timed(api.list_jobs)[0]
        first["api.iter_sessions() first call after the bulk write"] = timed(
            api.iter_sessions)[0]
    for name, fn in cases.items():  # warm-up: the page cache, imports, caches
        if name.startswith(("raw floor", "python")) or name.startswith("api.list_jobs(limit"):
            fn()
    if not indexed:
        api.list_jobs()
        api.iter_sessions()
    rows: dict[str, list[float]] = {name: [] for name in cases}
    loads = []
    for _ in range(repeat):
        for name, fn in cases.items():
            rows[name].append(timed(fn)[0])
        loads.append(load())
    listed = len(api.list_jobs())
    return {"size": size, "listed": listed, "first": first, "loads": loads,
            "med": {k: statistics.median(v) for k, v in rows.items()}}


def report(res: dict[str, Any], sessions: int, indexed: bool) -> None:
    med, size = res["med"], res["size"]
    floor, cli_floor = med["raw floor: jobs"], med["raw floor: jobs, fresh interpreter"]
    sfloor, scli = med["raw floor: sessions"], med["raw floor: sessions, fresh interpreter"]
    print(f"\n{size:,} jobs, {sessions:,} sessions ({'with' if indexed else 'without'} the index;"
          f" load {min(res['loads']):.2f}-{max(res['loads']):.2f}); api.list_jobs() returned "
          f"{res['listed']:,} rows")
    print(f"{'':52}{'ms':>10}{'x floor':>9}")
    for name, value in med.items():
        base = (floor if name in ("api.list_jobs()", "live_jobs() (admission scan)")
                or name.startswith("api.list_jobs(limit") else
                cli_floor if name == "mmo jobs --json" else
                sfloor if name == "api.iter_sessions()" else
                scli if name == "mmo sessions --json" else None)
        ratio = f"{value / base:9.2f}" if base else ""
        print(f"{name:52}{value:10.1f}{ratio}")
    for name, value in res["first"].items():
        print(f"{name:52}{value:10.1f}")
    label = f"{size // 1000}k" if size >= 1000 else str(size)
    is_target = size == 10_000
    lj, cj = med["api.list_jobs()"], med["mmo jobs --json"]
    summary(BENCH, f"list_jobs_{label}_ms", lj, f"<={LIST_TARGET_MS:.0f}" if is_target else "-",
            lj <= LIST_TARGET_MS if is_target else None)
    summary(BENCH, f"mmo_jobs_json_{label}_ms", cj, f"<={CLI_TARGET_MS:.0f}" if is_target else "-",
            cj <= CLI_TARGET_MS if is_target else None)
    limited = med.get(f"api.list_jobs(limit={PAGE})")
    if limited is not None:
        summary(BENCH, f"list_jobs_limit{PAGE}_{label}_ms", limited)
    for name, value in res["first"].items():
        if name.startswith("api.list_jobs()"):
            summary(BENCH, f"list_jobs_first_after_bulk_write_{label}_ms", value)
    summary(BENCH, f"list_jobs_{label}_x_floor", lj / floor)
    summary(BENCH, f"raw_floor_{label}_ms", floor)
    summary(BENCH, f"admission_scan_{label}_ms", med["live_jobs() (admission scan)"])
    summary(BENCH, f"iter_sessions_{sessions}_ms", med["api.iter_sessions()"])


def report_growth(results: list[dict[str, Any]]) -> None:
    """With 100k jobs a limited listing should stay within 2x of the 10k figure."""
    by_size = {r["size"]: r["med"] for r in results}
    if 10_000 not in by_size or 100_000 not in by_size:
        return
    small, large = by_size[10_000], by_size[100_000]
    key = next((k for k in large if k.startswith("api.list_jobs(limit")), "api.list_jobs()")
    for name in (key, "mmo jobs --json"):
        ratio = large[name] / small[name]
        print(f"{name} at 100k / at 10k: {ratio:.2f}x (target <= 2x)")
        metric = "list_jobs_limited" if name.startswith("api") else "mmo_jobs_json"
        summary(BENCH, f"{metric}_100k_over_10k", ratio, "<=2", ratio <= 2)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--large", action="store_true", help="also 100,000 jobs (slow)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="tiny sizes (smoke test)")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir")
    args = parser.parse_args()
    sizes = sorted({int(s) for s in args.sizes.split(",") if s})
    if args.large:
        sizes.append(100_000)
    if args.quick:
        sizes, args.repeat = [20, 60], 1
    print(machine_line(), flush=True)
    work = Path(tempfile.mkdtemp(prefix="mmo-state-bench-"))
    dirs = jobs_bench.prepare(work, capacity=4)
    try:
        history = History(dirs["state"], *templates(dirs))
        indexed, how = index_features(dirs["state"])
        print(f"listing {'with' if indexed else 'without'} the index ({how})")
        jobs_bench.cleanup(dirs)  # the gateway is not needed for listing
        results = []
        for size in sizes:
            sessions = min(2000, max(1, size // 5))
            start = time.perf_counter()
            history.grow_sessions(sessions)
            history.grow_jobs(size)
            print(f"synthesized {size:,} jobs / {sessions:,} sessions in "
                  f"{time.perf_counter() - start:.1f} s", flush=True)
            result = measure(size, dirs["state"], args.repeat, indexed)
            report(result, sessions, indexed)
            results.append(result)
        report_growth(results)
        print(machine_line())
    finally:
        jobs_bench.cleanup(dirs)
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

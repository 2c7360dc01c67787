"""Where a job's orchestration time goes: imports, profiles, syscalls (not part of ``make bench``).

Run: ``.venv/bin/python benchmarks/_profile_jobs.py [--jobs 5] [--runs 5] [--out FILE]
[--skip imports,cprofile,batch,host,strace]``

Sections, each on the same offline stand-in set-up as ``benchmarks/jobs.py``:

* ``imports``  — ``python -X importtime`` of the job host's entry (what
  ``python -m mmo_kernel.state.redaction mmo_app_server.job_host`` imports
  before it runs) against ``python -c pass`` and the stand-in app-server's own
  imports; self time grouped by package, medians over ``--runs`` runs. Plus the
  imports a real job host made during a whole job (``PYTHONPROFILEIMPORTTIME``
  in its environment, read back from its ``runner.log``).
* ``cprofile`` — cProfile of ``api.spawn_job`` and ``api.wait_for_jobs`` in this
  process over ``--jobs`` jobs.
* ``batch``    — cProfile of ``api.spawn_jobs`` with ``2 * --jobs`` held jobs.
* ``host``     — cProfile of the job host processes themselves (main thread,
  from interpreter start, imports included), through a ``sitecustomize`` put
  on ``PYTHONPATH`` that profiles only ``mmo_app_server.job_host``.
* ``strace``   — ``strace -f -y`` of ``--jobs`` jobs: fsync/fdatasync, renames,
  opens, execs and process starts per job, per process role, fsyncs by file.

The report (markdown) goes to stdout and, with ``--out``, to a file.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

import jobs as bench
from _bench import machine_line

PY = sys.executable
HOST_IMPORT = "import mmo_kernel.state.redaction, mmo_app_server.job_host"
STANDIN_IMPORT = "import mmo_codex_standin.main"
SITECUSTOMIZE = '''\
import os, sys
if "mmo_app_server.job_host" in getattr(sys, "orig_argv", ()):
    import atexit, cProfile
    _profile = cProfile.Profile()
    _profile.enable()
    def _dump():
        _profile.disable()
        out = os.environ["MMO_BENCH_PROFILE_DIR"]
        _profile.dump_stats(os.path.join(out, f"host-{os.getpid()}.prof"))
    atexit.register(_dump)
'''
LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)")
OUT: list[str] = []


def say(text: str = "") -> None:
    print(text, flush=True)
    OUT.append(text)


# ---------------------------------------------------------------- imports ---

def parse_importtime(text: str) -> dict[str, tuple[int, int]]:
    """module -> (self µs, cumulative µs); the first import of each module only."""
    found: dict[str, tuple[int, int]] = {}
    for match in LINE.finditer(text):
        name = match.group(4)
        found.setdefault(name, (int(match.group(1)), int(match.group(2))))
    return found


def group(name: str) -> str:
    parts = name.split(".")
    if parts[0] in ("mmo_kernel",) and len(parts) > 1:
        return ".".join(parts[:2])
    if parts[0].startswith("_") and parts[0] not in ("__editable___mmo_0_1_0_finder",):
        return "stdlib/builtin (_*)"
    top = parts[0]
    if top in sys.stdlib_module_names or top == "encodings":
        return "stdlib"
    return top


def importtime_runs(code: str, runs: int) -> tuple[list[float], list[dict[str, tuple[int, int]]]]:
    walls, parsed = [], []
    for _ in range(runs):
        start = time.perf_counter()
        proc = subprocess.run([PY, "-X", "importtime", "-c", code], capture_output=True, text=True,
                              check=True)
        walls.append((time.perf_counter() - start) * 1000)
        parsed.append(parse_importtime(proc.stderr))
    return walls, parsed


def median_modules(parsed: list[dict[str, tuple[int, int]]]) -> dict[str, tuple[float, float]]:
    names = set().union(*parsed)
    return {n: (statistics.median(p.get(n, (0, 0))[0] for p in parsed) / 1000,
                statistics.median(p.get(n, (0, 0))[1] for p in parsed) / 1000) for n in names}


def grouped(modules: dict[str, tuple[float, float]]) -> list[tuple[str, float, int]]:
    sums: dict[str, float] = defaultdict(float)
    counts: Counter[str] = Counter()
    for name, (own, _cum) in modules.items():
        sums[group(name)] += own
        counts[group(name)] += 1
    return sorted(((g, ms, counts[g]) for g, ms in sums.items()), key=lambda x: -x[1])


def section_imports(args: argparse.Namespace) -> None:
    say("## 1. Imports of the job host entry (`python -X importtime`)\n")
    bare_walls = []
    for _ in range(args.runs):
        start = time.perf_counter()
        subprocess.run([PY, "-c", "pass"], check=True)
        bare_walls.append((time.perf_counter() - start) * 1000)
    host_walls, host_parsed = importtime_runs(HOST_IMPORT, args.runs)
    stand_walls, stand_parsed = importtime_runs(STANDIN_IMPORT, args.runs)
    host = median_modules(host_parsed)
    stand = median_modules(stand_parsed)
    host_total = sum(own for own, _ in host.values())
    stand_total = sum(own for own, _ in stand.values())
    say(f"Medians of {args.runs} runs. Interpreter wall: `python -c pass` "
        f"{statistics.median(bare_walls):.0f} ms; `-c \"{HOST_IMPORT}\"` "
        f"{statistics.median(host_walls):.0f} ms ({len(host)} modules, {host_total:.0f} ms of "
        f"import self time); stand-in `{STANDIN_IMPORT}` {statistics.median(stand_walls):.0f} ms "
        f"({len(stand)} modules, {stand_total:.0f} ms).\n")
    only_host = {n: v for n, v in host.items() if n not in stand}
    say(f"Modules the job host imports that the stand-in app-server does not: {len(only_host)}, "
        f"{sum(o for o, _ in only_host.values()):.0f} ms self time.\n")
    say("| group (self time summed) | ms | modules |\n| --- | ---: | ---: |")
    for name, ms, count in grouped(host)[:args.top]:
        say(f"| {name} | {ms:.1f} | {count} |")
    say("\nHeaviest single imports (cumulative, ms; nested ones are inside their parents):\n")
    say("| module | cumulative ms | self ms |\n| --- | ---: | ---: |")
    heavy = sorted(host.items(), key=lambda kv: -kv[1][1])
    shown = 0
    for name, (own, cum) in heavy:
        if name in ("mmo_app_server.job_host", "mmo_kernel.state.redaction") or cum < 5:
            continue
        say(f"| {name} | {cum:.1f} | {own:.1f} |")
        shown += 1
        if shown >= args.top + 10:
            break
    say("")


def section_live_imports(args: argparse.Namespace, dirs: dict[str, Path], sid: str) -> None:
    """The imports of a real job host over a whole job (lazy ones included)."""
    from mmo_kernel import api

    os.environ["PYTHONPROFILEIMPORTTIME"] = "1"
    try:
        job_id = api.spawn_job(sid, "lead", None, bench.AGENT, task=bench.TASK)["job_id"]
        api.wait_for_jobs([job_id], sid, 120)
        record = bench.job_record(job_id)
        bench.wait_host_gone(record)
    finally:
        del os.environ["PYTHONPROFILEIMPORTTIME"]
    log = (dirs["state"] / "jobs" / job_id / "runner.log").read_text()
    modules = parse_importtime(log)
    total = sum(own for own, _ in modules.values()) / 1000
    say(f"A live job host imported {len(modules)} modules over its whole job ({total:.0f} ms "
        "self time in that run, under the current load); groups:\n")
    as_ms = {n: (own / 1000, cum / 1000) for n, (own, cum) in modules.items()}
    say("| group | ms | modules |\n| --- | ---: | ---: |")
    for name, ms, count in grouped(as_ms)[:args.top]:
        say(f"| {name} | {ms:.1f} | {count} |")
    say("")


# --------------------------------------------------------------- cProfile ---

def stats_text(profile: pstats.Stats, limit: int, restrict: str | None = None,
               runtime_only: bool = False) -> str:
    stream = io.StringIO()
    profile.stream = stream
    profile.sort_stats("cumulative")
    if restrict:
        profile.print_stats(restrict, limit)
    else:
        profile.print_stats(limit)
    lines = stream.getvalue().splitlines()
    start = next((i for i, line in enumerate(lines) if "ncalls" in line), 0)
    cut = [re.sub(r"/\S*/(site-packages|mmo|main)/", "", line) for line in lines[start:]]
    if runtime_only:  # leave out module bodies and the import machinery
        cut = [line for line in cut[:1] + [c for c in cut[1:] if not re.search(
            r"<module>|importlib|<frozen|__build_class__|builtins.exec|_handle_fromlist|"
            r"__getattr__|import_module|builtins.__import__|runpy", c)]]
    return "\n".join(line for line in cut if line.strip())


def section_cprofile(args: argparse.Namespace, sid: str) -> None:
    from mmo_kernel import api

    say(f"## 2. cProfile of spawn_job and wait_for_jobs in the caller ({args.jobs} jobs)\n")
    spawn, wait = cProfile.Profile(), cProfile.Profile()
    spawn_ms, wait_ms = [], []
    for _ in range(args.jobs):
        start = time.perf_counter()
        spawn.enable()
        job_id = api.spawn_job(sid, "lead", None, bench.AGENT, task=bench.TASK)["job_id"]
        spawn.disable()
        mid = time.perf_counter()
        wait.enable()
        api.wait_for_jobs([job_id], sid, 120)
        wait.disable()
        spawn_ms.append((mid - start) * 1000)
        wait_ms.append((time.perf_counter() - mid) * 1000)
        bench.wait_host_gone(bench.job_record(job_id))
    say(f"spawn_job wall per job (profiled) median {statistics.median(spawn_ms):.0f} ms; "
        f"wait_for_jobs median {statistics.median(wait_ms):.0f} ms.\n")
    say("spawn_job, cumulative (per all jobs):\n\n```")
    say(stats_text(pstats.Stats(spawn), args.top + 15, r"mmo_kernel|mmo_app_server|psutil|"
                   r"subprocess|fsync|replace|posix"))
    say("```\n\nwait_for_jobs, cumulative:\n\n```")
    say(stats_text(pstats.Stats(wait), args.top, r"mmo_kernel|sleep|wait"))
    say("```\n")


def section_batch(args: argparse.Namespace, sid: str) -> None:
    from mmo_kernel import api

    size = max(2, args.jobs * 2)
    say(f"## 2b. cProfile of spawn_jobs with a batch of {size} (the caller)\n")
    hold = Path(os.environ["MMO_STATE_DIR"]).parent / "hold" / "profile-batch"
    profile = cProfile.Profile()
    start = time.perf_counter()
    profile.enable()
    accepted = api.spawn_jobs([{"agent": bench.AGENT, "task": bench.held_task(hold)}] * size,
                              sid, "lead")["accepted"]
    profile.disable()
    elapsed = (time.perf_counter() - start) * 1000
    hold.touch()
    ids = [job["job_id"] for job in accepted]
    api.wait_for_jobs(ids, sid, 600)
    for job_id in ids:
        bench.wait_host_gone(bench.job_record(job_id), timeout=300)
    say(f"spawn_jobs of {size}: {elapsed:.0f} ms ({elapsed / size:.0f} ms per job).\n\n```")
    say(stats_text(pstats.Stats(profile), args.top + 15, r"mmo_kernel|mmo_app_server|psutil|"
                   r"subprocess|fsync|replace|posix"))
    say("```\n")


def section_host(args: argparse.Namespace, dirs: dict[str, Path], sid: str) -> None:
    from mmo_kernel import api

    say(f"## 3. cProfile of the job host process (main thread, {args.jobs} jobs)\n")
    site = dirs["hold"].parent / "sitecustomize"
    profiles = dirs["hold"].parent / "host-profiles"
    site.mkdir()
    profiles.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    saved = {k: os.environ.get(k) for k in ("PYTHONPATH", "MMO_BENCH_PROFILE_DIR")}
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), saved["PYTHONPATH"]]))
    os.environ["MMO_BENCH_PROFILE_DIR"] = str(profiles)
    try:
        for _ in range(args.jobs):
            job_id = api.spawn_job(sid, "lead", None, bench.AGENT, task=bench.TASK)["job_id"]
            api.wait_for_jobs([job_id], sid, 120)
            bench.wait_host_gone(bench.job_record(job_id))
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    files = sorted(profiles.glob("*.prof"))
    if not files:
        say("no host profile was written (did the host exit through atexit?)\n")
        return
    stats = pstats.Stats(str(files[0]))
    for path in files[1:]:
        stats.add(str(path))
    total = stats.total_tt
    say(f"{len(files)} host profiles; main-thread time per host {total / len(files) * 1000:.0f} "
        "ms (cProfile inflates it).\n\n```")
    say(stats_text(stats, args.top + 25))
    say("```\n\nThe same, without module bodies and import machinery (the host's own work):\n\n```")
    stats = pstats.Stats(str(files[0]))
    for path in files[1:]:
        stats.add(str(path))
    say(stats_text(stats, 120, r"mmo_kernel|mmo_app_server|fsync|posix|psutil|subprocess|"
                   r"thread|select|socket", runtime_only=True))
    say("```\n")


# ----------------------------------------------------------------- strace ---

SYSCALL = re.compile(r"^(\d+)\s+(?:<\.\.\. (\w+) resumed>|(\w+)\()(.*)$")
TRACED = "fsync,fdatasync,rename,renameat,renameat2,openat,execve,clone,clone3,vfork,fork"


def role_of(argv_text: str) -> str:
    if "mmo_app_server.job_host" in argv_text:
        return "job host"
    if "mmo-codex-standin" in argv_text:
        return "app-server (stand-in)"
    if "mmo_kernel.gateway" in argv_text:
        return "gateway"
    if '"git"' in argv_text or "/git\"" in argv_text:
        return "git"
    return "other: " + argv_text[:60]


def strace_child(args: argparse.Namespace) -> int:
    """Inside strace: set up, mark the start, run ``--jobs`` jobs, mark the end."""
    from mmo_kernel import api

    work = Path(tempfile.mkdtemp(prefix="mmo-jobs-strace-"))
    dirs = bench.prepare(work, capacity=32)
    try:
        sid = api.create_session(dirs["profile"], cwd=dirs["ws"],
                                 bindings={"*": "local_scripted"})["session_id"]
        bench.mmo_once(sid)  # warm-up, not counted
        try:
            os.open("/mmo-bench-strace-BEGIN", os.O_RDONLY)
        except OSError:
            pass
        for _ in range(args.jobs):
            bench.mmo_once(sid)
        try:
            os.open("/mmo-bench-strace-END", os.O_RDONLY)
        except OSError:
            pass
    finally:
        bench.cleanup(dirs)
        shutil.rmtree(work, ignore_errors=True)
    return 0


def classify_path(path: str) -> str:
    name = Path(path.rstrip(">")).name
    if name.startswith("rollout-"):
        return "rollout-*.jsonl (the stand-in's thread log)"
    if name.startswith(".metadata.json"):
        return "job metadata.json (temp file)"
    if name.startswith("."):
        base = name[1:].split(".tmp")[0].rsplit(".", 1)[0]
        return f"{base} (temp file)"
    if "." not in name:
        return "directory (after a rename)"
    return name


def section_strace(args: argparse.Namespace, work: Path) -> None:
    say(f"## 4. Syscalls per job (`strace -f -y`, {args.jobs} jobs after a warm-up)\n")
    if not shutil.which("strace"):
        say("strace is not installed; skipped.\n")
        return
    out = work / "strace.txt"
    proc = subprocess.run(["strace", "-f", "-y", "-qq", "-s", "200", "-e", f"trace={TRACED}",
                           "-o", str(out), PY, __file__, "--strace-child", "--jobs",
                           str(args.jobs)], capture_output=True, text=True)
    if proc.returncode != 0 or not out.exists():
        say(f"strace failed (exit {proc.returncode}): {proc.stderr[-300:]}\n")
        return
    leader: dict[str, str] = {}      # tid -> process leader tid
    roles: dict[str, str] = {}        # leader -> role
    pending: dict[str, str] = {}
    counted = False
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    fsync_files: Counter[str] = Counter()
    procs_started: Counter[str] = Counter()
    main: str | None = None
    for raw in out.read_text(errors="replace").splitlines():
        match = SYSCALL.match(raw)
        if not match:
            continue
        tid, resumed, call, rest = match.groups()
        if main is None:
            main = tid
            roles[tid] = "caller (spawn_job + wait_for_jobs)"
        name = resumed or call
        if rest.endswith("<unfinished ...>"):
            pending[tid] = rest
            continue
        if resumed:
            rest = pending.pop(tid, "") + rest
        me = leader.get(tid, tid)
        if name in ("clone", "clone3", "vfork", "fork"):
            child = rest.rsplit("=", 1)[-1].strip().split()[0]
            if child.isdigit():
                leader[child] = me if "CLONE_THREAD" in rest else child
                if "CLONE_THREAD" not in rest:
                    roles.setdefault(child, roles.get(me, "?"))
            continue
        if name == "execve" and rest.rstrip().endswith("= 0"):
            if me != main:
                roles[me] = role_of(rest)
            if counted:
                procs_started[roles[me]] += 1
        if "mmo-bench-strace-BEGIN" in rest:
            counted = True
            continue
        if "mmo-bench-strace-END" in rest:
            break
        if not counted:
            continue
        role = roles.get(me, "?")
        counts[role][name] += 1
        if name in ("fsync", "fdatasync"):
            found = re.search(r"<([^>]*)>", rest)
            fsync_files[f"{role}: {classify_path(found.group(1)) if found else '?'}"] += 1
    jobs = args.jobs
    say("| process role | fsync+fdatasync | rename | openat | execve | processes started |")
    say("| --- | ---: | ---: | ---: | ---: | ---: |")
    for role, counter in sorted(counts.items(), key=lambda kv: -sum(kv[1].values())):
        renames = counter["rename"] + counter["renameat"] + counter["renameat2"]
        say(f"| {role} | {(counter['fsync'] + counter['fdatasync']) / jobs:.1f} | "
            f"{renames / jobs:.1f} | {counter['openat'] / jobs:.1f} | "
            f"{counter['execve'] / jobs:.1f} | {procs_started[role] / jobs:.1f} |")
    say("\n(per job) fsyncs by file:\n")
    say("| process: file | fsyncs per job |\n| --- | ---: |")
    for key, value in fsync_files.most_common(args.top):
        say(f"| {key} | {value / jobs:.1f} |")
    say("")


def section_fsync_cost(work: Path) -> None:
    """What one fsync of a small file (and its directory) costs on the state dir's disk."""
    target = work / "fsync-probe"
    target.mkdir(exist_ok=True)
    times = []
    for i in range(50):
        start = time.perf_counter()
        path = target / f"f{i}"
        with open(path, "wb") as handle:
            handle.write(b"{}" * 500)
            handle.flush()
            os.fsync(handle.fileno())
        fd = os.open(target, os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)
        times.append((time.perf_counter() - start) * 1000)
    say(f"One small file write + fsync + directory fsync on this disk: median "
        f"{statistics.median(times):.2f} ms, max {max(times):.2f} ms (50 samples).\n")


# ------------------------------------------------------------------- main ---

def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=5)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--top", type=int, default=20)
    parser.add_argument("--skip", default="", help="comma-separated sections to skip")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--strace-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.strace_child:
        return strace_child(args)
    skip = set(filter(None, args.skip.split(",")))
    say(f"# Job orchestration profile\n\n{machine_line()}\n")
    work = Path(tempfile.mkdtemp(prefix="mmo-jobs-profile-"))
    dirs = bench.prepare(work, capacity=32)
    try:
        from mmo_kernel import api

        sid = api.create_session(dirs["profile"], cwd=dirs["ws"],
                                 bindings={"*": "local_scripted"})["session_id"]
        bench.mmo_once(sid)  # warm-up: the gateway, caches
        if "imports" not in skip:
            section_imports(args)
            section_live_imports(args, dirs, sid)
        if "cprofile" not in skip:
            section_cprofile(args, sid)
        if "batch" not in skip:
            section_batch(args, sid)
        if "host" not in skip:
            section_host(args, dirs, sid)
        if "strace" not in skip:
            section_strace(args, work)
            section_fsync_cost(work)
        say(machine_line())
    finally:
        bench.cleanup(dirs)
        shutil.rmtree(work, ignore_errors=True)
    if args.out:
        args.out.write_text("\n".join(OUT) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

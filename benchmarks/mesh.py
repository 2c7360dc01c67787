"""Benchmark mmo_mesh: cold start to the ``initialize`` reply and ``agent_status`` latency.

Each figure is printed beside a bare ``python -c pass`` start measured in the
same run, as a ratio, so a slow machine does not hide a regression.
Targets: cold start <= 250 ms, ``agent_status`` p50 <= 20 ms.

Run: ``.venv/bin/python benchmarks/mesh.py [--runs N] [--calls N]``.
Until ``mmo_kernel.api`` provides ``load_job``/``public_job``, the status
call runs against a minimal reader of the job record (labelled in the output).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import select
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _bench import machine_line, summary

from mmo_kernel import package_version
from mmo_kernel.mesh.capabilities import write_capabilities
from mmo_kernel.mesh.tokens import mint_token
from mmo_kernel.state.files import atomic_write_json

INIT = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18"},
}
MMO = [str(Path(sys.executable).with_name("mmo")), "mcp"]
"""The mesh exactly as agents start it (``[mcp_servers.mmo_mesh]``)."""


def _read_line(proc: subprocess.Popen, timeout: float = 10) -> bytes:
    fd = proc.stdout.fileno()
    data = b""
    while not data.endswith(b"\n"):
        if not select.select([fd], [], [], timeout)[0]:
            raise TimeoutError("no reply")
        chunk = os.read(fd, 65536)
        if not chunk:
            raise EOFError("server exited")
        data += chunk
    return data


def bare_start(runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        times.append(time.perf_counter() - start)
    return times


def cold_start(runs: int, env: dict[str, str]) -> list[float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        proc = subprocess.Popen(
            MMO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )
        proc.stdin.write((json.dumps(INIT) + "\n").encode())
        proc.stdin.flush()
        _read_line(proc)
        times.append(time.perf_counter() - start)
        proc.stdin.close()
        proc.wait(10)
        proc.stdout.close()
    return times


def _layout(state: Path) -> tuple[dict[str, str], str]:
    """A running session with one running job, as the session/job layers write them."""
    root_token, root_hash = mint_token()
    session_id, run_id, job_id = "bench-session", "bench-run", "bench-job"
    snap = state / "snapshots" / "bench-snap"
    snap.mkdir(parents=True)
    atomic_write_json(
        snap / "profile.json",
        {
            "root_agent": "lead",
            "coordination": {"max_depth": 1},
            "agents": {"lead": {"can_spawn": ["w"]}, "w": {}},
        },
    )
    digest = hashlib.sha256((snap / "profile.json").read_bytes()).hexdigest()
    manifest = {"snapshot_hash": "bench-snap", "files": {"profile.json": digest}}
    atomic_write_json(snap / "manifest.json", manifest)
    sdir = state / "sessions" / session_id
    sdir.mkdir(parents=True)
    atomic_write_json(
        sdir / "session.json",
        {
            "session_id": session_id,
            "status": "running",
            "root_agent": "lead",
            "snapshot_hash": "bench-snap",
            "current_run_id": run_id,
            "root_mcp_token_hash": root_hash,
        },
    )
    write_capabilities(sdir, root_mcp_token=root_token)
    (state / "jobs" / job_id).mkdir(parents=True)
    atomic_write_json(
        state / "jobs" / job_id / "metadata.json",
        {"schema_version": 1, "package_version": package_version(), "job_id": job_id,
         "session_id": session_id, "agent": "w", "status": "running",
         "created_at": "2026-01-01T00:00:00+00:00"},
    )
    env = dict(
        os.environ,
        MMO_STATE_DIR=str(state),
        MMO_ROOT_SESSION_ID=session_id,
        MMO_RUN_ID=run_id,
        MMO_CALLER_AGENT="lead",
        MMO_CALLER_TOKEN=root_token,
    )
    return env, job_id


def status_calls(calls: int, env: dict[str, str], job_id: str) -> tuple[list[float], str]:
    proc = subprocess.Popen(
        MMO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
    )
    proc.stdin.write((json.dumps(INIT) + "\n").encode())
    proc.stdin.flush()
    _read_line(proc)
    times, first = [], ""
    for i in range(calls + 3):
        request = {
            "jsonrpc": "2.0",
            "id": i + 1,
            "method": "tools/call",
            "params": {"name": "agent_status", "arguments": {"job_ids": [job_id]}},
        }
        start = time.perf_counter()
        proc.stdin.write((json.dumps(request) + "\n").encode())
        proc.stdin.flush()
        reply = json.loads(_read_line(proc))
        elapsed = time.perf_counter() - start
        if i == 0:
            first = json.dumps(reply["result"]["structuredContent"])[:120]
            assert reply["result"]["isError"] is False, reply
        if i >= 3:  # the first calls load pydantic and the tool models
            times.append(elapsed)
    proc.stdin.close()
    proc.wait(10)
    proc.stdout.close()
    return times, first


def _ms(value: float) -> str:
    return f"{value * 1000:.1f} ms"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="tiny sizes (smoke test)")
    args = parser.parse_args()
    if args.quick:
        args.runs, args.calls = 2, 5
    print(machine_line(), flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        env, job_id = _layout(Path(tmp))
        bare = statistics.median(bare_start(args.runs))
        cold = statistics.median(cold_start(args.runs, env))
        calls, sample = status_calls(args.calls, env, job_id)
    quantiles = statistics.quantiles(calls, n=100)
    p50, p99 = statistics.median(calls), quantiles[98]
    print(f"bare python start (median of {args.runs}): {_ms(bare)}")
    print(
        f"mesh cold start to initialize reply:      {_ms(cold)}  ratio {cold / bare:.2f}x  "
        f"target <= 250 ms: {'ok' if cold <= 0.25 else 'MISSED'}"
    )
    print(
        f"agent_status p50: {_ms(p50)}  p99: {_ms(p99)}  ratio p50/bare {p50 / bare:.3f}  "
        f"target p50 <= 20 ms: {'ok' if p50 <= 0.02 else 'MISSED'}"
    )
    print(f"status reply sample: {sample}")
    summary("mesh", "cold_start_ms", cold * 1000, "<=250", cold <= 0.25)
    summary("mesh", "cold_start_x_python", cold / bare)
    summary("mesh", "agent_status_p50_ms", p50 * 1000, "<=20", p50 <= 0.02)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

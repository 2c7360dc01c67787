"""The benchmark scripts still run: each at tiny sizes (``--quick``) exits 0 and prints
its ``SUMMARY`` lines, and ``benchmarks/run.py`` gathers them into its table.

No timing is asserted: the figures of a tiny run on a shared machine mean
nothing; ``make bench`` measures them (docs/benchmarks.md). The process guard
(suite-wide) fails a test whose benchmark left a job host, app-server or
gateway running.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
HANG_GUARD_SECONDS = 900
"""Only so a hung script cannot hang the suite; not a performance bound."""


def _run(*argv: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("MMO_") or k == "MMO_TEST_PROCESS_GUARD"}
    env["TMPDIR"] = str(tmp_path)  # every temp dir a benchmark makes lands here
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=HANG_GUARD_SECONDS, stdin=subprocess.DEVNULL)


def _summaries(stdout: str, name: str) -> list[list[str]]:
    return [line.split() for line in stdout.splitlines() if line.startswith(f"SUMMARY {name} ")]


@pytest.mark.parametrize("name, metric", [
    ("jobs", "overhead_delta_p50_ms"),
    ("state", "list_jobs_60_ms"),
    ("mesh", "cold_start_ms"),
    ("gateway", "added_total_p50_ms"),
    ("views", "refresh_cpu_p50_ms"),
    ("webui", "session_page_50_agents_p50_ms"),
])
def test_each_benchmark_runs_at_tiny_sizes_and_prints_its_summary(name, metric, tmp_path):
    done = _run(str(BENCHMARKS / f"{name}.py"), "--quick", tmp_path=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    rows = _summaries(done.stdout, name)
    assert rows, done.stdout[-2000:]
    assert all(len(row) == 6 and row[5] in ("met", "NOT_met", "info") for row in rows), rows
    assert metric in {row[2] for row in rows}
    float(next(row[3] for row in rows if row[2] == metric))  # a number
    assert "load average" in done.stdout  # figures are read against the machine's load
    assert list(tmp_path.glob("mmo-*")) == []  # the benchmark removed its temp state


def test_run_py_gathers_every_summary_line_into_one_table(tmp_path):
    done = _run(str(BENCHMARKS / "run.py"), "--quick", "mesh", tmp_path=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    table = done.stdout.split("== summary", 1)[1].splitlines()
    header = next(i for i, line in enumerate(table) if line.split()[:2] == ["benchmark", "metric"])
    rows = [line.split() for line in table[header + 2:] if line.strip()]
    assert {row[1] for row in rows} == {row[2] for row in _summaries(done.stdout, "mesh")}
    assert all(row[0] == "mesh" for row in rows)


def test_run_py_refuses_an_unknown_benchmark_by_name(tmp_path):
    done = _run(str(BENCHMARKS / "run.py"), "nosuch", tmp_path=tmp_path)
    assert done.returncode != 0
    assert "unknown benchmark nosuch" in done.stderr

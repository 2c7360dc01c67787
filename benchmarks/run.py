"""``make bench``: every benchmark in this folder, one after another, then one summary table.

Each benchmark measures its own baseline in the same run and prints ratios
against it, so figures from a slow or busy machine stay comparable. This
runner sequences them, streams their output, gathers the ``SUMMARY`` lines
each prints at the end (see ``_bench.py``) into one table, and fails when one
of them fails. Pass names to run only those (``python benchmarks/run.py mesh
jobs``); ``--quick`` passes ``--quick`` (tiny sizes) to each. Files whose name
starts with ``_`` are helpers, not benchmarks.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench import machine_line  # noqa: E402

HERE = Path(__file__).resolve().parent
ORDER = ("jobs", "state", "mesh", "gateway", "views", "webui")
"""Known benchmarks first, in this order; any other script follows alphabetically."""


def benchmarks(names: list[str]) -> list[Path]:
    found = [p for p in HERE.glob("*.py")
             if p.name != Path(__file__).name and not p.name.startswith("_")]
    found.sort(key=lambda p: (ORDER.index(p.stem) if p.stem in ORDER else len(ORDER), p.stem))
    if not names:
        return found
    by_name = {p.stem: p for p in found}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise SystemExit(f"benchmarks/run.py: unknown benchmark {', '.join(unknown)} "
                         f"(have: {', '.join(sorted(by_name))})")
    return [by_name[n] for n in names]


def run_one(path: Path, extra: list[str]) -> tuple[int, list[list[str]]]:
    """Run one benchmark, echoing its output; its exit code and ``SUMMARY`` rows."""
    rows = []
    proc = subprocess.Popen([sys.executable, str(path), *extra], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, text=True, bufsize=1)
    assert proc.stdout is not None
    for line in proc.stdout:
        print(line, end="", flush=True)
        if line.startswith("SUMMARY "):
            parts = line.split()
            if len(parts) >= 6:
                rows.append(parts[1:6])
    return proc.wait(), rows


def table(rows: list[list[str]]) -> str:
    head = ["benchmark", "metric", "value", "target", "status"]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) if i != 2 else c.rjust(w) for i, (c, w) in
                       enumerate(zip(r, widths, strict=True))) for r in [head, *rows]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    extra = [a for a in argv if a.startswith("--")]
    names = [a for a in argv if not a.startswith("--")]
    failed, rows, seconds = [], [], {}
    began = time.monotonic()
    for path in benchmarks(names):
        print(f"== {path.stem} ==", flush=True)
        started = time.monotonic()
        code, found = run_one(path, extra)
        seconds[path.stem] = time.monotonic() - started
        print(f"== {path.stem}: exit {code} after {seconds[path.stem]:.0f} s ==\n", flush=True)
        rows.extend(found)
        if code:
            failed.append(path.stem)
            rows.append([path.stem, "exit_code", str(code), "0", "FAILED"])
    print(f"== summary ({time.monotonic() - began:.0f} s: "
          + ", ".join(f"{k} {v:.0f} s" for k, v in seconds.items()) + ") ==")
    print(machine_line())
    print("ratios are against baselines measured in the same run; see docs/benchmarks.md")
    if rows:
        print(table(rows))
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

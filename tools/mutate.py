"""`make mutate`: mutation testing of MMO's safety modules with mutmut, and its score.

Which files are mutated and which tests judge them is configured in
pyproject.toml ``[tool.mutmut]`` (``only_mutate``, ``pytest_add_cli_args*``). This
script starts from a fresh ``mutants/`` copy (a stale copy would test old code),
runs only the mutants in scope (of ``jobs/records.py`` only the revision helpers)
and prints killed / total per module. Exit status 1 when the total is below
``TARGET``. ``--report`` prints the score of the last run without running again.

Not part of CI: a full run takes tens of minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import tomllib
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MUTANTS = ROOT / "mutants"
TARGET = 0.90

# Files of which only some functions are safety code: the mutant-name globs to run.
FUNCTIONS = {
    "mmo_kernel/jobs/records.py": [
        "xǁJobRecordǁrevision__mutmut_*", "x_control_revision__mutmut_*",
        "x__changes_progress__mutmut_*", "x_apply_job_fields__mutmut_*",
        "x_bump_progress__mutmut_*", "x_progress_revision__mutmut_*",
    ],
}

# mutmut's exit-code classes: a mutant is detected when a test failed or timed out on it.
DETECTED = {"killed", "timeout", "segfault"}


def scope_files() -> list[str]:
    """The ``only_mutate`` files that exist (a module still being written is skipped)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["tool"]["mutmut"]
    return [path for path in config["only_mutate"] if (ROOT / path).is_file()]


def module_name(path: str) -> str:
    return path.removesuffix(".py").replace("/", ".")


def mutant_globs(files: list[str]) -> list[str]:
    globs = []
    for path in files:
        prefix = module_name(path)
        globs += [f"{prefix}.{pattern}" for pattern in FUNCTIONS.get(path, ["*"])]
    return globs


def in_scope(path: str, key: str) -> bool:
    patterns = FUNCTIONS.get(path)
    if patterns is None:
        return True
    from fnmatch import fnmatchcase

    local = key.removeprefix(module_name(path) + ".")
    return any(fnmatchcase(local, pattern) for pattern in patterns)


def statuses(path: str) -> dict[str, str]:
    """``{mutant: status}`` of one file from mutmut's ``.meta`` file (empty when not run)."""
    from mutmut.stats import status_by_exit_code

    meta = MUTANTS / f"{path}.meta"
    if not meta.is_file():
        return {}
    codes = json.loads(meta.read_text("utf-8"))["exit_code_by_key"]
    return {key: status_by_exit_code[code] for key, code in codes.items() if in_scope(path, key)}


def report(files: list[str]) -> float:
    """Print the per-module table and every undetected mutant; return the total score."""
    rows, undetected, total = [], [], Counter()
    for path in files:
        by_status = statuses(path)
        counts = Counter(by_status.values())
        detected = sum(counts[s] for s in DETECTED)
        rows.append((path, detected, len(by_status), counts))
        total.update(counts)
        undetected += sorted(k for k, s in by_status.items() if s not in DETECTED)
    print(f"\n{'module':44} {'killed':>7} {'total':>6} {'score':>7}  other")
    for path, detected, count, counts in rows:
        other = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()) if s != "killed")
        score = f"{detected / count:.1%}" if count else "-"
        print(f"{path:44} {detected:7} {count:6} {score:>7}  {other}")
    detected, count = sum(total[s] for s in DETECTED), sum(total.values())
    score = detected / count if count else 0.0
    print(f"{'total':44} {detected:7} {count:6} {score:7.1%}  (target {TARGET:.0%})")
    if undetected:
        print(f"\nundetected mutants ({len(undetected)}; `mutmut show NAME` prints the diff):")
        for key in undetected:
            print("  ", key)
    return score


def run(files: list[str], jobs: int) -> None:
    """A fresh ``mutmut run`` of the mutants in scope; its output goes to ``mutants/run.log``."""
    shutil.rmtree(MUTANTS, ignore_errors=True)
    MUTANTS.mkdir()
    log = MUTANTS / "run.log"
    mutmut = Path(sys.executable).parent / "mutmut"
    command = [str(mutmut), "run", "--max-children", str(jobs), *mutant_globs(files)]
    print(f"mutmut {len(files)} files, {jobs} in parallel; output in {log.relative_to(ROOT)}",
          flush=True)
    started = time.monotonic()
    with log.open("w") as out:
        done = subprocess.run(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL, check=False)
    minutes = (time.monotonic() - started) / 60
    if done.returncode != 0:
        tail = log.read_text(errors="replace")[-3000:]
        sys.exit(f"{tail}\nmutmut run failed with exit status {done.returncode} "
                 f"(after {minutes:.0f} min; {log.relative_to(ROOT)})")
    print(f"mutmut run took {minutes:.0f} min")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--report", action="store_true", help="score the last run only")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2,
                        help="mutants tested in parallel (default: the number of CPUs)")
    args = parser.parse_args()
    files = scope_files()
    if not args.report:
        run(files, args.jobs)
    sys.exit(0 if report(files) >= TARGET else 1)


if __name__ == "__main__":
    main()

"""``make bench``: every benchmark in this folder, one after another, in this interpreter.

Each benchmark measures its own baseline in the same run and prints ratios
against it, so figures from a slow or busy machine stay comparable. This
runner only sequences them and fails when one of them fails; pass a name
(``python benchmarks/run.py mesh``) to run only that one.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def benchmarks(names: list[str]) -> list[Path]:
    found = sorted(p for p in HERE.glob("*.py") if p.name != Path(__file__).name)
    if not names:
        return found
    by_name = {p.stem: p for p in found}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise SystemExit(f"benchmarks/run.py: unknown benchmark {', '.join(unknown)} "
                         f"(have: {', '.join(sorted(by_name))})")
    return [by_name[n] for n in names]


def main(argv: list[str]) -> int:
    failed = []
    for path in benchmarks(argv):
        print(f"== {path.stem} ==", flush=True)
        started = time.monotonic()
        code = subprocess.run([sys.executable, str(path)], stdin=subprocess.DEVNULL).returncode
        print(f"== {path.stem}: exit {code} after {time.monotonic() - started:.0f} s ==\n",
              flush=True)
        if code:
            failed.append(path.stem)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

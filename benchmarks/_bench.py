"""Shared helpers of the benchmark scripts: percentiles, the machine, the summary lines.

Every benchmark ends with one ``SUMMARY`` line per headline figure::

    SUMMARY <benchmark> <metric> <value> <target> <status>

(``status`` is ``met``, ``NOT_met`` or ``info``; ``target`` is ``-`` when there
is none). ``benchmarks/run.py`` collects those lines into its closing table.
Not a benchmark itself: ``run.py`` skips files whose name starts with ``_``.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path


def pct(values: list[float], q: float) -> float:
    """The ``q`` quantile (nearest rank) of ``values``; p99 of a small sample is its maximum."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def load() -> float:
    """The 1-minute load average (the machine is shared: read figures against it)."""
    return os.getloadavg()[0]


def machine_line() -> str:
    return (f"machine: {os.cpu_count()} CPUs ({cpu_model()}), Python {platform.python_version()}, "
            f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


def summary(bench: str, metric: str, value: float | str, target: str = "-",
            met: bool | None = None) -> None:
    """Print one ``SUMMARY`` line (``met=None``: a figure without a target)."""
    status = "info" if met is None else ("met" if met else "NOT_met")
    shown = f"{value:.3f}".rstrip("0").rstrip(".") if isinstance(value, float) else str(value)
    print(f"SUMMARY {bench} {metric} {shown} {target.replace(' ', '')} {status}", flush=True)

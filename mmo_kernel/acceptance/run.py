"""`mmo accept project-tools`: run the spec 12 acceptance cases and write the JSON report.

Setup (server, enrolment, projects, runner, both projects online) is measured apart from
the cases. A failing case records its one-line ``failure`` and the run goes on with the
next one. Both subprocesses are stopped in every outcome (a failure, Ctrl-C, SIGTERM); the
temp folder is removed after a passing run and kept (logs included) after a failing one.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

from mmo_kernel.acceptance.cases import CASES, CaseContext
from mmo_kernel.acceptance.harness import Stack
from mmo_kernel.acceptance.mcp_client import (
    DIRECT_TOOLS,
    DISPATCHER,
    CallRecord,
    CaseFailure,
    one_line,
)

SUITE = "project-tools"


def select_cases(names: str | None) -> list[str]:
    """The cases to run, in the spec's order; an unknown name is a one-line error."""
    if not names:
        return list(CASES)
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    unknown = [n for n in wanted if n not in CASES]
    if unknown or not wanted:
        raise ValueError(f"--cases: unknown case {', '.join(unknown) or '(none given)'}; "
                         f"cases are {', '.join(CASES)}")
    return [n for n in CASES if n in wanted]


def totals(records: Sequence[CallRecord], wall: float) -> dict[str, Any]:
    return {"calls": len(records),
            "request_bytes": sum(r.request_bytes for r in records),
            "response_bytes": sum(r.response_bytes for r in records),
            "tool_failures": sum(1 for r in records if not r.success),
            "wall_seconds": round(wall, 3)}


@contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """SIGTERM ends the run like Ctrl-C does, so the subprocesses are still stopped."""
    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt
    try:
        previous = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread: nothing to install
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def _signals_held() -> Iterator[None]:
    """A second Ctrl-C (or a SIGTERM) while the processes are being stopped must not
    leave them running: both signals are ignored until they are gone."""
    try:
        previous = {sig: signal.signal(sig, signal.SIG_IGN)
                    for sig in (signal.SIGINT, signal.SIGTERM)}
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _setup(stack: Stack, version: str) -> None:
    stack.start_server()
    stack.enrol()
    stack.write_projects()
    stack.write_runner_config()
    stack.start_runner()
    client = stack.connect_client(version)
    client.case = "setup"
    listed = {t.get("name") for t in client.list_tools()}
    missing = sorted((DIRECT_TOOLS | {DISPATCHER}) - listed)
    if missing:
        raise CaseFailure(f"tools/list lacks the direct tools {', '.join(missing)}")
    stack.wait_online()


def _run_case(stack: Stack, name: str) -> dict[str, Any]:
    assert stack.client is not None
    stack.client.case = name
    first = len(stack.client.records)
    ctx = CaseContext(stack, stack.client)
    started = time.monotonic()
    failure, evidence = None, {}
    try:
        evidence = CASES[name](ctx)
    except CaseFailure as exc:
        failure = one_line(str(exc))
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # a malformed output (missing field, wrong type) fails the case
        detail = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
        failure = one_line(f"unexpected tool output ({type(exc).__name__}: {detail})")
    return {"name": name, "correctness": "failed" if failure else "passed",
            "failure": failure, "evidence": ctx.evidence if failure else evidence,
            "calls": len(stack.client.records) - first,
            "wall_seconds": round(time.monotonic() - started, 3)}


def run_acceptance(report_path: Path, names: Sequence[str], out: TextIO = sys.stdout) -> int:
    """Run ``names``; write the report; 0 only when setup and every case passed."""
    from mmo_kernel import package_version

    version = package_version()
    started = time.monotonic()
    stack = Stack.create()
    results: list[dict[str, Any]] = []
    setup_failure: str | None = None
    setup_wall = 0.0
    interrupted = False
    try:
        with _sigterm_interrupts():
            try:
                _setup(stack, version)
            except CaseFailure as exc:
                setup_failure = one_line(str(exc))
            except (OSError, RuntimeError, ValueError) as exc:
                setup_failure = one_line(f"{type(exc).__name__}: {exc}")
            setup_wall = time.monotonic() - started
            _say(out, f"setup: {'failed: ' + setup_failure if setup_failure else 'ready'} "
                      f"({setup_wall:.1f} s)")
            for name in names:
                if setup_failure:
                    results.append({"name": name, "correctness": "failed",
                                    "failure": "not run: setup failed", "evidence": {},
                                    "calls": 0, "wall_seconds": 0.0})
                    continue
                result = _run_case(stack, name)
                results.append(result)
                _say(out, f"{name}: {result['correctness']} ({result['wall_seconds']:.1f} s)"
                          + (f": {result['failure']}" if result["failure"] else ""))
    except KeyboardInterrupt:
        interrupted = True
    finally:
        with _signals_held():
            codes = stack.stop()
    for name, code in codes.items():
        if code not in (0, None):
            print(f"mmo accept: mmo {name} exited with code {code} when stopped",
                  file=sys.stderr)
    records = list(stack.recorded)
    report = build_report(results, records, setup_failure, setup_wall,
                          time.monotonic() - started, version, interrupted)
    _write_report(report_path, report)
    passed = report["correctness"] == "passed"
    if passed:
        stack.remove()
    else:
        _say(out, f"logs kept in {stack.root / 'logs'}")
    _say(out, f"{SUITE}: {report['correctness']}"
              + (f" ({report['failure']})" if report["failure"] else "")
              + f"; report: {report_path}")
    if interrupted:
        raise KeyboardInterrupt
    return 0 if passed else 1


def build_report(results: list[dict[str, Any]], records: list[CallRecord],
                 setup_failure: str | None, setup_wall: float, wall: float, version: str,
                 interrupted: bool) -> dict[str, Any]:
    failed = [r["name"] for r in results if r["correctness"] != "passed"]
    if setup_failure:
        failure = f"setup: {setup_failure}"
    elif interrupted:
        failure = "interrupted before every case ran"
    elif failed:
        failure = f"{len(failed)} of {len(results)} cases failed: {', '.join(failed)}"
    else:
        failure = None
    counted = {r["name"] for r in results if not r["name"].startswith("extra_")}
    return {
        "correctness": "failed" if failure else "passed",
        "failure": failure,
        "cases": results,
        "calls": [r.as_dict() for r in records],
        "totals": totals([r for r in records if r.case in counted],
                         sum(r["wall_seconds"] for r in results if r["name"] in counted)),
        "setup_totals": totals([r for r in records if r.case == "setup"], setup_wall),
        "version": version,
        "wall_seconds": round(wall, 3),
    }


def _write_report(path: Path, report: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _say(out: TextIO, text: str) -> None:
    out.write(text + "\n")
    out.flush()

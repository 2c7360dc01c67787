"""``mmo accept project-tools``: the spec 12 acceptance run on a disposable server + runner."""

from __future__ import annotations

import argparse
from pathlib import Path

from mmo_kernel.cli.output import RAW


def _run_project_tools(args: argparse.Namespace) -> int:
    from mmo_kernel.acceptance.run import run_acceptance, select_cases

    report = Path(args.report).expanduser()
    if report.is_dir():
        raise ValueError(f"--report {report}: is a directory; give a file path")
    if not report.parent.is_dir():
        raise ValueError(f"--report {report}: folder {report.parent} does not exist")
    names = select_cases(args.cases)
    return run_acceptance(report.resolve(), names)


def register(sub: argparse._SubParsersAction) -> None:
    accept = sub.add_parser("accept", help="acceptance runs against disposable processes",
                            description="Acceptance suites that start their own processes "
                                        "in a temp folder and write a JSON report.")
    suites = accept.add_subparsers(dest="accept_suite", metavar="SUITE", required=True)
    parser = suites.add_parser(
        "project-tools", help="the project tools of `mmo serve` + `mmo runner` (spec 12)",
        formatter_class=RAW,
        description=(
            "Start a loopback `mmo serve` (port 0) and an offline `mmo runner` with private "
            "state and config in a temp folder, enrol a user, a PAT and a runner token, "
            "register the projects `data` and `code`, and run the acceptance cases through "
            "real MCP requests (2026-07-28 stateless form). No model is involved. Exits 0 "
            "only if every case passed; the temp folder (with the server and runner logs) "
            "is kept when one failed."),
        epilog="examples:\n  mmo accept project-tools --report accept.json\n"
               "  mmo accept project-tools --report r.json --cases encoded_csv,stale_read_revision")
    parser.add_argument("--report", required=True, metavar="FILE",
                        help="where to write the JSON report")
    parser.add_argument("--cases", metavar="NAME,...",
                        help="run only these cases (comma-separated), in the spec's order")
    parser.set_defaults(func=_run_project_tools)

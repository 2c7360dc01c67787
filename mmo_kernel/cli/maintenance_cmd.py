"""``mmo smoke`` (does each agent of a team really work?) and ``mmo clean`` (retention)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from mmo_kernel.cli.output import RAW, ago, json_flag, print_json, table

OFFLINE_BINDINGS = {"*": "local_scripted"}


def run_smoke(args: argparse.Namespace) -> int:
    from mmo_kernel.lifecycle.smoke import smoke_profile

    if args.wall <= 0:
        raise ValueError("--wall must be a positive number of seconds")
    report = smoke_profile(args.profile, args.cwd,
                           bindings=OFFLINE_BINDINGS if args.offline else None,
                           root_only=args.root_only, workers_only=args.workers_only,
                           wall_seconds=args.wall)
    if args.json:
        print_json(report)
    else:
        table(("agent", "backend", "result", "marker", "tools", "error"),
              [(r["agent"], r["backend"], "ok" if r["error"] is None else "FAIL",
                "yes" if r["marker_present"] else "no",
                f"{len(r['successful_tools'])}/{len(r['required_tools'])}", r["error"] or "")
               for r in report["results"]])
        print(f"smoke {'passed' if report['passed'] else 'FAILED'} for {args.profile}")
    return 0 if report["passed"] else 1


def _show_plan(plan: dict[str, Any], job_days: float, session_days: float) -> None:
    if plan["sessions"]:
        print(f"sessions finished over {session_days:g} day(s) ago ({len(plan['sessions'])}):")
        table(("session", "profile", "status", "finished"),
              [(s["session_id"], s["profile_id"], s["status"], ago(s["finished_at"]))
               for s in plan["sessions"]])
    if plan["jobs"]:
        print(f"jobs, with their worktrees ({len(plan['jobs'])}; expired: finished over "
              f"{job_days:g} day(s) ago):")
        table(("job", "agent", "status", "finished", "why"),
              [(j["job_id"], j["agent"], j["status"], ago(j["finished_at"]), j["reason"])
               for j in plan["jobs"]])
    if plan["compiles"]:
        print(f"staging dirs of crashed profile compiles: {len(plan['compiles'])}")


def _confirmed(args: argparse.Namespace) -> bool:
    """``--yes``, or a "y" typed on the terminal; no terminal and no ``--yes`` is refused."""
    if args.yes:
        return True
    if not sys.stdin.isatty():
        raise RuntimeError("clean removes the records listed above and needs confirmation, but "
                           "stdin is not a terminal: pass --yes to remove them (or --dry-run "
                           "to only list them)")
    sys.stdout.flush()
    try:
        answer = input("Remove them? [y/N] ")
    except EOFError:
        answer = ""
    return answer.strip().lower() in ("y", "yes")


def run_clean(args: argparse.Namespace) -> int:
    from mmo_kernel.config.settings import load_settings
    from mmo_kernel.jobs.workspace import job_workspace_cleanup
    from mmo_kernel.sessions.retention import clean_state, plan_clean

    settings = load_settings()
    job_days = settings.job_retention_days if args.job_days is None else args.job_days
    session_days = (settings.session_retention_days if args.session_days is None
                    else args.session_days)
    plan = plan_clean(job_days, session_days)
    report = {"job_days": job_days, "session_days": session_days, "candidates": plan}
    empty = not (plan["sessions"] or plan["jobs"] or plan["compiles"])
    if args.dry_run or empty:
        if args.json:
            print_json({**report, "jobs": 0, "sessions": 0, "dry_run": args.dry_run})
        elif empty:
            print(f"nothing to remove (jobs finished over {job_days:g} day(s) ago, sessions "
                  f"over {session_days:g} day(s) ago)")
        else:
            _show_plan(plan, job_days, session_days)
            print("dry run: nothing removed")
        return 0
    if not args.json:
        _show_plan(plan, job_days, session_days)
    if not _confirmed(args):
        print("mmo: clean: nothing removed", file=sys.stderr)
        return 1
    removed = clean_state(job_days, session_days, job_cleanup=job_workspace_cleanup, only=plan)
    if args.json:
        print_json({**report, **removed, "dry_run": False})
        return 0
    print(f"removed {removed['jobs']} job(s) and {removed['sessions']} session(s) "
          f"(jobs finished over {job_days:g} day(s) ago or whose session is gone, sessions "
          f"finished over {session_days:g} day(s) ago)")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    smoke = sub.add_parser("smoke", help="check every agent of a team with a marker task",
                           formatter_class=RAW, description=(
        "Give each agent of PROFILE a short marker task (the root through a root run, "
        "workers as jobs) and judge it from evidence only: the final text must hold the "
        "marker and every required tool must show a successful call. Exit 0 when all pass."),
        epilog="examples:\n  mmo smoke adaptive-engineering\n"
               "  mmo smoke adaptive-engineering --offline --root-only\n"
               "  mmo smoke my-team --workers-only --json")
    smoke.add_argument("profile", metavar="PROFILE", help="a profile id or a profile folder path")
    only = smoke.add_mutually_exclusive_group()
    only.add_argument("--root-only", action="store_true",
                      help="exercise only the root agent and its native agents")
    only.add_argument("--workers-only", action="store_true",
                      help="exercise every agent but the root (its native agents included)")
    smoke.add_argument("--offline", action="store_true",
                       help="bind every agent to the local scripted model")
    smoke.add_argument("--cwd", default=".", metavar="DIR", help="workspace (default: here)")
    smoke.add_argument("--wall", type=float, default=300.0, metavar="SECONDS",
                       help="limit per marker task (default 300)")
    json_flag(smoke, "print the report as JSON")
    smoke.set_defaults(func=run_smoke)

    clean = sub.add_parser("clean", help="remove old finished sessions and jobs",
                           formatter_class=RAW, description=(
        "Remove terminal jobs (and their worktrees) and terminal sessions that finished "
        "longer ago than the retention, and finished jobs whose session is gone, whatever "
        "their age. Live sessions, unfinished jobs and jobs of live sessions are never "
        "removed. Shows what it will remove and asks first (--yes: don't ask; without a "
        "terminal --yes is required). Defaults come from settings.toml (job_retention_days, "
        "session_retention_days)."),
        epilog="examples:\n  mmo clean\n  mmo clean --dry-run\n"
               "  mmo clean --job-days 3 --session-days 7 --yes")
    clean.add_argument("--job-days", type=float, metavar="N",
                       help="keep jobs that finished within N days")
    clean.add_argument("--session-days", type=float, metavar="N",
                       help="keep sessions that finished within N days")
    clean.add_argument("--dry-run", action="store_true",
                       help="only list what would be removed")
    clean.add_argument("-y", "--yes", action="store_true", help="remove without asking")
    json_flag(clean)
    clean.set_defaults(func=run_clean)

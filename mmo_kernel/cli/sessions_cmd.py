"""``mmo run|start|resume``, ``mmo sessions``, ``mmo session show`` and the lifecycle controls.

A run's live view goes to stderr and its result to stdout, so
``mmo run ... > result.md`` keeps the answer and the terminal keeps the view.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args

from mmo_kernel.cli.costs import job_money, root_money, with_job_cost, with_root_cost
from mmo_kernel.cli.output import (
    RAW,
    ago,
    duration,
    fields,
    print_json,
    short,
    table,
    tokens,
    unreadable_note,
)
from mmo_kernel.cli.output import json_flag as _json
from mmo_kernel.cli.paging import add_filters
from mmo_kernel.state.records import is_unreadable

OFFLINE_BINDINGS = {"*": "local_scripted"}
EXIT_DETACHED = 124
SESSION_ID_HELP = "a session id or a unique prefix of one (see `mmo sessions`)"


# ------------------------------------------------------------------ run --


def run_run(args: argparse.Namespace) -> int:
    from mmo_kernel.cli.live import LiveView
    from mmo_kernel.config.settings import load_settings
    from mmo_kernel.lifecycle.root_exec import run_root_exec

    wall = args.wall if args.wall is not None else float(load_settings().wall_timeout_seconds)
    if wall <= 0:
        raise ValueError("--wall must be a positive number of seconds")
    view = None if args.json else LiveView(sys.stderr)
    try:
        outcome = run_root_exec(args.profile, args.cwd, args.prompt, wall, images=args.image,
                                sandbox_mode=args.sandbox,
                                bindings=OFFLINE_BINDINGS if args.offline else None,
                                on_progress=view)
    except KeyboardInterrupt:
        sid = view.session_id if view else None
        if sid:
            print(f"mmo: interrupted; session {sid} keeps running in the background "
                  f"(`mmo session show {sid}`, `mmo stop {sid}`)", file=sys.stderr)
            return 130
        raise
    if view is not None:
        view.finish(outcome["session"])
    if args.json:
        print_json(outcome)
    else:
        _print_outcome(outcome)
    return int(outcome["exit_code"])


def _print_outcome(outcome: dict[str, Any]) -> None:
    session = outcome["session"]
    sid = session["session_id"]
    if outcome.get("result"):
        text = outcome["result"]
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    usage = tokens(session.get("root_usage"))
    line = (f"session {sid} {outcome['status']} after "
            f"{duration(outcome['elapsed_seconds'])}" + (f", root {usage}" if usage else ""))
    print(line, file=sys.stderr)
    if outcome.get("root_status") == "harness_wall_detached":
        print(f"the wall limit expired; the root keeps working. Partial result: "
              f"{session.get('partial_result_path')}. Follow it with `mmo session show {sid}`.",
              file=sys.stderr)
    if outcome.get("root_status") == "root_completion_deferred":
        jobs = ", ".join(session.get("root_completion_deferred_jobs") or [])
        print(f"the root finished; its completion waits for running workers ({jobs}). "
              f"Follow it with `mmo session show {sid}`.", file=sys.stderr)
    if session.get("stopped_jobs"):
        print(f"stopped in place when the session ended (no running host, could no longer be "
              f"continued): {', '.join(session['stopped_jobs'])}; their partial results are "
              f"kept (`mmo job show ID`)", file=sys.stderr)
    for request in outcome.get("pending_requests") or []:
        print(f"awaiting operator input: {short(request, 100)} "
              f"(answer with `mmo continue {sid} --input TEXT`)", file=sys.stderr)
    problem = session.get("error") or (session.get("failure") or {}).get("message")
    if problem and outcome["exit_code"] != 0:
        hint = (f"; the work is kept: resume it with `mmo continue {sid}`"
                if session.get("status") == "suspended" else "")
        print(f"error: {problem}{hint}", file=sys.stderr)


# ------------------------------------------------------- interactive --


def run_start(args: argparse.Namespace) -> int:
    from mmo_kernel.lifecycle.interactive import launch_interactive

    bindings = OFFLINE_BINDINGS if args.offline else None
    return _exit_code(launch_interactive(args.profile, args.cwd, bindings=bindings))


def run_resume(args: argparse.Namespace) -> int:
    from mmo_kernel.lifecycle.interactive import resolve_resume_session, resume_interactive

    session_id = resolve_resume_session(selector=args.selector, last=args.last,
                                        cwd=str(Path.cwd()), all_cwds=args.all_cwds)
    return _exit_code(resume_interactive(session_id, allow_tainted=args.allow_tainted))


def _exit_code(result: Any) -> int:
    """The TUI's exit code; anything else (no code at all) counts as success."""
    return result if isinstance(result, int) and not isinstance(result, bool) else 0


# ------------------------------------------------------------ reading --


def _session_arg(text: str) -> str:
    """The full session id a command-line id or unambiguous prefix names."""
    from mmo_kernel.sessions.ids import resolve_session_id

    return resolve_session_id(text)


def _root_turn(record: dict[str, Any]) -> str:
    return record.get("active_root_turn_id") or record.get("root_last_turn_id") or ""


def _listed(record: dict[str, Any], args: argparse.Namespace) -> bool:
    """Filters never hide a record that cannot be read: its status and profile are unknown."""
    return is_unreadable(record) or (
        (not args.status or record["status"] in args.status)
        and (args.profile is None or record["profile_id"] == args.profile))


def _session_row(record: dict[str, Any], short_id: str) -> tuple[Any, ...]:
    if is_unreadable(record):
        return (short_id, unreadable_note(record))
    return (short_id, record["profile_id"], record["status"], ago(record.get("created_at")),
            _root_turn(record), tokens(record.get("root_usage")), root_money(record))


def run_sessions(args: argparse.Namespace) -> int:
    from mmo_kernel.cli.paging import cut, more_note, page_size
    from mmo_kernel.lifecycle.views import iter_sessions, public_session
    from mmo_kernel.sessions.ids import short_session_ids

    size = page_size(args)
    # served from the listing index; filters and the page never hide an unreadable row
    records = iter_sessions(all_sessions=args.all or bool(args.status), include_unreadable=True,
                            status=args.status, agent=args.agent, profile=args.profile,
                            since=args.since, limit=None if size is None else size + 1)
    records = [r for r in records if _listed(r, args)]
    records, more = cut(records, size, is_unreadable)
    if args.json:
        print_json({"sessions": [r if is_unreadable(r) else with_root_cost(public_session(r))
                                 for r in records], "has_more": more})
        return 0
    shorts = short_session_ids(r["session_id"] for r in records)
    table(("session", "profile", "status", "age", "root turn", "tokens", "cost"),
          [_session_row(r, shorts[r["session_id"]]) for r in records])
    if not args.all and not args.status:
        print("(active sessions only; --all includes finished ones)", file=sys.stderr)
    if more:
        more_note("sessions", size)
    return 0


def _evidence(record: dict[str, Any]) -> list[tuple[str, Any]]:
    from mmo_kernel.sessions.records import session_dir

    folder = session_dir(record["session_id"])
    names = ("root-events.jsonl", "audit.jsonl", "root-host.log", "root-prompt.txt")
    return [(f"  {name}", str(folder / name)) for name in names if (folder / name).exists()]


def _summary(record: dict[str, Any]) -> list[tuple[str, Any]]:
    failure = record.get("failure") or {}
    taint = None
    if record.get("tainted"):
        reasons = [short(r.get("reason") or r, 80) for r in record.get("taint_reasons") or []]
        taint = "TAINTED: " + ("; ".join(reasons) or "see the audit log")
    return [
        ("session", record["session_id"]), ("status", record["status"]),
        ("profile", f"{record['profile_id']} (snapshot {record['snapshot_hash'][:12]})"),
        ("kind", record.get("session_kind")), ("cwd", record.get("cwd")),
        ("root agent", record.get("root_agent")), ("thread", record.get("root_thread_id")),
        ("root turn", _root_turn(record)), ("tokens", tokens(record.get("root_usage"))),
        ("cost", root_money(record)),
        ("created", ago(record.get("created_at"))), ("finished", ago(record.get("finished_at"))),
        ("result", record.get("result_path") and
         f"{record.get('result_kind') or 'final'}: {record['result_path']}"),
        ("partial result", record.get("partial_result_path")),
        ("error", record.get("error")), ("failure", failure.get("message") or failure or None),
        ("resume error", record.get("resume_error")),
        ("pending input", [short(r, 80) for r in record.get("pending_requests") or []]),
        ("warnings", "; ".join(record.get("profile_warnings") or [])), ("taint", taint),
        ("runtime current", "no (started by another MMO version)"
         if record.get("runtime_current") is False else None),
    ]


def run_show(args: argparse.Namespace) -> int:
    from mmo_kernel.jobs.ids import short_job_ids
    from mmo_kernel.jobs.listing import list_jobs
    from mmo_kernel.jobs.records import public_job
    from mmo_kernel.lifecycle.controls import load_session
    from mmo_kernel.lifecycle.views import public_session

    args.session_id = _session_arg(args.session_id)
    record = public_session(load_session(args.session_id))
    jobs = [j if is_unreadable(j) else public_job(j)
            for j in list_jobs(args.session_id, include_unreadable=True)]
    if args.json:
        print_json({"session": with_root_cost(record), "jobs": [with_job_cost(j) for j in jobs]})
        return 0
    fields(_summary(record))
    evidence = _evidence(record)
    if evidence:
        print("evidence")
        fields(evidence)
    print(f"\njobs ({len(jobs)})")
    shorts = short_job_ids(j["job_id"] for j in jobs)
    table(("job", "agent", "status", "result", "elapsed", "tokens", "cost", "task"),
          [(shorts[j["job_id"]], unreadable_note(j)) if is_unreadable(j) else
           (shorts[j["job_id"]], j["agent"], j["status"], j.get("result_state") or "",
            ago(j.get("created_at")), tokens(j.get("usage")), job_money(j),
            short(j.get("task_kind") or j.get("task"), 40)) for j in jobs])
    return 0


# ----------------------------------------------------------- controls --


def run_control(args: argparse.Namespace) -> int:
    from mmo_kernel.lifecycle import controls as lifecycle

    action = args.command
    sid = args.session_id = _session_arg(args.session_id)
    if action == "continue":
        out = lifecycle.continue_session(sid, args.input)
    elif action == "stop":
        if args.grace < 0:
            raise ValueError("--grace must not be negative")
        with _progress(f"stopping session {sid}: the root and its workers finalize "
                       f"(up to {args.grace:g} s, then they are retired)"):
            out = lifecycle.stop_session(sid, grace_seconds=args.grace, reason=args.reason)
    elif action == "cancel":
        out = lifecycle.cancel_session(sid, reason=args.reason)
    else:
        out = {"pause": lifecycle.pause_session, "compact": lifecycle.compact_session,
               "detach": lifecycle.detach_session}[action](sid)
    if args.json:
        print_json(out)
        return 0
    print(f"session {sid}: {out['session']['status']}")
    if action == "compact" and not out.get("message"):
        print(f"compacted the root thread; the session stays paused (`mmo continue {sid}` "
              "resumes it)")
    for key, label in (("affected_jobs", "paused jobs"), ("resumed_jobs", "resumed jobs"),
                       ("cancelled_jobs", "cancelled jobs")):
        if out.get(key):
            print(f"{label}: {', '.join(out[key])}")
    for job_id, error in (out.get("resume_errors") or {}).items():
        print(f"job {job_id} not resumed: {error}", file=sys.stderr)
    if "root_forced" in out:
        print("root finalize delivered" if out["root_finalize_delivered"]
              else "root finalize not delivered", "(forced stop)" if out["root_forced"] else "")
    if out.get("message"):
        print(out["message"])
    return 0


@contextlib.contextmanager
def _progress(what: str, first: float = 1.0, every: float = 5.0) -> Iterator[None]:
    """Say on stderr what a blocking control waits for, once it has waited ``first``
    seconds (a refusal stays one line), then how long, every ``every`` seconds."""
    done = threading.Event()
    started = time.monotonic()

    def tick() -> None:
        if done.wait(first):
            return
        print(f"{what} ...", file=sys.stderr, flush=True)
        while not done.wait(every):
            print(f"  still waiting ({duration(time.monotonic() - started)})", file=sys.stderr,
                  flush=True)

    ticker = threading.Thread(target=tick, daemon=True)
    ticker.start()
    try:
        yield
    finally:
        done.set()
        ticker.join()


# ------------------------------------------------------------ parsers --



def _add_run(sub: argparse._SubParsersAction) -> None:
    run = sub.add_parser("run", help="run a team non-interactively and print the result",
                         formatter_class=RAW, description=(
        "Create a session from PROFILE in DIR, give PROMPT to its root agent and watch it "
        "work: a live view of the root turn and every worker job (agent, route, status, "
        "elapsed time, tokens) on stderr, the result on stdout.\n\nExit codes: 0 completed, "
        "1 failed, 124 detached (the wall limit expired or the root awaits operator input; "
        "the session keeps its evidence and can be continued), 2 usage error."),
        epilog="examples:\n  mmo run adaptive-engineering 'Fix the failing parser test'\n"
               "  mmo run adaptive-engineering 'Summarize the repo' --offline --wall 120\n"
               "  mmo run visual-engineering 'Match this mockup' --image mock.png "
               "--sandbox workspace-write\n  mmo run ./my-team 'Review src/' --json > outcome.json")
    run.add_argument("profile", metavar="PROFILE",
                     help="a profile id or a path to a profile folder")
    run.add_argument("prompt", metavar="PROMPT", help="the task for the root agent")
    run.add_argument("--cwd", default=".", metavar="DIR", help="workspace (default: here)")
    run.add_argument("--image", action="append", default=[], metavar="FILE",
                     help="attach an image to the prompt (repeatable)")
    run.add_argument("--wall", type=float, metavar="SECONDS",
                     help="wall-clock limit; at expiry the run detaches (default: settings "
                          "wall_timeout_seconds)")
    run.add_argument("--sandbox", choices=("read-only", "workspace-write"),
                     help="the root's sandbox (default: its profile permissions)")
    run.add_argument("--offline", action="store_true",
                     help="bind every agent to the local scripted model (no provider, no network)")
    _json(run, "print the outcome as JSON instead of the live view and result")
    run.set_defaults(func=run_run)


def _add_interactive(sub: argparse._SubParsersAction) -> None:
    start = sub.add_parser("start", help="start an interactive session in the Codex TUI",
                           formatter_class=RAW, description=(
        "Create a session from PROFILE and open its root agent in the Codex terminal UI. "
        "Leaving the TUI detaches; `mmo resume` reattaches on the same thread."),
        epilog="examples:\n  mmo start adaptive-engineering\n"
               "  mmo start ./my-team --cwd ~/src/app\n  mmo start adaptive-engineering --offline")
    start.add_argument("profile", metavar="PROFILE", help="a profile id or a profile folder path")
    start.add_argument("--cwd", default=".", metavar="DIR", help="workspace (default: here)")
    start.add_argument("--offline", action="store_true",
                       help="bind every agent to the local scripted model")
    start.set_defaults(func=run_start)

    resume = sub.add_parser("resume", help="reattach to an interactive session",
                            formatter_class=RAW, description=(
        "Reopen a session's root thread in the Codex TUI. SESSION may be a session id or the "
        "root's thread id; without one, the sessions of this directory are offered (--last: "
        "the newest). A tainted session is refused unless --allow-tainted."),
        epilog="examples:\n  mmo resume --last\n  mmo resume 20260101-120000-adaptive-1a2b3c\n"
               "  mmo resume --all-cwds --last")
    resume.add_argument("selector", nargs="?", metavar="SESSION|THREAD",
                        help="a session id (or unique prefix) or a root thread id")
    resume.add_argument("--last", action="store_true", help="the most recent session")
    resume.add_argument("--all-cwds", action="store_true",
                        help="consider sessions of every directory, not only this one")
    resume.add_argument("--allow-tainted", action="store_true",
                        help="resume even though the workspace was changed outside a scope")
    resume.set_defaults(func=run_resume)


def _add_reading(sub: argparse._SubParsersAction) -> None:
    from mmo_kernel.sessions.records import SessionStatus

    sessions = sub.add_parser("sessions", help="list sessions", formatter_class=RAW,
                              description=(
        "List sessions, newest first (active ones unless --all or --status), the newest 50 "
        "unless --limit N or --all. The SESSION column shows short ids: the shortest unique "
        "prefix (see `mmo session show`); --json keeps full ids."),
                              epilog="examples:\n  mmo sessions\n  mmo sessions --all --json\n"
                                     "  mmo sessions --status failed --profile my-team")
    sessions.add_argument("--all", action="store_true",
                          help="every session: finished ones included, no page limit")
    sessions.add_argument("--status", action="append", choices=get_args(SessionStatus),
                          metavar="STATUS", help="only sessions in STATUS, finished ones "
                          "included (repeatable; one of: " + ", ".join(get_args(SessionStatus))
                          + ")")
    sessions.add_argument("--profile", metavar="PROFILE", help="only sessions of this profile id")
    add_filters(sessions, "sessions", "only sessions whose root is this agent")
    _json(sessions, "print {\"sessions\": [...], \"has_more\": bool} as JSON")
    sessions.set_defaults(func=run_sessions)

    session = sub.add_parser("session", help="inspect one session", description=(
        "Inspect one session."))
    commands = session.add_subparsers(dest="session_command", metavar="COMMAND", required=True)
    show = commands.add_parser("show", help="the session's summary and its jobs",
                               formatter_class=RAW, description=(
        "Show a session: status, profile, cwd, root thread, result or partial result, "
        "warnings, taint, evidence files and a table of its jobs."),
        epilog="examples:\n  mmo session show 20260101-120000-adaptive-1a2b3c\n"
               "  mmo session show ID --json | jq .session.status")
    show.add_argument("session_id", metavar="ID", help=SESSION_ID_HELP)
    _json(show, "print {\"session\": record, \"jobs\": [...]} as JSON")
    show.set_defaults(func=run_show)
    from mmo_kernel.cli.follow_cmd import add_session_result

    add_session_result(commands)


CONTROLS = {
    "pause": "cold-pause: the root and live workers stop, partial results are kept",
    "continue": "relaunch a paused, detached or suspended session on its same threads",
    "compact": "compact a paused session's root thread, then leave it paused",
    "detach": "release the attached client; the root host keeps working",
    "stop": "graceful stop: the root and workers finalize, then the hosts retire",
    "cancel": "cancel at once: kill the root and every live job",
}


def _add_controls(sub: argparse._SubParsersAction) -> None:
    for action, text in CONTROLS.items():
        parser = sub.add_parser(action, help=text, formatter_class=RAW,
                                description=f"{text[0].upper()}{text[1:]}.",
                                epilog=f"example:\n  mmo {action} ID"
                                + (" --input 'Now add tests'" if action == "continue" else "")
                                + (" --grace 10" if action == "stop" else "")
                                + (" --reason 'wrong branch'" if action == "cancel" else ""))
        parser.add_argument("session_id", metavar="ID", help=SESSION_ID_HELP)
        if action == "continue":
            parser.add_argument("--input", metavar="TEXT",
                                help="what the root should do next (default: 'Continue.')")
        if action == "stop":
            parser.add_argument("--grace", type=float, default=30.0, metavar="SECONDS",
                                help="how long the root may take to finalize (default 30)")
        if action in ("stop", "cancel"):
            parser.add_argument("--reason", metavar="TEXT",
                                help="why (optional, at most 2,000 characters): kept in the "
                                     "session's audit log")
        _json(parser)
        parser.set_defaults(func=run_control)


def register(sub: argparse._SubParsersAction) -> None:
    _add_run(sub)
    _add_interactive(sub)
    _add_reading(sub)
    _add_controls(sub)

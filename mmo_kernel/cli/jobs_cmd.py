"""``mmo jobs`` and ``mmo job ...``: list, inspect, read, control and review worker jobs.

The CLI acts as the session's root agent (the operator owns the session), so
it may read, control, accept, reject, integrate and cancel any of its jobs.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from mmo_kernel.cli.costs import job_money, with_job_cost
from mmo_kernel.cli.output import RAW, ago, print_json, short, table, unreadable_note
from mmo_kernel.cli.output import json_flag as _json
from mmo_kernel.cli.paging import add_filters
from mmo_kernel.hosts.control_actions import JOB_CONTROL_ACTIONS
from mmo_kernel.jobs.records import JOB_STATUSES
from mmo_kernel.state.records import is_unreadable

SHOW_FIELDS = ("job_id", "session_id", "agent", "status", "mode", "task_kind", "write_scope",
               "caller_agent", "caller_job_id", "depth", "execution_mode", "result_kind",
               "result_state", "control_revision", "last_control_action", "last_control_status",
               "app_server_thread_id", "active_turn_id", "usage", "patch", "warning", "error",
               "cancel_reason", "created_at", "started_at", "finished_at")
CONTROL_ACTIONS = JOB_CONTROL_ACTIONS


def _as_root(args: argparse.Namespace) -> tuple[dict[str, Any], str, str]:
    """``(record, session_id, root agent)``: the operator acts as the session's root.

    ``args.job_id`` may be a unique prefix; it is replaced by the full id.
    """
    from mmo_kernel.jobs.ids import resolve_job_id
    from mmo_kernel.jobs.listing import load_job
    from mmo_kernel.sessions.records import read_session_record

    args.job_id = resolve_job_id(args.job_id)
    record = load_job(args.job_id)
    session = read_session_record(record["session_id"])
    return record, record["session_id"], session["root_agent"]


# ---------------------------------------------------------------- handlers --


def run_list(args: argparse.Namespace) -> int:
    from mmo_kernel.cli.paging import cut, more_note, page_size
    from mmo_kernel.jobs.ids import short_job_ids
    from mmo_kernel.jobs.listing import list_jobs
    from mmo_kernel.jobs.records import public_job
    from mmo_kernel.sessions.ids import resolve_session_id

    session = None if args.session is None else resolve_session_id(args.session)
    size = page_size(args)
    # served from the listing index; a record that cannot be read is a row of its own,
    # which no filter and no page hides
    rows = list_jobs(session, include_unreadable=True, status=args.status, agent=args.agent,
                     profile=args.profile, since=args.since,
                     limit=None if size is None else size + 1)
    rows, more = cut(rows, size, is_unreadable)
    jobs = [r if is_unreadable(r) else public_job(r) for r in rows]
    if args.json:
        print_json({"jobs": [with_job_cost(j) for j in jobs], "has_more": more})
        return 0
    shorts = short_job_ids(j["job_id"] for j in jobs)
    table(("job", "agent", "status", "result", "rev", "created", "cost", "task"),
          [_job_row(j, shorts[j["job_id"]]) for j in jobs])
    if more:
        more_note("jobs", size)
    return 0


def _job_row(job: dict[str, Any], short_id: str) -> tuple[Any, ...]:
    if is_unreadable(job):
        return (short_id, unreadable_note(job))
    return (short_id, job["agent"], job["status"], job.get("result_state") or "",
            job.get("control_revision", ""), ago(job.get("created_at")), job_money(job),
            short(job.get("task_kind") or job.get("task")))


def run_show(args: argparse.Namespace) -> int:
    from mmo_kernel.jobs.records import public_job

    record, _, _ = _as_root(args)
    if args.json:
        print_json(with_job_cost(public_job(record)))
        return 0
    for key in SHOW_FIELDS:
        if key in record:
            value = record[key]
            shown = json.dumps(value) if isinstance(value, (dict, list)) else value
            suffix = f" ({ago(value)})" if key.endswith("_at") else ""
            print(f"{key:<22} {shown}{suffix}")
        if key == "usage":  # the cost goes with the usage it prices, known or not
            print(f"{'cost_usd':<22} {job_money(record)}")
    if record.get("task"):
        print(f"\ntask:\n{record['task']}")
    return 0


def run_result(args: argparse.Namespace) -> int:
    from mmo_kernel.jobs.results import read_result

    _, session_id, root = _as_root(args)
    page = read_result(args.job_id, session_id, cursor=args.cursor, max_chars=args.max_chars,
                       caller_agent=root)
    if args.json:
        print_json(page)
        return 0
    content = page["content"]
    text = json.dumps(content, indent=2) if page["content_format"] == "json" else content
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    note = (f"[{page['result_kind']} result, {page['total_chars']} chars, "
            f"result_state {page['result_state']}]")
    if page["next_cursor"] is not None:
        note += f" more: mmo job result {args.job_id} --cursor {page['next_cursor']}"
    print(note, file=sys.stderr)
    return 0


def run_trace(args: argparse.Namespace) -> int:
    from mmo_kernel.jobs.traces import read_trace

    _, session_id, root = _as_root(args)
    page = read_trace(args.job_id, session_id, root, cursor=args.cursor, limit=args.limit)
    if args.json:
        print_json(page)
        return 0
    rows = []
    for rec in page["records"]:
        message = rec.get("message") if isinstance(rec.get("message"), dict) else {}
        what = message.get("method") or rec.get("method") or (
            "response" if "result" in message else "malformed" if "malformed_event" in rec else "")
        flags = "truncated" if rec.get("trace_record_truncated") else ""
        rows.append((rec["record_cursor"], rec.get("direction", ""), what, flags))
    table(("line", "direction", "method", "note"), rows)
    if page["has_more"]:
        print(f"more: mmo job trace {args.job_id} --cursor {page['next_cursor']}", file=sys.stderr)
    return 0


def _request_id(value: str | None) -> str | int | None:
    if value is None:
        return None
    return int(value) if value.isdigit() else value


def _response(value: str | None) -> dict[str, Any] | None:
    if value is None:
        return None
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as exc:
        raise ValueError(f"--response must be a JSON object: {exc}") from None
    if not isinstance(parsed, dict):
        raise ValueError("--response must be a JSON object, e.g. '{\"decision\": \"accept\"}'")
    return parsed


def run_control(args: argparse.Namespace) -> int:
    from mmo_kernel.jobs.controls import control_job
    from mmo_kernel.jobs.records import control_revision

    record, session_id, root = _as_root(args)
    expected = args.expected_revision
    if expected is None:
        expected = control_revision(record)
    out = control_job(args.job_id, args.action, session_id, root, expected_revision=expected,
                      input=args.input, effort=args.effort,
                      request_id=_request_id(args.request_id), response=_response(args.response))
    if args.json:
        print_json(out)
        return 0
    job = out["job"]
    print(f"{args.action} -> job {args.job_id}: revision {out['control_revision']}, "
          f"status {job['status']}, control {job.get('last_control_status', '')}")
    if out["result"] not in (None, {}):
        print(json.dumps(out["result"], sort_keys=True))
    return 0


def run_cancel(args: argparse.Namespace) -> int:
    from mmo_kernel.jobs.cancel import cancel_job

    _, session_id, root = _as_root(args)
    out = cancel_job(args.job_id, session_id, reason=args.reason, caller_agent=root)
    for job in out["jobs"]:
        print(f"{job['job_id']}  {job['status']}")
    return 0


def run_diff(args: argparse.Namespace) -> int:
    from mmo_kernel.jobs.workspace import read_patch_diff

    _as_root(args)
    sys.stdout.write(read_patch_diff(args.job_id))
    return 0


def run_disposition(args: argparse.Namespace) -> int:
    from mmo_kernel.jobs.results import accept_result, reject_result
    from mmo_kernel.jobs.workspace import integrate_patch

    function = {"accept": accept_result, "reject": reject_result,
                "integrate": integrate_patch}[args.job_command]
    _, session_id, root = _as_root(args)
    job = function(args.job_id, args.reason, session_id, root)
    if args.json:
        print_json(job)
        return 0
    print(f"job {args.job_id}: result_state {job.get('result_state')}")
    return 0


# ---------------------------------------------------------------- parsers --


def _job_id(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("job_id", metavar="ID",
                        help="a job id or a unique prefix of one (see `mmo jobs`)")



def _reason(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--reason", required=True, metavar="TEXT",
                        help="why (recorded in the job and the session's audit log)")


def register(sub: argparse._SubParsersAction) -> None:
    jobs = sub.add_parser("jobs", help="list worker jobs", description=(
        "List worker jobs, newest first, with status, result state, control revision and "
        "cost (n/a when the model has no price in the catalog): the newest 50 unless "
        "--limit N or --all. The JOB column shows short ids (the shortest unique prefix); "
        "--json keeps full ids and gives cost_usd."))
    jobs.add_argument("--session", metavar="ID",
                      help="only the jobs of this session (an id or a unique prefix)")
    jobs.add_argument("--status", action="append", choices=JOB_STATUSES, metavar="STATUS",
                      help="only jobs in STATUS (repeatable; one of: "
                           + ", ".join(JOB_STATUSES) + ")")
    jobs.add_argument("--profile", metavar="PROFILE",
                      help="only jobs of this profile id (the job's, else its session's)")
    add_filters(jobs, "jobs", "only jobs of this agent (role)")
    jobs.add_argument("--all", action="store_true", help="every job (no page limit)")
    _json(jobs, "print {\"jobs\": [...], \"has_more\": bool} as JSON")
    jobs.set_defaults(func=run_list)

    job = sub.add_parser("job", help="inspect, read, control and review one job", description=(
        "Work with one worker job as the session's root: show it, read its result and "
        "trace, control it, review its patch and accept, reject or integrate it."))
    commands = job.add_subparsers(dest="job_command", metavar="COMMAND", required=True)

    show = commands.add_parser("show", help="the job's record", description="Show a job record.")
    _job_id(show)
    _json(show)
    show.set_defaults(func=run_show)

    result = commands.add_parser("result", help="read the job's result (marks it read)",
                                 description=(
        "Print one page of the job's result. Reading the last page marks it read, which "
        "accept and reject require."))
    _job_id(result)
    result.add_argument("--cursor", type=int, default=0, metavar="N",
                        help="character offset to start from (the previous page's next cursor)")
    result.add_argument("--max-chars", type=int, default=20000, metavar="N",
                        help="page size in characters (default 20000)")
    _json(result)
    result.set_defaults(func=run_result)

    trace = commands.add_parser("trace", help="the job's filtered event trace", description=(
        "List the job's app-server events (private reasoning removed), one row per line of "
        "events.jsonl."))
    _job_id(trace)
    trace.add_argument("--cursor", type=int, default=0, metavar="N",
                       help="0-based event line to start from")
    trace.add_argument("--limit", type=int, default=50, metavar="N",
                       help="records per page (default 50)")
    _json(trace)
    trace.set_defaults(func=run_trace)

    control = commands.add_parser("control", help="steer, interrupt, pause, continue, ...",
                                  description=(
        "Send one control to the job. Each control names the job's control revision "
        "(default: its current one) and moves it by one; a stale revision is refused."),
        epilog="examples:\n  mmo job control ID steer --input 'focus on the parser'\n"
               "  mmo job control ID respond --request-id 7 --response '{\"decision\": "
               "\"accept\"}'\n  mmo job control ID continue --input 'go on'",
        formatter_class=RAW)
    _job_id(control)
    control.add_argument("action", choices=CONTROL_ACTIONS, metavar="ACTION",
                         help=f"one of: {', '.join(CONTROL_ACTIONS)}")
    control.add_argument("--input", metavar="TEXT", help="steer/continue input")
    control.add_argument("--effort", metavar="E", help="set_effort: one of the agent's efforts")
    control.add_argument("--request-id", metavar="R", help="respond: the pending request's id")
    control.add_argument("--response", metavar="JSON", help="respond: the typed answer")
    control.add_argument("--expected-revision", type=int, metavar="N",
                         help="the revision you saw (default: the job's current revision)")
    _json(control)
    control.set_defaults(func=run_control)

    cancel = commands.add_parser("cancel", help="cancel the job and its descendants",
                                 description="Kill the job's host and its descendants' hosts.")
    _job_id(cancel)
    _reason(cancel)
    cancel.set_defaults(func=run_cancel)

    diff = commands.add_parser("diff", help="the writer's captured patch",
                               description="Print the patch a writer job produced.")
    _job_id(diff)
    diff.set_defaults(func=run_diff)

    for name, text in (("accept", "accept a read result"), ("reject", "reject a read result "
                       "(removes a writer's worktree)"), ("integrate", "apply an accepted "
                       "writer's patch to the workspace")):
        parser = commands.add_parser(name, help=text, description=text[0].upper() + text[1:] + ".")
        _job_id(parser)
        _reason(parser)
        _json(parser)
        parser.set_defaults(func=run_disposition)

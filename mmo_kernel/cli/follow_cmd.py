"""``mmo watch``, ``mmo logs`` and ``mmo session result``: following a session that runs elsewhere.

A session's root keeps working in its own host after ``mmo run`` returns
(Ctrl-C, ``--wall``) or after ``mmo continue``; these commands read what it
writes — its record, its event log, its result — and never change anything.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TextIO

from mmo_kernel.cli.output import RAW, print_json, short
from mmo_kernel.cli.output import json_flag as _json

POLL_SECONDS = 0.25
SESSION_ID_HELP = "a session id or a unique prefix of one (see `mmo sessions`)"
LIVE_STATUSES = frozenset({"starting", "running", "detached"})
"""Statuses in which the root host is (or should be) working: watching them makes sense."""


def _session_id(text: str) -> str:
    from mmo_kernel.sessions.ids import resolve_session_id

    return resolve_session_id(text)


def _load_session(session_id: str) -> dict[str, Any]:
    from mmo_kernel.lifecycle.controls import load_session

    return load_session(session_id)


# ---------------------------------------------------------------- watch --


def run_watch(args: argparse.Namespace) -> int:
    from mmo_kernel.cli.live import LiveView

    session_id = _session_id(args.session_id)
    view = LiveView(sys.stderr)
    try:
        record = _load_session(session_id)
        while True:
            view(record)
            if record["status"] not in LIVE_STATUSES:
                break
            time.sleep(POLL_SECONDS)
            record = _load_session(session_id)
    except KeyboardInterrupt:
        print(f"mmo: stopped watching; session {session_id} goes on "
              f"(`mmo watch {session_id}` to look again)", file=sys.stderr)
        return 130
    view.finish(record)
    return _report_end(record)


def _report_end(record: dict[str, Any]) -> int:
    """One line on how the session ended (or why it is no longer live); the exit code."""
    sid, status = record["session_id"], record["status"]
    if status == "completed":
        print(f"session {sid} completed; its answer: `mmo session result {sid}`", file=sys.stderr)
        return 0
    if status in ("paused", "suspended"):
        reason = record.get("error") or record.get("resume_error") or ""
        print(f"session {sid} is {status}" + (f" ({short(reason, 120)})" if reason else "")
              + f"; resume it with `mmo continue {sid}`", file=sys.stderr)
        return 1
    problem = record.get("error") or (record.get("failure") or {}).get("message") or ""
    print(f"session {sid} {status}" + (f": {short(problem, 160)}" if problem else ""),
          file=sys.stderr)
    return 1


# ----------------------------------------------------------------- logs --


def _event_file(session_id: str, job: str | None) -> tuple[Path, Callable[[], bool]]:
    """The event log to read and a check whether its writer can still add to it."""
    if job is None:
        from mmo_kernel.sessions.records import session_dir

        path = session_dir(session_id) / "root-events.jsonl"
        return path, lambda: _load_session(session_id)["status"] in LIVE_STATUSES
    from mmo_kernel.jobs.ids import resolve_job_id
    from mmo_kernel.jobs.listing import load_job
    from mmo_kernel.jobs.records import ACTIVE_JOB_STATUSES

    job_id = resolve_job_id(job)
    record = load_job(job_id)
    if record.get("session_id") != session_id:
        raise ValueError(f"--job {job}: job {job_id} belongs to session "
                         f"{record.get('session_id')}, not {session_id}")
    path = Path(record.get("events_path") or "")
    return path, lambda: load_job(job_id)["status"] in ACTIVE_JOB_STATUSES


def _lines(path: Path, follow: bool, live: Callable[[], bool]) -> Iterator[str]:
    """Complete lines of ``path``; with ``follow``, new ones until the writer is done."""
    offset, pending = 0, b""
    while True:
        try:
            with path.open("rb") as handle:
                handle.seek(offset)
                data = handle.read()
        except FileNotFoundError:
            data = b""
        offset += len(data)
        pending += data
        *complete, pending = pending.split(b"\n")
        for raw in complete:
            if raw.strip():
                yield raw.decode("utf-8", errors="replace")
        if not follow:
            return
        if not data:
            if not live():
                return
            time.sleep(POLL_SECONDS)


def _clock(stamp: Any) -> str:
    text = str(stamp or "")
    return text[11:19] if len(text) >= 19 else text


def _item_text(item: dict[str, Any]) -> str | None:
    kind = item.get("type")
    if kind == "agentMessage":
        return "says: " + short(item.get("text", ""), 300)
    if kind == "userMessage":
        parts = [c.get("text", "") for c in item.get("content") or [] if isinstance(c, dict)]
        return "prompt: " + short(" ".join(parts), 200)
    if kind == "commandExecution":
        code = item.get("exitCode")
        return (f"ran: {short(item.get('command', ''), 160)}"
                + (f" (exit {code})" if code is not None else f" ({item.get('status')})"))
    if kind == "mcpToolCall":
        error = item.get("error") or {}
        tail = f": {short(error.get('message', error), 160)}" if error else ""
        return f"tool {item.get('server')}.{item.get('tool')} {item.get('status')}{tail}"
    if kind == "fileChange":
        paths = [c.get("path", "") for c in item.get("changes") or [] if isinstance(c, dict)]
        return f"changed files: {', '.join(paths)} ({item.get('status')})"
    if kind == "contextCompaction":
        return "context compacted"
    if kind in ("reasoning", None):
        return None
    return str(kind)


def render_event(event: dict[str, Any]) -> str | None:
    """One readable line for an event worth a human's attention; None for the rest."""
    message = event.get("message") or {}
    method, params = message.get("method"), message.get("params") or {}
    sent = event.get("direction") == "sent"
    text: str | None = None
    if sent and method == "turn/start":
        parts = [i.get("text", "") for i in params.get("input") or [] if isinstance(i, dict)]
        text = "-> turn/start: " + short(" ".join(parts), 200)
    elif sent and method and method not in ("initialized",) and "id" in message:
        text = f"-> {method}"
    elif method == "turn/started":
        text = f"turn {(params.get('turn') or {}).get('id', '')} started"
    elif method == "turn/completed":
        turn = params.get("turn") or {}
        error = (turn.get("error") or {}).get("message")
        text = f"turn {turn.get('id', '')} {turn.get('status')}" + (f": {error}" if error else "")
    elif method == "item/completed":
        text = _item_text(params.get("item") or {})
    elif method == "error":
        text = "error: " + short((params.get("error") or {}).get("message", params), 200)
    elif method == "thread/started":
        text = f"thread {(params.get('thread') or {}).get('id', '')} started"
    elif not sent and method and "id" in message:
        text = f"asks the operator: {method}"
    return None if text is None else f"{_clock(event.get('recorded_at'))}  {text}"


def run_logs(args: argparse.Namespace) -> int:
    session_id = _session_id(args.session_id)
    path, live = _event_file(session_id, args.job)
    out: TextIO = sys.stdout
    try:
        for line in _lines(path, args.follow, live):
            if args.json:
                out.write(line + "\n")
            else:
                try:
                    rendered = render_event(json.loads(line))
                except ValueError:
                    rendered = f"(unreadable event line: {short(line, 80)})"
                if rendered is not None:
                    out.write(rendered + "\n")
            if args.follow:
                out.flush()
    except KeyboardInterrupt:
        return 130
    return 0


# -------------------------------------------------------------- result --


def run_result(args: argparse.Namespace) -> int:
    session_id = _session_id(args.session_id)
    record = _load_session(session_id)
    path, kind = record.get("result_path"), record.get("result_kind") or "final"
    if not path and record.get("partial_result_path"):
        path, kind = record["partial_result_path"], "partial"
    text = Path(path).read_text(encoding="utf-8") if path and Path(path).is_file() else None
    if args.json:
        print_json({"session_id": session_id, "status": record["status"],
                    "result_kind": kind if text is not None else None, "result": text})
        return 0 if text is not None else 1
    if text is None:
        hint = (f"; follow it with `mmo watch {session_id}`"
                if record["status"] in LIVE_STATUSES else "")
        raise RuntimeError(f"session {session_id} ({record['status']}) has no result yet{hint}")
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    if kind == "partial":
        print(f"(a partial result: session {session_id} is {record['status']})", file=sys.stderr)
    return 0


def add_session_result(commands: argparse._SubParsersAction) -> None:
    """``mmo session result``: added to the ``session`` command by sessions_cmd."""
    result = commands.add_parser("result", help="print the session's final answer",
                                 formatter_class=RAW, description=(
        "Print the root's final answer (its result file) to stdout. Before the session "
        "has one, a partial result is printed with a note on stderr; with neither, the "
        "command fails."),
        epilog="examples:\n  mmo session result 20260101-120000\n"
               "  mmo session result ID > answer.md")
    result.add_argument("session_id", metavar="ID", help=SESSION_ID_HELP)
    _json(result, 'print {"session_id", "status", "result_kind", "result"} as JSON')
    result.set_defaults(func=run_result)


def register(sub: argparse._SubParsersAction) -> None:
    watch = sub.add_parser("watch", help="show the live view of a running session",
                           formatter_class=RAW, description=(
        "Re-attach the live view (the root and each worker: status, elapsed time, tokens) "
        "to a session that runs in the background: after Ctrl-C on `mmo run`, after its "
        "--wall expired, after `mmo continue`. Ends when the session stops running; "
        "Ctrl-C stops watching, never the session. Exit 0 when it completed, else 1."),
        epilog="examples:\n  mmo watch 20260101-120000\n  mmo continue ID && mmo watch ID")
    watch.add_argument("session_id", metavar="ID", help=SESSION_ID_HELP)
    watch.set_defaults(func=run_watch)

    logs = sub.add_parser("logs", help="print (and follow) a session's event log",
                          formatter_class=RAW, description=(
        "Print the root's event log as text: prompts, turns, messages, commands, tool "
        "calls and errors, one line each (streaming deltas are left out). --job shows a "
        "worker's log instead; -f keeps following until the session (or job) stops "
        "running."),
        epilog="examples:\n  mmo logs ID\n  mmo logs ID -f\n  mmo logs ID --job JOB --json")
    logs.add_argument("session_id", metavar="ID", help=SESSION_ID_HELP)
    logs.add_argument("--job", metavar="JOB", help="a job of the session (id or unique prefix)")
    logs.add_argument("-f", "--follow", action="store_true",
                      help="keep printing new events until the writer stops running")
    _json(logs, "print the recorded events as they are, one JSON object per line")
    logs.set_defaults(func=run_logs)

"""``mmo top``: every running team at once, from the read model (``mmo_kernel.views``).

``--once`` prints one snapshot (a table, or ``--json`` for scripts) and exits;
without a terminal that is also what ``mmo top`` does. On a terminal it runs the
live view (``mmo_kernel.tui``, the ``mmo[ui]`` extra): the same table refreshed
every ``--interval`` seconds, an inspect panel, and keys that act. Reading never
changes the state dir: a job whose host died shows ``suspended`` (what the
next reconciling read will record) while its record still says otherwise.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from typing import TextIO

from mmo_kernel.cli.output import duration, print_json, short
from mmo_kernel.views.text import count, money

RAW = argparse.RawDescriptionHelpFormatter
NARROW, WIDE = 80, 120


def _doing(agent, now: float) -> str:
    if agent.pending_requests:
        return f"? {agent.pending_requests} request(s) waiting for you"
    if agent.doing is not None:
        return f"{agent.doing.label} · {duration(now - agent.doing.since)}"
    if agent.error and agent.status in ("failed", "suspended"):
        return "! " + agent.error
    if agent.result_state:
        return f"result {agent.result_state}"
    return agent.last_message or ""


def _headline(snap, width: int) -> str:
    agents = sum(snap.agents.values())
    volume = f"{count(snap.input_tokens)} in / {count(snap.output_tokens)} out"
    if width < WIDE:
        by_status = " ".join(f"{n} {s}" for s, n in snap.agents.items())
        return (f"mmo top  {snap.sessions_live} live/{snap.sessions_total} sess  {agents} "
                f"agents: {by_status}  {volume}  cost {money(snap.cost_usd)}")
    by_status = ", ".join(f"{n} {s}" for s, n in snap.agents.items()) or "none"
    return (f"mmo top — {snap.sessions_live} live / {snap.sessions_total} sessions · "
            f"{agents} agents ({by_status}) · {volume} · cost {money(snap.cost_usd)}")


def _columns(width: int) -> list[tuple[str, int]]:
    """(column, width) pairs that fit ``width``; NOW takes what is left."""
    if width >= WIDE:
        cols = [("AGENT", 30), ("ROUTE / MODEL", 30), ("STATUS", 10), ("ELAPSED", 8),
                ("TURN", 4), ("IN", 7), ("OUT", 6), ("COST", 8), ("SCOPE", 12)]
    else:
        cols = [("AGENT", 24), ("STATUS", 10), ("ELAPSED", 8), ("TOKENS", 7)]
    used = sum(w + 1 for _, w in cols)
    return [*cols, ("NOW", max(10, width - used))]


def _slug(model: str | None) -> str:
    """A catalog model id is ``<route>__<slug>``; the route has its own half of the cell."""
    return "—" if not model else model.split("__", 1)[-1]


def _cells(agent, now: float) -> dict[str, str]:
    indent = "" if agent.depth == 0 else "  " * (agent.depth - 1) + "└ "
    label = indent + agent.agent + (" ✎" + ",".join(agent.write_scope) if agent.write_scope
                                    else "")
    elapsed = "" if agent.elapsed_seconds is None else duration(agent.elapsed_seconds)
    total = None if agent.input_tokens is None else agent.input_tokens + (agent.output_tokens or 0)
    return {
        "AGENT": label, "ROUTE / MODEL": f"{agent.route or '—'} / {_slug(agent.model)}",
        "STATUS": agent.status, "ELAPSED": elapsed, "TURN": str(agent.turns),
        "IN": count(agent.input_tokens), "OUT": count(agent.output_tokens),
        "TOKENS": count(total), "COST": money(agent.cost_usd),
        "SCOPE": ",".join(agent.write_scope), "NOW": _doing(agent, now),
    }


def _fit(text: str, width: int) -> str:
    """``short`` that keeps a cell's leading indent (a worker's depth in the tree)."""
    body = text.lstrip(" ")
    lead = min(len(text) - len(body), max(0, width - 2))
    return " " * lead + short(body, width - lead)


def _row(cells: dict[str, str], cols: list[tuple[str, int]]) -> str:
    return " ".join(_fit(cells.get(name, ""), w).ljust(w) for name, w in cols).rstrip()


def _session_line(view, width: int) -> str:
    mode = view.execution_mode or ""
    goal = f" · goal {view.goal_status}" if view.goal_status else ""
    return short(f"▼ {view.session_id}  {view.profile_id or ''}  {view.cwd or ''}  "
                 f"{view.status} {mode}{goal}", width)


def _finished_line(snap, width: int) -> str | None:
    done = sum(snap.finished.values())
    if not done:
        return None
    detail = " · ".join(f"{n} {s}" for s, n in snap.finished.items())
    return short(f"▸ {done} finished sessions ({detail})", width)


def _route_lines(snap, width: int) -> list[str]:
    if not snap.routes:
        return []
    lines = [short(f"{'ROUTE':28} {'REQ':>5} {'ERR':>4} {'TTFB p50':>9} "
                   f"{'LAT p50/p95':>15} {'TOKENS IN/OUT':>16} {'FAULTS':>6}", width)]
    for f in snap.routes:
        lat = (f"{f.latency_p50_ms:.1f}/{f.latency_p95_ms:.1f} ms"
               if f.latency_p50_ms is not None else "—")
        ttfb = f"{f.ttfb_p50_ms:.1f} ms" if f.ttfb_p50_ms is not None else "—"
        volume = f"{count(f.input_tokens)} / {count(f.output_tokens)}"
        lines.append(short(f"{f.route:28} {f.requests:>5} {f.errors:>4} {ttfb:>9} "
                           f"{lat:>15} {volume:>16} {f.faults:>6}", width))
    return lines


def render(snap, width: int, now: float | None = None) -> list[str]:
    """The table: headline, then each session with its agent tree, then the routes."""
    now = time.time() if now is None else now
    cols = _columns(width)
    lines = [short(_headline(snap, width), width), "─" * width, _row({c: c for c, _ in cols}, cols)]
    for view in snap.sessions:
        lines.append(_session_line(view, width))
        lines += [_row(_cells(agent, now), cols) for agent in view.agents]
    finished = _finished_line(snap, width)
    if finished:
        lines.append(finished)
    routes = _route_lines(snap, width)
    if routes:
        lines += ["", *routes]
    return lines


def table_format():
    """The pieces above, for the live view on a terminal (``mmo_kernel.tui``)."""
    from mmo_kernel.tui.format import TableFormat

    return TableFormat(headline=_headline, columns=_columns, cells=_cells, row=_row,
                       session_line=_session_line, finished_line=_finished_line,
                       route_lines=_route_lines, money=money, count=count,
                       duration=duration, short=short)


def _print(snap, stream: TextIO, width: int) -> None:
    stream.write("\n".join(render(snap, width)) + "\n")


UI_HINT = ("mmo top: the live terminal view needs the ui extra: pip install 'mmo[ui]' "
           "(mmo top --once works without it)")


def run_top(args: argparse.Namespace) -> int:
    from mmo_kernel.views.collector import Collector

    if args.json:
        print_json(Collector().refresh(show_finished=args.finished).model_dump(mode="json"))
        return 0
    if args.once or not sys.stdout.isatty():
        width = args.width or shutil.get_terminal_size((NARROW, 24)).columns
        _print(Collector().refresh(show_finished=args.finished), sys.stdout, width)
        return 0
    try:
        from mmo_kernel.tui.app import TopApp
    except ImportError as exc:
        if (exc.name or "").split(".")[0] not in ("textual", "rich"):
            raise
        print(UI_HINT, file=sys.stderr)
        return 2
    TopApp(table_format(), interval=args.interval, finished=args.finished).run()
    return 0


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.2 <= value <= 60:
        raise argparse.ArgumentTypeError("--interval must be between 0.2 and 60 seconds")
    return value


def register(sub: argparse._SubParsersAction) -> None:
    top = sub.add_parser("top", help="watch every running team at once", formatter_class=RAW,
                         description=(
        "Every live session of this state dir with its agent tree: status, route and model, "
        "elapsed time, turns, tokens, cost and what each agent is doing now, plus the "
        "gateway's per-route figures for the last 5 minutes. Finished sessions are counted "
        "(--finished N shows the newest N in full). Reading never changes anything: a job "
        "whose host died shows as `suspended` before any command records it."),
        epilog="examples:\n  mmo top\n  mmo top --once\n  mmo top --once --json | jq .agents")
    top.add_argument("--once", action="store_true", help="print one snapshot and exit")
    top.add_argument("--json", action="store_true",
                     help="print one snapshot as JSON (implies --once)")
    top.add_argument("--finished", type=int, default=0, metavar="N",
                     help="also show the N newest finished sessions in full (default 0)")
    top.add_argument("--interval", type=_positive, default=1.0, metavar="SECONDS",
                     help="refresh period on a terminal (default 1)")
    top.add_argument("--width", type=int, default=0, help=argparse.SUPPRESS)
    top.set_defaults(func=run_top)

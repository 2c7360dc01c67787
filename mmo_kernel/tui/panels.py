"""The text of the side panels: the inspect panel (one agent or session: its facts, what it
waits for, its result and patch, its timeline), the audit log and the routes.

Pure functions of the snapshot and of the selected record, each line fitted to a
width, so the headless tests read exactly what a person sees.
"""

from __future__ import annotations

import json
import time
from datetime import datetime
from typing import Any

from mmo_kernel.tui.format import TableFormat
from mmo_kernel.views.model import AgentView, SessionView, TeamSnapshot

TURN, TOOL, OPEN = "█", "▒", "▶"


def fit(text: str, width: int) -> str:
    """One line of at most ``width`` characters, cut with ``…``; spacing is kept (columns)."""
    text = text.replace("\n", " ")
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"


def clock(stamp: Any) -> str:
    """``HH:MM:SS`` local time of an epoch number or an ISO timestamp ('' if neither)."""
    if isinstance(stamp, str):
        try:
            stamp = datetime.fromisoformat(stamp).timestamp()
        except ValueError:
            return ""
    if not isinstance(stamp, (int, float)):
        return ""
    return time.strftime("%H:%M:%S", time.localtime(stamp))


def _requests(detail: dict[str, Any] | None, key: str, fmt: TableFormat) -> str:
    pending = (detail or {}).get(key) or []
    if not pending:
        return "none"
    first = pending[0]
    what = (first.get("method") or first.get("kind") or json.dumps(first, sort_keys=True)
            if isinstance(first, dict) else str(first))
    more = f" (+{len(pending) - 1} more)" if len(pending) > 1 else ""
    return f"{len(pending)} waiting: {fmt.short(what, 60)}{more}"


def _patch(agent: AgentView, detail: dict[str, Any] | None) -> str:
    patch = (detail or {}).get("patch")
    if isinstance(patch, dict):
        paths = [str(p) for p in patch.get("changed_paths") or []]
        listed = ", ".join(paths[:3]) + (f" +{len(paths) - 3}" if len(paths) > 3 else "")
        return f"{len(paths)} file(s) changed: {listed}" if paths else "empty (no change)"
    if agent.write_scope:
        return ("not captured yet" if agent.status in ("running", "waiting", "starting")
                else "none captured")
    return "— (read-only)"


def timeline(spans: list[dict[str, Any]], fmt: TableFormat, width: int, now: float,
             rows: int) -> list[str]:
    """The newest ``rows`` spans as bars on one time axis (turns ``█``, tool calls ``▒``,
    ``▶`` while open), each with its start, label, status and length."""
    if rows <= 0:
        return []
    if not spans:
        return ["timeline: no turn yet"]
    spans = spans[-rows:]
    begin = min(s["start"] for s in spans)
    end = max(s["end"] if s["end"] is not None else now for s in spans)
    total = max(end - begin, 1e-3)
    label_w = max(10, min(32, width // 3))
    meta_w = 18
    bar_w = max(4, width - 9 - label_w - 1 - meta_w - 1)
    lines = []
    for span in spans:
        stop = span["end"] if span["end"] is not None else now
        left = int((span["start"] - begin) / total * bar_w)
        right = max(left + 1, int((stop - begin) / total * bar_w))
        mark = TURN if span["kind"] == "turn" else TOOL
        bar = (" " * left + mark * (right - left))[:bar_w]
        if span["end"] is None:
            bar = bar[:-1] + OPEN
        label = span["label"] if span["kind"] == "turn" else "  " + span["label"]
        status = span["status"] or ("running" if span["end"] is None else "")
        meta = f"{status} {fmt.duration(stop - span['start'])}".strip()
        lines.append(fit(f"{clock(span['start']):8} {fit(label, label_w):<{label_w}} "
                         f"{bar:<{bar_w}} {meta}", width))
    return lines


def _agent_lines(agent: AgentView, detail: dict[str, Any] | None, fmt: TableFormat,
                 width: int, now: float) -> list[str]:
    cells = fmt.cells(agent, now)
    stored = f" (record says {agent.stored_status})" if agent.stored_status != agent.status \
        else ""
    scope = ",".join(agent.write_scope) or "none"
    model = cells.get("ROUTE / MODEL") or f"{agent.route or '—'} / {agent.model or '—'}"
    if agent.doing is not None:
        now_line = f"now: {agent.doing.label} · since {fmt.duration(now - agent.doing.since)}"
    elif agent.error:
        now_line = f"error: {agent.error}"
    else:
        now_line = f"last message: {agent.last_message or '—'}"
    requests = _requests(detail, "pending_requests" if agent.job_id else
                         "root_pending_requests", fmt)
    facts = [
        f"{agent.status}{stored} · {agent.mode or '—'} · write scope {scope} · {model}",
        f"turn {agent.turns} · {fmt.count(agent.input_tokens)} in / "
        f"{fmt.count(agent.output_tokens)} out · cost {fmt.money(agent.cost_usd)} · "
        f"elapsed {fmt.duration(agent.elapsed_seconds) or '—'}",
        now_line,
        f"result {agent.result_state or '—'} · patch {_patch(agent, detail)} · "
        f"requests {requests}" if agent.job_id else f"pending requests {requests}",
    ]
    return [fmt.short(line, width) for line in facts]


def _session_lines(view: SessionView, fmt: TableFormat, width: int) -> list[str]:
    tokens = sum(a.input_tokens or 0 for a in view.agents)
    facts = [
        f"{view.status}" + (f" (record says {view.stored_status})"
                            if view.stored_status != view.status else "")
        + f" · profile {view.profile_id or '—'} · {view.session_kind or '—'}"
        + (f" · {view.execution_mode} mode" if view.execution_mode else "")
        + (f" · goal {view.goal_status}" if view.goal_status else "")
        + (" · TAINTED" if view.tainted else ""),
        f"cwd {view.cwd or '—'}",
        f"{len(view.agents)} agent(s) · {fmt.count(tokens)} tokens in · created "
        f"{view.created_at or '—'}",
        "keys on this row act on the whole session (p pause · c continue · S stop · x cancel)",
    ]
    return [fmt.short(line, width) for line in facts]


def inspect(view: SessionView | None, agent: AgentView | None, detail: dict[str, Any] | None,
            fmt: TableFormat, width: int, now: float, height: int) -> list[str]:
    """What the inspect panel shows for the selected row, in ``height`` lines at most."""
    if view is None:
        return ["select a session or an agent (↑↓) to inspect it"]
    if agent is None:
        return _session_lines(view, fmt, width)[:height]
    lines = _agent_lines(agent, detail, fmt, width, now)
    return (lines + timeline(agent.timeline, fmt, width, now, height - len(lines)))[:height]


def inspect_title(view: SessionView | None, agent: AgentView | None) -> str:
    if view is None:
        return "inspect"
    if agent is None:
        return f"inspect · session {view.session_id}"
    return f"inspect · {agent.agent} · {agent.job_id or 'root of ' + view.session_id}"


def audit(view: SessionView | None, fmt: TableFormat, width: int, height: int) -> list[str]:
    """The newest ``height`` audit entries of the selected session, oldest first."""
    if view is None or not view.audit:
        return ["no audit entries"]
    lines = []
    for entry in view.audit[-height:]:
        who = entry.get("agent") or entry.get("job_id") or entry.get("profile_id") or ""
        actor = f"{entry.get('actor', '?')}:{entry.get('actor_name', '?')}"
        reason = entry.get("reason") or entry.get("status") or ""
        lines.append(fit(f"{clock(entry.get('at'))} {str(entry.get('event', '?')):<20} "
                         f"{fit(str(who), 18):<18} {actor} {reason}", width))
    return lines


def routes(snap: TeamSnapshot | None, fmt: TableFormat, width: int) -> list[str]:
    lines = [] if snap is None else fmt.route_lines(snap, width)
    return lines or ["no gateway requests in the last 5 minutes"]

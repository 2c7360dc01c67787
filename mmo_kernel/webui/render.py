"""HTML fragments of the read model: a session's head, agent tree, timeline, tool calls,
audit log and route figures, and the live rows of the session list.

Every value is escaped here (``esc``); nothing else builds markup from data. The page
carries no inline style or script (the content security policy forbids them), so sizes are
classes and the timeline is SVG geometry. Fragments are keyed by the element id they
replace: the initial page and every live update use the same functions.
"""

from __future__ import annotations

import html
import time
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from mmo_kernel.views.model import AgentView, SessionView, TeamSnapshot
from mmo_kernel.views.text import count
from mmo_kernel.views.text import money as figure_money

LIVE = frozenset({"created", "starting", "running", "paused", "detached", "suspended",
                  "pausing", "stopping", "queued"})
MAX_DEPTH_CLASS = 6
TIMELINE_WIDTH = 1000
ROW_HEIGHT = 22
LABEL_MIN_WIDTH = 46
TOOL_ROWS_KEPT = 60


def esc(value: Any) -> str:
    return "" if value is None else html.escape(str(value), quote=True)


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def money(value: float | None) -> str:
    if value is None:
        return '<span class="na" title="no price in the catalog">n/a</span>'
    return esc(figure_money(value))


def ago(stamp: Any, now: float | None = None) -> str:
    try:
        at = datetime.fromisoformat(str(stamp)).timestamp()
    except (TypeError, ValueError):
        return ""
    return duration((time.time() if now is None else now) - at) + " ago"


def clock(stamp: Any) -> str:
    """``HH:MM:SS.mmm`` (UTC) of an ISO time or epoch seconds."""
    try:
        if isinstance(stamp, (int, float)):
            at = datetime.fromtimestamp(stamp, UTC)
        else:
            at = datetime.fromisoformat(str(stamp)).astimezone(UTC)
    except (TypeError, ValueError, OSError):
        return esc(stamp)
    return at.strftime("%H:%M:%S.") + f"{at.microsecond // 1000:03d}"


def badge(status: Any, extra: str = "") -> str:
    word = esc(status or "unknown")
    return f'<span class="badge st-{word} {extra}">{word}</span>'


def session_href(session_id: str) -> str:
    return "/session/" + quote(session_id, safe="")


def job_href(job_id: str) -> str:
    return "/job/" + quote(job_id, safe="")


# ------------------------------------------------------------ session --


def root_of(view: SessionView) -> AgentView | None:
    return view.agents[0] if view.agents else None


def head(view: SessionView) -> str:
    agents = view.agents
    root = root_of(view)
    given = sum(a.input_tokens or 0 for a in agents)
    taken = sum(a.output_tokens or 0 for a in agents)
    costs = [a.cost_usd for a in agents]
    cost = None if not costs or None in costs else sum(c for c in costs if c is not None)
    pending = sum(a.pending_requests for a in agents)
    facts = [esc(view.session_id)]
    if view.cwd:
        facts.append("cwd " + esc(view.cwd))
    if view.execution_mode:
        facts.append(esc(view.execution_mode) + " mode")
    if view.goal_status:
        facts.append("goal " + esc(view.goal_status))
    if view.status != view.stored_status:
        facts.append(f"recorded {esc(view.stored_status)} (a reconciling read updates it)")
    taint = ' <span class="badge taint">tainted</span>' if view.tainted else ""
    return (
        f'<div class="head" data-status="{esc(view.status)}">'
        f'<h1>{esc(view.profile_id or "session")} {badge(view.status)}{taint}</h1>'
        f'<p class="facts mono">{" · ".join(facts)}</p>'
        f'<p class="stats"><b>{duration(root.elapsed_seconds if root else None)}</b> elapsed · '
        f'<b>{len(agents)}</b> agents · <b>{count(given)}</b> in / <b>{count(taken)}</b> out · '
        f'cost <b>{money(cost)}</b> · <b>{pending}</b> pending requests</p></div>')


def _doing(agent: AgentView, now: float) -> str:
    if agent.pending_requests:
        return f'<span class="ask">? {agent.pending_requests} request(s) wait for you</span>'
    if agent.doing is not None:
        return (f'<span class="doing">▶ {esc(agent.doing.label)} · '
                f'{duration(now - agent.doing.since)}</span>')
    if agent.error and agent.status in ("failed", "suspended"):
        return f'<span class="err">! {esc(agent.error)}</span>'
    return ""


def _card(agent: AgentView, now: float) -> str:
    depth = min(agent.depth, MAX_DEPTH_CLASS)
    role = "root" if agent.job_id is None else esc(agent.mode or "")
    name = esc(agent.agent)
    if agent.job_id:
        name = f'<a href="{esc(job_href(agent.job_id))}">{name}</a>'
    scope = (f' <span class="scope">✎ {esc(", ".join(agent.write_scope))}</span>'
             if agent.write_scope else "")
    result = (f' · result <span class="rs rs-{esc(agent.result_state)}">'
              f'{esc(agent.result_state)}</span>' if agent.result_state else "")
    tools = sum(1 for s in agent.timeline if s.get("kind") != "turn")
    tokens = f"{count(agent.input_tokens)} in / {count(agent.output_tokens)} out"
    message = (f'<div class="msg">{esc(agent.last_message)}</div>'
               if agent.last_message else "")
    return (
        f'<li class="card depth-{depth} st-{esc(agent.status)}" data-key="{esc(agent.key)}">'
        f'<div>{badge(agent.status)} <b class="agent">{name}</b> '
        f'<span class="role">{role}</span>{scope}</div>'
        f'<div class="route mono">{esc(agent.route or "—")} · {esc(agent.model or "—")}</div>'
        f'<div class="nums">{duration(agent.elapsed_seconds)} · turn {agent.turns} · '
        f'{tokens} · cost {money(agent.cost_usd)} · {tools} tools{result}</div>'
        f'<div class="now">{_doing(agent, now)}</div>{message}'
        f'<div class="id mono">{esc(agent.job_id or "root")}</div></li>')


def tree(view: SessionView, now: float | None = None) -> str:
    now = time.time() if now is None else now
    return '<ul class="tree">' + "".join(_card(a, now) for a in view.agents) + "</ul>"


def _bounds(view: SessionView, now: float) -> tuple[float, float]:
    starts = [s["start"] for a in view.agents for s in a.timeline if s.get("start")]
    ends = [s.get("end") or now for a in view.agents for s in a.timeline if s.get("start")]
    if not starts:
        return now - 1, now
    return min(starts), max(max(ends), min(starts) + 1)


def timeline(view: SessionView, now: float | None = None) -> str:
    """One SVG row per agent, a bar per turn (thin) and tool call; open ones reach now."""
    now = time.time() if now is None else now
    if not any(a.timeline for a in view.agents):
        return '<p class="empty">no turns or tool calls recorded yet</p>'
    begin, end = _bounds(view, now)
    scale = TIMELINE_WIDTH / (end - begin)
    rows = []
    for n, agent in enumerate(view.agents):
        y = n * ROW_HEIGHT
        bars = []
        for span in agent.timeline:
            if not span.get("start"):
                continue
            x = (span["start"] - begin) * scale
            w = max(2.0, ((span.get("end") or now) - span["start"]) * scale)
            kind = esc(span.get("kind"))
            is_open = " open" if span.get("end") is None else ""
            title = f'{span.get("label")} · {duration((span.get("end") or now) - span["start"])}'
            if kind == "turn":
                bars.append(f'<rect class="bar turn{is_open}" x="{x:.1f}" y="{y + 15}" '
                            f'width="{w:.1f}" height="3"><title>{esc(title)}</title></rect>')
                continue
            bars.append(f'<rect class="bar k-{kind}{is_open}" x="{x:.1f}" y="{y + 2}" '
                        f'width="{w:.1f}" height="12"><title>{esc(title)}</title></rect>')
            if w >= LABEL_MIN_WIDTH:
                text = esc(str(span.get("label"))[: int(w / 7)])
                bars.append(f'<text class="barlabel" x="{x + 3:.1f}" y="{y + 12}">{text}</text>')
        rows.append(f'<g><text class="rowlabel" x="0" y="{y + 13}">'
                    f'{esc("  " * agent.depth + agent.agent)}</text>'
                    f'<svg x="180" width="{TIMELINE_WIDTH}" overflow="hidden">{"".join(bars)}'
                    f'</svg></g>')
    height = len(view.agents) * ROW_HEIGHT + 16
    axis = "".join(
        f'<text class="tick" x="{180 + TIMELINE_WIDTH * i / 4:.0f}" y="{height - 2}">'
        f'{_tick((end - begin) * i / 4, end - begin)}</text>' for i in range(5))
    return (f'<svg class="timeline" viewBox="0 0 {TIMELINE_WIDTH + 240} {height}" '
            f'role="img" aria-label="timeline">{"".join(rows)}{axis}</svg>')


def _tick(seconds: float, span: float) -> str:
    """An axis label: tenths on a short timeline, so its five ticks never repeat."""
    return f"{seconds:.1f}s" if span < 10 else duration(seconds)


def tool_calls(view: SessionView, now: float | None = None) -> str:
    now = time.time() if now is None else now
    rows = [(span, agent) for agent in view.agents for span in agent.timeline
            if span.get("kind") != "turn" and span.get("start")]
    rows.sort(key=lambda item: item[0]["start"])
    rows = rows[-TOOL_ROWS_KEPT:]
    if not rows:
        return '<p class="empty">no tool calls yet</p>'
    body = "".join(
        f'<tr><td class="mono">{clock(span["start"])}</td><td>{esc(agent.agent)}</td>'
        f'<td>{esc(span.get("kind"))}</td><td class="mono">{esc(span.get("label"))}</td>'
        f'<td>{duration((span.get("end") or now) - span["start"])}</td>'
        f'<td>{badge(span.get("status") or "running")}</td></tr>' for span, agent in rows)
    return ('<table class="grid"><thead><tr><th>at</th><th>agent</th><th>kind</th>'
            f'<th>call</th><th>took</th><th>status</th></tr></thead><tbody>{body}</tbody></table>')


AUDIT_SHOWN = ("reason", "status", "result_state", "changed_paths", "mode", "detail",
               "action", "error")


def _audit_detail(entry: dict[str, Any]) -> str:
    parts = []
    for key in AUDIT_SHOWN:
        value = entry.get(key)
        if value not in (None, "", []):
            shown = ", ".join(map(str, value)) if isinstance(value, list) else value
            parts.append(f"{key}: {shown}")
    return esc(" · ".join(parts))


def _actor(entry: dict[str, Any]) -> str:
    name = entry.get("actor_name")
    return esc(entry.get("actor")) + (" · " + esc(name) if name else "")


def audit(entries: list[dict[str, Any]]) -> str:
    if not entries:
        return '<p class="empty">no audit entries yet</p>'
    body = "".join(
        f'<tr><td class="mono">{clock(e.get("at"))}</td><td><b>{esc(e.get("event"))}</b></td>'
        f'<td>{_actor(e)}</td><td>{esc(e.get("agent"))}</td>'
        f'<td class="mono">{esc(e.get("job_id"))}</td>'
        f'<td>{_audit_detail(e)}</td></tr>' for e in reversed(entries))
    return ('<table class="grid audit"><thead><tr><th>at</th><th>event</th><th>actor</th>'
            '<th>agent</th><th>job</th><th>detail</th></tr></thead>'
            f'<tbody>{body}</tbody></table>')


def routes(figures: list[Any]) -> str:
    if not figures:
        return '<p class="empty">no gateway requests in the last 5 minutes</p>'

    def ms(value: float | None) -> str:
        return "—" if value is None else f"{value:.1f}"

    body = "".join(
        f'<tr><td class="mono">{esc(f.route)}</td><td>{f.requests}</td>'
        f'<td class="{"err" if f.errors else ""}">{f.errors}</td><td>{f.faults}</td>'
        f'<td>{ms(f.ttfb_p50_ms)}</td><td>{ms(f.latency_p50_ms)} / {ms(f.latency_p95_ms)}</td>'
        f'<td>{count(f.input_tokens)} / {count(f.output_tokens)}</td></tr>' for f in figures)
    return ('<table class="grid"><thead><tr><th>route</th><th>req</th><th>err</th>'
            '<th>faults</th><th>ttfb p50 ms</th><th>latency p50/p95 ms</th>'
            f'<th>tokens in/out</th></tr></thead><tbody>{body}</tbody></table>')


def session_fragments(view: SessionView) -> dict[str, str]:
    now = time.time()
    return {"sess-head": head(view), "sess-tree": tree(view, now),
            "sess-timeline": timeline(view, now), "sess-tools": tool_calls(view, now),
            "sess-audit": audit(view.audit), "sess-routes": routes(view.routes)}


# --------------------------------------------------------------- list --


def live_rows(snap: TeamSnapshot) -> str:
    """The sessions the snapshot carries (live ones first), with their teams at a glance."""
    if not snap.sessions:
        return '<p class="empty">no live session right now</p>'
    now = time.time()
    rows = []
    for view in snap.sessions:
        running = [a for a in view.agents if a.doing is not None]
        doing = "; ".join(f"{a.agent}: {a.doing.label}" for a in running[:3] if a.doing)
        tokens = sum((a.input_tokens or 0) + (a.output_tokens or 0) for a in view.agents)
        review = sum(1 for a in view.agents if a.result_state in ("unread", "read"))
        note = f' <span class="review">{review} to review</span>' if review else ""
        rows.append(
            f'<tr data-status="{esc(view.status)}"><td>{badge(view.status)}</td>'
            f'<td><a href="{esc(session_href(view.session_id))}">{esc(view.session_id)}</a>'
            f'{note}</td><td>{esc(view.profile_id)}</td><td>{len(view.agents)}</td>'
            f'<td>{count(tokens)}</td><td>{ago(view.created_at, now)}</td>'
            f'<td class="mono">{esc(doing)}</td></tr>')
    return ('<table class="grid"><thead><tr><th>status</th><th>session</th><th>profile</th>'
            '<th>agents</th><th>tokens</th><th>age</th><th>now</th></tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table>')


def top_status(snap: TeamSnapshot) -> str:
    agents = sum(snap.agents.values())
    by_status = ", ".join(f"{n} {esc(s)}" for s, n in snap.agents.items()) or "none"
    return (f'<span>{snap.sessions_live} live / {snap.sessions_total} sessions · {agents} '
            f'agents ({by_status}) · cost {money(snap.cost_usd)}</span>')


def list_fragments(snap: TeamSnapshot) -> dict[str, str]:
    return {"live-rows": live_rows(snap), "top-status": top_status(snap)}


__all__ = ["ago", "audit", "badge", "clock", "count", "duration", "esc", "head",
           "job_href", "list_fragments", "live_rows", "money", "routes", "session_fragments",
           "session_href", "timeline", "tool_calls", "top_status", "tree"]

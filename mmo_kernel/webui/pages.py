"""Whole pages: the session list, a session, a job. Each is the layout template
(``templates/page.html``) around sections whose live parts are ``render`` fragments, so
the first paint and every server-sent update come from the same code."""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from string import Template
from typing import Any
from urllib.parse import urlencode

from pydantic import BaseModel, Field

from mmo_kernel.views.model import SessionView, TeamSnapshot
from mmo_kernel.webui import jobview, render
from mmo_kernel.webui.render import ago, badge, esc, session_href

PAGE_SIZE = 50
SESSION_STATUSES = ("created", "starting", "running", "paused", "detached", "suspended",
                    "completed", "failed", "cancelled", "stopped")


@lru_cache(maxsize=1)
def _layout() -> Template:
    text = resources.files("mmo_kernel.webui").joinpath("templates/page.html").read_text("utf-8")
    return Template(text)


def page(title: str, topic: str, body: str, csrf: str, snap: TeamSnapshot | None,
         notice: str = "", error: bool = False) -> str:
    """The layout around ``body`` (already escaped markup); ``title``/``notice`` are text."""
    return _layout().substitute(
        title=esc(title), topic=esc(topic), csrf=esc(csrf), body=body,
        top=render.top_status(snap) if snap is not None else "",
        state_dir=esc(snap.state_dir if snap is not None else ""),
        notice=esc(notice), notice_class=" bad" if error else (" ok" if notice else ""))


def section(title: str, note: str, inner_id: str, inner: str, extra: str = "") -> str:
    return (f'<section class="panel{extra}"><h2>{esc(title)} <small>{esc(note)}</small></h2>'
            f'<div id="{inner_id}">{inner}</div></section>')


def _csrf_field(csrf: str) -> str:
    return f'<input type="hidden" name="csrf" value="{esc(csrf)}">'


# --------------------------------------------------------------- list --


class ListQuery(BaseModel):
    """The list page's filters (query parameters)."""

    q: str = Field(default="", max_length=200)
    status: str = ""
    profile: str = Field(default="", max_length=200)
    page: int = Field(default=1, ge=1, le=10_000)
    size: int = Field(default=PAGE_SIZE, ge=1, le=500)


def _matches(row: dict[str, Any], q: str) -> bool:
    if not q:
        return True
    text = " ".join(str(row.get(k) or "") for k in ("session_id", "profile_id", "cwd",
                                                    "root_agent", "status"))
    return all(word in text.lower() for word in q.lower().split())


def list_rows(query: ListQuery) -> tuple[list[dict[str, Any]], bool]:
    """A page of every session (finished ones included), newest first, from the listing
    index as ``mmo sessions --all`` reads it; whether another page follows."""
    from mmo_kernel import api

    wanted = query.page * query.size + 1
    rows = api.iter_sessions(
        all_sessions=True, include_unreadable=True, summary=True,
        status=query.status or None, profile=query.profile or None,
        limit=None if query.q else wanted)
    rows = [r for r in rows if _matches(r, query.q)]
    start = (query.page - 1) * query.size
    return rows[start:start + query.size], len(rows) > start + query.size


def _list_row(row: dict[str, Any], live: dict[str, SessionView]) -> str:
    sid = row.get("session_id") or "?"
    if row.get("unreadable") or "status" not in row:
        return (f'<tr><td>{badge("unreadable")}</td><td class="mono">{esc(sid)}</td>'
                f'<td colspan="4">{esc(row.get("error") or "this record cannot be read")}</td>'
                '</tr>')
    view = live.get(sid)
    status = view.status if view is not None else row["status"]
    agents = str(len(view.agents)) if view is not None else ""
    return (f'<tr data-status="{esc(status)}"><td>{badge(status)}</td>'
            f'<td><a href="{esc(session_href(sid))}">{esc(sid)}</a></td>'
            f'<td>{esc(row.get("profile_id"))}</td><td>{agents}</td>'
            f'<td>{ago(row.get("created_at"))}</td><td class="mono">{esc(row.get("cwd"))}</td>'
            '</tr>')


def _filters(query: ListQuery) -> str:
    options = "".join(
        f'<option value="{s}"{" selected" if query.status == s else ""}>{s}</option>'
        for s in SESSION_STATUSES)
    return ('<form class="filters" method="get" action="/">'
            f'<input type="search" name="q" value="{esc(query.q)}" '
            'placeholder="filter: id, profile, cwd, agent words" aria-label="filter">'
            f'<select name="status" aria-label="status"><option value="">any status</option>'
            f'{options}</select>'
            f'<input name="profile" value="{esc(query.profile)}" placeholder="profile id" '
            'aria-label="profile"><button type="submit">Filter</button>'
            '<a href="/">clear</a></form>')


def _pager(query: ListQuery, more: bool) -> str:
    def link(number: int, text: str) -> str:
        params = {k: v for k, v in (("q", query.q), ("status", query.status),
                                    ("profile", query.profile)) if v}
        if query.size != PAGE_SIZE:
            params["size"] = str(query.size)
        params["page"] = str(number)
        return f'<a rel="{text}" href="/?{esc(urlencode(params))}">{esc(text)} page</a>'

    parts = []
    if query.page > 1:
        parts.append(link(query.page - 1, "prev"))
    parts.append(f"page {query.page}")
    if more:
        parts.append(link(query.page + 1, "next"))
    return f'<p class="pager">{" · ".join(parts)}</p>'


def list_page(query: ListQuery, rows: list[dict[str, Any]], more: bool, snap: TeamSnapshot,
              csrf: str, notice: str = "") -> str:
    live = {v.session_id: v for v in snap.sessions}
    table = ('<table class="grid" id="all-sessions"><thead><tr><th>status</th><th>session</th>'
             '<th>profile</th><th>agents</th><th>age</th><th>cwd</th></tr></thead><tbody>'
             + "".join(_list_row(r, live) for r in rows) + "</tbody></table>"
             if rows else '<p class="empty">no session matches</p>')
    finished = ", ".join(f"{n} {esc(s)}" for s, n in snap.finished.items()) or "none"
    body = (section("Live now", "updates every second", "live-rows", render.live_rows(snap))
            + f'<section class="panel"><h2>All sessions <small>{snap.sessions_total} in this '
              f'state dir · finished: {finished}</small></h2>{_filters(query)}{table}'
              f'{_pager(query, more)}</section>')
    return page("sessions", "list", body, csrf, snap, notice)


# ------------------------------------------------------------ session --

SESSION_CONTROLS = (
    ("pause", "Pause", "cold-pause: the root and live workers stop, partial results kept"),
    ("continue", "Continue", "relaunch a paused, detached or suspended session"),
    ("stop", "Stop", "graceful: the root and workers finalize, then the hosts retire"),
    ("cancel", "Cancel", "at once: kill the root and every live job"),
)


def _session_controls(session_id: str, csrf: str) -> str:
    buttons = "".join(
        f'<button type="submit" name="action" value="{a}" title="{esc(t)}" '
        f'class="act act-{a}"{" data-confirm=1" if a in ("cancel", "stop") else ""}>'
        f'{esc(label)}</button>' for a, label, t in SESSION_CONTROLS)
    return (f'<form class="controls" method="post" action="{esc(session_href(session_id))}'
            f'/control" data-kind="session">{_csrf_field(csrf)}'
            '<input name="input" placeholder="continue with… (optional input for Continue)" '
            'aria-label="continue input" maxlength="20000">'
            '<input name="reason" placeholder="reason (optional, for Stop and Cancel: kept in '
            f'the audit log)" aria-label="reason" maxlength="2000">{buttons}</form>')


def session_page(view: SessionView, snap: TeamSnapshot, csrf: str, notice: str = "",
                 error: bool = False) -> str:
    parts = render.session_fragments(view)
    body = (f'<section class="panel headpanel"><div id="sess-head">{parts["sess-head"]}</div>'
            f'{_session_controls(view.session_id, csrf)}</section>'
            + section("Agent tree", "root first, each worker under its caller; click a worker "
                      "for its result and patch", "sess-tree", parts["sess-tree"])
            + section("Timeline", "turns (thin) and tool calls from the event logs",
                      "sess-timeline", parts["sess-timeline"])
            + section("Tool calls", "newest last", "sess-tools", parts["sess-tools"])
            + '<div class="cols">'
            + section("Audit log", "audit.jsonl, newest first", "sess-audit", parts["sess-audit"])
            + section("Route telemetry", "gateway requests of this session, last 5 minutes",
                      "sess-routes", parts["sess-routes"])
            + "</div>")
    return page(view.profile_id or view.session_id, f"session:{view.session_id}", body, csrf,
                snap, notice, error)


# ---------------------------------------------------------------- job --

JOB_ACTIONS = (
    ("read", "Read", "mark the result read (reads every page, as the root would)"),
    ("accept", "Accept", "accept the read result"),
    ("reject", "Reject", "reject the read result (a writer's worktree is removed)"),
    ("integrate", "Integrate", "apply the accepted patch to the workspace (preimage checked)"),
    ("cancel", "Cancel job", "kill the job's host and its descendants"),
)


def _job_controls(job_id: str, csrf: str) -> str:
    buttons = "".join(
        f'<button type="submit" name="action" value="{a}" title="{esc(t)}" '
        f'class="act act-{a}"{" data-confirm=1" if a == "cancel" else ""}>{esc(label)}</button>'
        for a, label, t in JOB_ACTIONS)
    return (f'<form class="controls" method="post" action="{esc(jobview_href(job_id))}/action"'
            f' data-kind="job">{_csrf_field(csrf)}'
            '<input name="reason" placeholder="reason (required for accept, reject, integrate, '
            'cancel; kept in the audit log)" aria-label="reason" maxlength="2000">'
            f'{buttons}<small>integrate checks the preimage first: nothing is applied if a '
            'changed path moved</small></form>')


def jobview_href(job_id: str) -> str:
    return render.job_href(job_id)


def job_page(data: jobview.JobPage, snap: TeamSnapshot, csrf: str, notice: str = "",
             error: bool = False) -> str:
    job = data.job
    tabs = "".join(
        f'<a class="tab{" on" if data.tab == t else ""}" href="?tab={t}">{t}</a>'
        for t in jobview.TABS)
    body = (f'<section class="panel headpanel"><div id="job-head">{jobview.head(job)}</div>'
            f'{_job_controls(job["job_id"], csrf)}</section>'
            f'<section class="panel"><nav class="tabs">{tabs}</nav>'
            f'<div id="job-tab">{jobview.tab_body(data)}</div></section>')
    return page(f'{job.get("agent")} · {job["job_id"]}', f'job:{job["job_id"]}', body, csrf,
                snap, notice, error)


def error_page(status: int, message: str, csrf: str, snap: TeamSnapshot | None) -> str:
    body = (f'<section class="panel"><h2>{status}</h2><p>{esc(message)}</p>'
            '<p><a href="/">back to the sessions</a></p></section>')
    return page(str(status), "list", body, csrf, snap)


__all__ = ["ListQuery", "PAGE_SIZE", "error_page", "job_page", "list_page", "list_rows",
           "page", "session_page"]

"""What the job page shows: the record, a page of the result, the patch, the trace, the
prompt. All pure reads through the kernel's own contained readers: the result files and
the patch only from the job's directory (a symlinked leaf refused), the trace filtered as
``mmo job trace`` filters it (private reasoning removed); nothing here marks a result read
(that is the *read* action, which is audited)."""

from __future__ import annotations

import json
import os
import stat
import threading
from typing import Any

from pydantic import BaseModel

from mmo_kernel import api
from mmo_kernel.config.pricing import cost_number
from mmo_kernel.jobs.records import job_file, read_job_record
from mmo_kernel.jobs.results import current_result
from mmo_kernel.jobs.workspace import read_patch_diff
from mmo_kernel.profiles.costs import job_cost
from mmo_kernel.state import index
from mmo_kernel.webui.render import ago, badge, count, esc, money, session_href

RESULT_PAGE_CHARS = 20_000
TRACE_PAGE = 50
PROMPT_MAX_BYTES = 256 << 10
TABS = ("result", "diff", "trace", "prompt")


class JobPage(BaseModel):
    """One job page's data (query parameters validated at the route)."""

    job: dict[str, Any]
    root_agent: str
    tab: str = "result"
    cursor: int = 0


class Records:
    """Job records for the live job heads, parsed again only when the file changed (its
    identity); the status is still peeked every time (a host may die without a write)."""

    KEPT = 256

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kept: dict[str, tuple[str, dict[str, Any]]] = {}

    def peek(self, job_id: str) -> dict[str, Any]:
        ident = index.identity(job_file(job_id, "metadata.json"))
        with self._lock:
            kept = self._kept.get(job_id)
        if kept is None or ident is None or kept[0] != ident:
            record = read_job_record(job_id)
            with self._lock:
                if len(self._kept) >= self.KEPT:
                    self._kept.pop(next(iter(self._kept)))
                if ident is not None:
                    self._kept[job_id] = (ident, record)
        else:
            record = kept[1]
        return api.peek_job_record(record)


def load(job_id: str) -> tuple[dict[str, Any], str]:
    """``(peeked record, the session's root agent)``: a missing or bad id is FileNotFoundError."""
    record = api.peek_job(job_id)
    session = api.peek_session(record["session_id"])
    return record, str(session.get("root_agent") or "root")


class Refused(RuntimeError):
    """A job file that is not a regular file inside the job's directory."""


def _small_file(job_id: str, name: str) -> str | None:
    """A job file's text (None: absent); a symlink or special file is ``Refused``."""
    try:
        path = job_file(job_id, name)
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except (OSError, RuntimeError, ValueError):
        raise Refused(f"{name} of job {job_id} is not a regular file; not shown") from None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise Refused(f"{name} of job {job_id} is not a regular file; not shown")
        raw = handle.read(PROMPT_MAX_BYTES + 1)
    text = raw[:PROMPT_MAX_BYTES].decode("utf-8", "replace")
    return text + ("\n[… cut at 256 KiB]" if len(raw) > PROMPT_MAX_BYTES else "")


def head(record: dict[str, Any]) -> str:
    usage: dict[str, Any] = record["usage"] if isinstance(record.get("usage"), dict) else {}
    state = record.get("result_state")
    facts = [esc(record["job_id"]), "session <a href=\"" +
             esc(session_href(record["session_id"])) + "\">" + esc(record["session_id"]) + "</a>"]
    if record.get("write_scope"):
        facts.append("✎ " + esc(", ".join(map(str, record["write_scope"]))))
    if record.get("task_kind"):
        facts.append(esc(record["task_kind"]))
    patch = record.get("patch") if isinstance(record.get("patch"), dict) else None
    if patch and patch.get("changed_paths"):
        facts.append("changes " + esc(", ".join(map(str, patch["changed_paths"]))))
    state_badge = badge(state, "rs") if state else ""
    return (f'<div class="head" data-status="{esc(record["status"])}" '
            f'data-result-state="{esc(state or "")}" data-patch="{"1" if patch else ""}">'
            f'<h1>{esc(record.get("agent"))} {badge(record["status"])} {state_badge}</h1>'
            f'<p class="facts mono">{" · ".join(facts)}</p>'
            f'<p class="stats">{esc(record.get("mode"))} · created {ago(record.get("created_at"))}'
            f' · {count(usage.get("input_tokens"))} in / {count(usage.get("output_tokens"))} out'
            f' · cost {money(_cost(record))}'
            f'{" · error: " + esc(record.get("error")) if record.get("error") else ""}</p></div>')


def _cost(record: dict[str, Any]) -> float | None:
    """The job's usage at its snapshot's price, as ``mmo jobs`` shows it (None: unknown)."""
    return cost_number(job_cost(record))


def result_tab(record: dict[str, Any], cursor: int) -> str:
    try:
        kind, text = current_result(record)
    except RuntimeError as exc:
        return f'<p class="empty">{esc(exc)}</p>'
    page = text[cursor:cursor + RESULT_PAGE_CHARS]
    shown = page
    if cursor == 0 and len(text) <= RESULT_PAGE_CHARS:
        try:
            shown = json.dumps(json.loads(text), indent=2)
        except ValueError:
            pass
    nav = []
    if cursor > 0:
        back = max(0, cursor - RESULT_PAGE_CHARS)
        nav.append(f'<a href="?tab=result&amp;cursor={back}">← previous page</a>')
    if cursor + RESULT_PAGE_CHARS < len(text):
        nav.append(f'<a href="?tab=result&amp;cursor={cursor + RESULT_PAGE_CHARS}">'
                   'next page →</a>')
    return (f'<p class="note">{esc(kind)} result · {len(text):,} chars · chars {cursor:,}–'
            f'{cursor + len(page):,} · result_state {esc(record.get("result_state"))}</p>'
            f'<pre class="result">{esc(shown)}</pre><p class="pager">{" · ".join(nav)}</p>')


def _diff_line(line: str) -> str:
    kind = ("hunk" if line.startswith("@@") else "file" if line.startswith(("+++", "---",
            "diff ", "index ")) else "add" if line.startswith("+") else
            "del" if line.startswith("-") else "ctx")
    return f'<span class="d-{kind}">{esc(line)}</span>'


def diff_tab(record: dict[str, Any]) -> str:
    if not isinstance(record.get("patch"), dict):
        return '<p class="empty">no captured patch (only a writer that finished has one)</p>'
    try:
        text = read_patch_diff(record["job_id"])
    except (RuntimeError, OSError, ValueError) as exc:
        return f'<p class="empty">{esc(exc)}</p>'
    patch = record["patch"]
    base = str(patch.get("base_revision") or patch.get("base") or "")[:12]
    note = (f'{esc(", ".join(map(str, patch.get("changed_paths") or [])))} · '
            f'{len(text):,} chars · base {esc(base)}')
    body = "".join(_diff_line(line) for line in text.splitlines())  # block spans: one a line
    return f'<p class="note mono">{note}</p><pre class="diff">{body}</pre>'


def _trace_what(rec: dict[str, Any]) -> str:
    message: dict[str, Any] = rec["message"] if isinstance(rec.get("message"), dict) else {}
    return str(message.get("method") or rec.get("method") or (
        "response" if "result" in message else "malformed" if "malformed_event" in rec else ""))


def trace_tab(record: dict[str, Any], root: str, cursor: int) -> str:
    try:
        page = api.read_trace(record["job_id"], record["session_id"], root, cursor=cursor,
                              limit=TRACE_PAGE)
    except (RuntimeError, OSError, ValueError) as exc:
        return f'<p class="empty">{esc(exc)}</p>'
    rows = []
    for rec in page["records"]:
        body = json.dumps(rec.get("message", rec), indent=1, sort_keys=True)
        flags = " (shortened)" if rec.get("trace_record_truncated") else ""
        rows.append(f'<details><summary><span class="mono">{esc(rec.get("record_cursor"))}'
                    f'</span> {esc(rec.get("direction"))} <b>{esc(_trace_what(rec))}</b>'
                    f'{flags}</summary><pre>{esc(body[:20_000])}</pre></details>')
    nav = []
    if cursor > 0:
        nav.append(f'<a href="?tab=trace&amp;cursor={max(0, cursor - TRACE_PAGE)}">'
                   '← previous</a>')
    if page.get("has_more"):
        nav.append(f'<a href="?tab=trace&amp;cursor={int(page["next_cursor"])}">next →</a>')
    if not rows:
        return '<p class="empty">no trace records here</p>'
    return "".join(rows) + f'<p class="pager">{" · ".join(nav)}</p>'


def prompt_tab(record: dict[str, Any]) -> str:
    try:
        text = _small_file(record["job_id"], "prompt.txt")
    except Refused as exc:
        return f'<p class="empty">{esc(exc)}</p>'
    if text is None:
        text = record.get("task")
    if not text:
        return '<p class="empty">no prompt recorded</p>'
    return f'<pre class="result">{esc(text)}</pre>'


def tab_body(page: JobPage) -> str:
    if page.tab == "diff":
        return diff_tab(page.job)
    if page.tab == "trace":
        return trace_tab(page.job, page.root_agent, page.cursor)
    if page.tab == "prompt":
        return prompt_tab(page.job)
    return result_tab(page.job, page.cursor)


__all__ = ["JobPage", "TABS", "head", "load", "tab_body"]

"""The ``mmo ui`` application: routes over the shared feed, behind the guard.

Pages are rendered on the server (every value escaped in ``render``), live parts are
replaced by server-sent fragments, and the controls are plain forms (a script turns them
into fetches; without it they still post and come back with a note). Only two files are
ever served from disk: the stylesheet and the script shipped in the package.
"""

from __future__ import annotations

import asyncio
import re
import secrets
import sys
import traceback
from collections import OrderedDict
from collections.abc import Callable
from contextlib import asynccontextmanager
from importlib import resources
from typing import Any

from pydantic import ValidationError
from sse_starlette.sse import EventSourceResponse
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from mmo_kernel import api
from mmo_kernel.views.model import SessionView, TeamSnapshot
from mmo_kernel.webui import actions, jobview, pages, render
from mmo_kernel.webui.archive import Archive
from mmo_kernel.webui.feed import Feed
from mmo_kernel.webui.security import Guard, Secrets, csrf_ok

STATIC = {"mmo-ui.css": "text/css; charset=utf-8",
          "mmo-ui.js": "text/javascript; charset=utf-8"}
TOPIC = re.compile(r"^(list|(session|job):[A-Za-z0-9][A-Za-z0-9_.-]{0,200})$")
NOTES_KEPT = 100
KEEPALIVE_SECONDS = 15.0


class Notes:
    """Outcomes of form posts made without the script, shown once after the redirect."""

    def __init__(self) -> None:
        self._notes: OrderedDict[str, tuple[str, bool]] = OrderedDict()

    def add(self, text: str, error: bool) -> str:
        key = secrets.token_urlsafe(8)
        self._notes[key] = (text, error)
        while len(self._notes) > NOTES_KEPT:
            self._notes.popitem(last=False)
        return key

    def take(self, key: str | None) -> tuple[str, bool]:
        return self._notes.pop(key, ("", False)) if key else ("", False)


class UI:
    """Everything one ``mmo ui`` process serves."""

    def __init__(self, keys: Secrets, keepalive: float = KEEPALIVE_SECONDS,
                 debug: bool = False, period: float | None = None) -> None:
        self.keys, self.keepalive, self.debug = keys, keepalive, debug
        self.archive = Archive()
        self.feed = Feed(self.fragments) if period is None else Feed(self.fragments, period)
        self.notes = Notes()
        self.jobs = jobview.Records()

    # ------------------------------------------------------------ reads --

    def session_view(self, session_id: str, snap: TeamSnapshot) -> SessionView:
        for view in snap.sessions:
            if view.session_id == session_id:
                return view
        return self.archive.view(session_id)

    def fragments(self, topic: str, snap: TeamSnapshot) -> dict[str, str]:
        """What the tabs watching ``topic`` are sent after a refresh."""
        out = {"top-status": render.top_status(snap)}
        kind, _, ident = topic.partition(":")
        if kind == "list":
            out.update(render.list_fragments(snap))
        elif kind == "session":
            out.update(render.session_fragments(self.session_view(ident, snap)))
        elif kind == "job":
            out["job-head"] = jobview.head(self.jobs.peek(ident))
        return out

    def warm(self) -> None:
        """The first snapshot and the listing index, built before the first page asks: the
        first refresh reads every live log from its start, and an index not refreshed for a
        while re-reads the records that changed."""
        try:
            self.feed.current()
            pages.list_rows(pages.ListQuery())
        except (OSError, ValueError, RuntimeError) as exc:  # the page will say it again
            if self.debug:
                traceback.print_exception(exc, file=sys.stderr)

    # ------------------------------------------------------------ pages --

    def _fail(self, request: Request, exc: Exception) -> Response:
        if self.debug:
            traceback.print_exception(exc, file=sys.stderr)
        status = 404 if isinstance(exc, FileNotFoundError) else 400
        message = str(exc) if status == 400 else _not_found(exc)
        return HTMLResponse(pages.error_page(status, message, self.keys.csrf, self.feed.snapshot),
                            status_code=status)

    def list_page(self, request: Request) -> Response:
        try:
            query = pages.ListQuery.model_validate(dict(request.query_params))
            rows, more = pages.list_rows(query)
        except (ValidationError, ValueError) as exc:
            return self._fail(request, ValueError(_plain(exc)))
        snap = self.feed.current()
        notice, _ = self.notes.take(request.query_params.get("note"))
        return HTMLResponse(pages.list_page(query, rows, more, snap, self.keys.csrf, notice))

    def session_page(self, request: Request) -> Response:
        session_id = request.path_params["session_id"]
        try:
            api.session_dir(session_id)  # a bad id or a symlinked directory: refused
            snap = self.feed.current()
            view = self.session_view(session_id, snap)
            notice, error = self.notes.take(request.query_params.get("note"))
            body = pages.session_page(view, snap, self.keys.csrf, notice, error)
        except (OSError, ValueError, RuntimeError) as exc:
            return self._fail(request, exc)
        return HTMLResponse(body)

    def job_page(self, request: Request) -> Response:
        job_id = request.path_params["job_id"]
        try:
            record, root = jobview.load(job_id)
            data = jobview.JobPage(job=record, root_agent=root,
                                   tab=request.query_params.get("tab", "result"),
                                   cursor=int(request.query_params.get("cursor", "0")))
            if data.tab not in jobview.TABS or data.cursor < 0:
                raise ValueError(f"tab must be one of {', '.join(jobview.TABS)} and cursor >= 0")
            notice, error = self.notes.take(request.query_params.get("note"))
            body = pages.job_page(data, self.feed.current(), self.keys.csrf, notice, error)
        except (OSError, ValueError, RuntimeError, ValidationError) as exc:
            return self._fail(request, exc if not isinstance(exc, ValidationError)
                              else ValueError(_plain(exc)))
        return HTMLResponse(body)

    def static(self, request: Request) -> Response:
        name = request.path_params["name"]
        if name not in STATIC:
            return Response("not found\n", status_code=404, media_type="text/plain")
        body = resources.files("mmo_kernel.webui").joinpath("static", name).read_bytes()
        return Response(body, media_type=STATIC[name])

    # ----------------------------------------------------------- events --

    async def events(self, request: Request) -> Response:
        topic = request.query_params.get("topic", "list")
        if not TOPIC.match(topic) or ".." in topic:
            return Response("unknown topic\n", status_code=404, media_type="text/plain")
        kind, _, ident = topic.partition(":")
        try:
            if kind == "session":
                api.session_dir(ident)
            elif kind == "job":
                api.job_dir(ident)
        except (OSError, ValueError, RuntimeError):
            return Response("unknown topic\n", status_code=404, media_type="text/plain")
        last = request.headers.get("last-event-id")
        return EventSourceResponse(self.feed.stream(topic, last), ping=self.keepalive,
                                   headers={"x-accel-buffering": "no"})

    # ---------------------------------------------------------- actions --

    async def _form(self, request: Request) -> dict[str, str] | None:
        form = await request.form(max_files=0, max_fields=8)
        values = {k: v for k, v in form.items() if isinstance(v, str)}
        if not csrf_ok(request.scope, values.get("csrf"), self.keys):
            return None
        return values

    def _answer(self, request: Request, back: str, text: str, error: bool) -> Response:
        self.feed.poke()
        if "application/json" in request.headers.get("accept", ""):
            return JSONResponse({"ok": not error, "message": text},
                                status_code=409 if error else 200)
        return RedirectResponse(f"{back}?note={self.notes.add(text, error)}", status_code=303)

    async def session_control(self, request: Request) -> Response:
        session_id = request.path_params["session_id"]
        return await self._act(request, render.session_href(session_id),
                               lambda: api.session_dir(session_id),
                               lambda values: actions.session_action(
                                   session_id, actions.SessionAction(**values)))

    async def job_control(self, request: Request) -> Response:
        job_id = request.path_params["job_id"]
        return await self._act(request, render.job_href(job_id), lambda: api.job_dir(job_id),
                               lambda values: actions.job_action(
                                   job_id, actions.JobAction(**values)))

    async def _act(self, request: Request, back: str, check: Callable[[], object],
                   run: Callable[[dict[str, str]], str]) -> Response:
        """A control POST: the CSRF token first, then the id (a bad one refuses before
        anything runs), then the action in a worker thread (it may wait on locks)."""
        from starlette.concurrency import run_in_threadpool

        values = await self._form(request)
        if values is None:
            return _forbidden("missing or wrong CSRF token")
        fields = {k: v for k, v in values.items() if k in ("action", "input", "reason")}
        fields.setdefault("action", "")
        try:
            check()
            text = await run_in_threadpool(run, fields)
        except (OSError, ValueError, RuntimeError, ValidationError) as exc:
            return self._refused(request, back, exc)
        return self._answer(request, back, text, False)

    def _refused(self, request: Request, back: str, exc: Exception) -> Response:
        if self.debug:
            traceback.print_exception(exc, file=sys.stderr)
        text = _not_found(exc) if isinstance(exc, FileNotFoundError) else _plain(exc)
        return self._answer(request, back, f"refused: {text}", True)

    # -------------------------------------------------------------- app --

    def app(self, port: int) -> Any:
        @asynccontextmanager
        async def lifespan(_app: Starlette):
            await self.feed.start()
            warming = asyncio.create_task(asyncio.to_thread(self.warm))
            try:
                yield
            finally:
                warming.cancel()
                await self.feed.stop()

        routes = [
            Route("/", self.list_page, methods=["GET"]),
            Route("/session/{session_id}", self.session_page, methods=["GET"]),
            Route("/session/{session_id}/control", self.session_control, methods=["POST"]),
            Route("/job/{job_id}", self.job_page, methods=["GET"]),
            Route("/job/{job_id}/action", self.job_control, methods=["POST"]),
            Route("/events", self.events, methods=["GET"]),
            Route("/static/{name}", self.static, methods=["GET"]),
        ]
        return Guard(Starlette(routes=routes, lifespan=lifespan), self.keys, port)


def _forbidden(why: str) -> Response:
    return Response(f"403 forbidden: {why}\n", status_code=403, media_type="text/plain")


def _plain(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "input"
        return f"{where}: {first.get('msg')}"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _not_found(exc: Exception) -> str:
    text = str(exc)
    return text.splitlines()[0] if text.startswith("no ") else "no such session or job"


__all__ = ["UI"]

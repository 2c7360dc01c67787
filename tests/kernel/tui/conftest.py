"""The live view driven headless (Textual's pilot) over real records.

``team`` writes a fixed team into the test's state dir: real session records over a
real compiled snapshot of ``adaptive-engineering``, hand-written job records with
their ``agent_started`` audit lines and event logs (fixed timestamps), and a writer
whose patch was captured from a real git worktree by the session's isolator. No
host runs, so what the view shows is the same on every run.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.compiled import compile_once

PROFILE = "adaptive-engineering"
ROOT, WRITER, REVIEWER, SCOUT = ("orchestrator", "implementation_specialist",
                                 "adversarial_reviewer", "repo_scout")
T0 = time.time() - 300
"""Every fixture time is relative to this: five minutes before the tests started."""
ARTIFACTS_ENV = "MMO_TUI_SNAPSHOTS"
"""Set to a directory to keep the screens the tests take (SVG and text) outside the tmp dir."""


def iso(offset: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(T0 + offset, UTC).isoformat()


@pytest.fixture(autouse=True)
def _guarded(mmo_env, mmo_process_guard):
    yield mmo_env


@pytest.fixture(scope="session")
def snapshot_template(tmp_path_factory) -> Path:
    """One offline compile of the profile for the whole run, copied into each test's state."""
    return compile_once(tmp_path_factory.mktemp("tui-snapshot"), PROFILE)


def _event(method: str, at: float, **params: Any) -> str:
    # the host's own line shape: the method within the line's first bytes
    return json.dumps({"direction": "received", "message": {"method": method, "params": params},
                       "recorded_at": iso(at)}, separators=(",", ":"))


def _turn(start: float, end: float | None, tokens: tuple[int, int],
          items: list[tuple[str, dict[str, Any], float, float | None]]) -> list[str]:
    lines = [_event("turn/started", start, turn={"id": f"t{start}"})]
    for item_id, item, began, ended in items:
        lines.append(_event("item/started", began, item={"id": item_id, **item}))
        if ended is not None:
            lines.append(_event("item/completed", ended,
                                item={"id": item_id, **item, "status": "completed"}))
    lines.append(_event("thread/tokenUsage/updated", (end or start) - 0.5, tokenUsage={
        "total": {"inputTokens": tokens[0], "outputTokens": tokens[1]}}))
    if end is not None:
        lines.append(_event("item/completed", end - 0.2, item={
            "id": "m", "type": "agentMessage", "text": "Done: the change is ready for review."}))
        lines.append(_event("turn/completed", end, turn={"id": f"t{start}",
                                                         "status": "completed"}))
    return lines


def _session(cwd: Path, tmp: Path, template: Path, created: float, **fields: Any) -> dict:
    from mmo_kernel.profiles.snapshots import load_snapshot
    from mmo_kernel.sessions.records import new_record_id, write_run_record, write_session_record
    from mmo_kernel.state.paths import ensure_private_dir, state_dir

    target = ensure_private_dir(state_dir() / "snapshots") / template.name
    if not target.exists():
        shutil.copytree(template, target, symlinks=True)
    snapshot = load_snapshot(template.name)
    session_id, run_id = new_record_id(PROFILE), new_record_id("run")
    homes = {}
    for agent in (ROOT, WRITER, REVIEWER, SCOUT):
        home = tmp / "homes" / session_id / agent
        home.mkdir(parents=True)
        homes[agent] = {"home": str(home)}
    write_run_record({"run_id": run_id, "session_id": session_id, "sequence": 1,
                      "kind": "initial", "status": "running", "created_at": iso(created),
                      "root_mcp_token_hash": "0" * 64})
    return write_session_record({
        "session_id": session_id, "profile_id": PROFILE, "cwd": str(cwd),
        "snapshot_hash": snapshot["manifest"]["snapshot_hash"], "session_kind": "noninteractive",
        "root_agent": ROOT, "homes": homes, "current_run_id": run_id, "tainted": False,
        "created_at": iso(created), "started_at": iso(created), **fields})


def _job(session: dict, agent: str, started: float, finished: float | None, *,
         result: str | None = None, events: list[str] | None = None, **fields: Any) -> dict:
    from mmo_kernel.jobs.records import job_dir, new_job_id, write_job_record
    from mmo_kernel.sessions.records import session_file
    from mmo_kernel.state.audit import append_audit

    job_id = new_job_id(agent)
    record = {"job_id": job_id, "session_id": session["session_id"], "agent": agent,
              "status": "completed", "created_at": iso(started), "started_at": iso(started),
              "caller_agent": ROOT, **({"finished_at": iso(finished)} if finished else {}),
              **fields}
    write_job_record(record)
    directory = job_dir(job_id)
    if result is not None:
        (directory / "result.md").write_text(result, encoding="utf-8")
        record.update(result_path=str(directory / "result.md"), result_kind="final",
                      result_state="unread")
    if events:
        (directory / "events.jsonl").write_text("\n".join(events) + "\n", encoding="utf-8")
    append_audit(session_file(session["session_id"], "audit.jsonl"), "agent_started",
                 session["current_run_id"], job_id=job_id, agent=agent,
                 caller_agent=record["caller_agent"], caller_job_id=fields.get("caller_job_id"),
                 mode=fields.get("mode"))
    return write_job_record(record)


def _writer(session: dict, cwd: Path) -> dict:
    """A finished writer whose change to ``src/feature.py`` was captured as its patch."""
    from mmo_kernel.jobs.records import job_dir, update_job
    from mmo_kernel.jobs.spawn import isolator_for
    from mmo_kernel.jobs.workspace import capture_job_patch
    from mmo_kernel.profiles.snapshots import snapshot_profile

    job = _job(session, WRITER, 10, 130, result="Implemented the feature in src/feature.py.",
               mode="workspace-write", write_scope=["src"], status="running", events=_turn(
                   10, 130, (10_400, 120), [("c1", {"type": "commandExecution",
                                                    "command": "pytest -q"}, 40, 100)]))
    isolator = isolator_for(snapshot_profile(session["snapshot_hash"]))
    handle = isolator.prepare(cwd, job_dir(job["job_id"]) / "workspace", ["src"],
                              job["job_id"])
    update_job(job["job_id"], workspace=handle.model_dump())
    (Path(handle.root) / "src").mkdir()
    (Path(handle.root) / "src" / "feature.py").write_text("FEATURE = True\n")
    capture_job_patch(job["job_id"])
    return update_job(job["job_id"], status="completed", finished_at=iso(130))


@pytest.fixture
def team(mmo_env, mmo_git_workspace, tmp_path, snapshot_template) -> dict[str, Any]:
    """Two sessions: a paused one (root, a writer with a captured patch, a reviewer with an
    unread result, a scout under the writer that failed) and an older one whose record
    says running while no host exists (shown suspended)."""
    from mmo_kernel.sessions.records import session_file

    cwd = mmo_git_workspace
    older = _session(cwd, tmp_path, snapshot_template, created=-600, status="running",
                     root_thread_id="thread-old")
    paused = _session(cwd, tmp_path, snapshot_template, created=0, status="paused",
                      root_thread_id="thread-root")
    session_file(paused["session_id"], "root-events.jsonl").write_text("\n".join(_turn(
        1, 150, (4_000, 200), [("w1", {"type": "mcpToolCall", "server": "mmo_mesh",
                                       "tool": "agents_wait"}, 12, 140)])) + "\n")
    writer = _writer(paused, cwd)
    reviewer = _job(paused, REVIEWER, 12, 76, result="Looks right; one nit in the docs.",
                    mode="read-only", events=_turn(12, 76, (10_200, 200), []))
    scout = _job(paused, SCOUT, 20, 50, status="failed", mode="read-only",
                 error="usage limit reached; retry at 14:30", caller_job_id=writer["job_id"],
                 caller_agent=WRITER, events=_turn(20, 50, (7_800, 100), []))
    return {"cwd": cwd, "paused": paused["session_id"], "older": older["session_id"],
            "writer": writer["job_id"], "reviewer": reviewer["job_id"],
            "scout": scout["job_id"]}


# --------------------------------------------------------------- driving --


def app():
    from mmo_kernel.cli.top_cmd import table_format
    from mmo_kernel.tui.app import TopApp

    return TopApp(table_format(), interval=0.5)


def run(test: Callable[..., Any], size: tuple[int, int], top=None) -> None:
    """Run the coroutine ``test(pilot)`` against a fresh app of ``size``."""
    async def main() -> None:
        viewer = top or app()
        async with viewer.run_test(size=size) as pilot:
            await until(pilot, lambda: viewer.refreshes > 0, "the first refresh")
            await test(pilot)
    asyncio.run(main())


async def until(pilot, predicate: Callable[[], Any], what: str, timeout: float = 30) -> Any:
    """``wait_until`` for the pilot: let the app run until ``predicate`` holds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        value = predicate()
        if value:
            return value
        await pilot.pause(0.05)
    raise AssertionError(f"timed out waiting for {what}; screen:\n" + "\n".join(
        screen(pilot.app)))


def screen(viewer) -> list[str]:
    """The text of every line of the screen, as a person sees it (the top screen)."""
    return [strip.text for strip in viewer.screen._compositor.render_strips()]


def shown(viewer, text: str) -> bool:
    return any(text in line for line in screen(viewer))


def keep(viewer, name: str, directory: Path) -> tuple[Path, Path]:
    """Save the screen as SVG and as text into ``directory`` (and ``$MMO_TUI_SNAPSHOTS``)."""
    svg = viewer.export_screenshot(title=name)
    text = "\n".join(screen(viewer)) + "\n"
    paths = []
    for folder in filter(None, (directory, os.environ.get(ARTIFACTS_ENV))):
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{name}.svg").write_text(svg, encoding="utf-8")
        (folder / f"{name}.txt").write_text(text, encoding="utf-8")
        paths.append(folder / f"{name}.svg")
    return paths[0], paths[0].with_suffix(".txt")


def colours(viewer) -> set[tuple[int, int, int]]:
    """Every foreground and background colour on the screen, as the terminal gets it."""
    found = set()
    for strip in viewer.screen._compositor.render_strips():
        for segment in strip:
            style = segment.style
            for colour in (style.color, style.bgcolor) if style else ():
                if colour is not None and not colour.is_default:
                    found.add(tuple(colour.get_truecolor()))
    return found


def is_grey(rgb: tuple[int, int, int]) -> bool:
    return rgb[0] == rgb[1] == rgb[2]


def audit(session_id: str) -> list[dict[str, Any]]:
    from mmo_kernel.sessions.records import session_file
    from mmo_kernel.state.audit import read_jsonl

    return read_jsonl(session_file(session_id, "audit.jsonl"))


@pytest.fixture
def live(mmo_standin, mmo_git_workspace):
    """A workspace for offline sessions (the Codex stand-in); the gateway is stopped after."""
    yield mmo_git_workspace
    from mmo_kernel.gateway.process import stop_gateway

    stop_gateway()

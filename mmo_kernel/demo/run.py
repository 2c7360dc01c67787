"""`mmo demo`: a whole team fixes a failing test offline, on a throw-away git repository.

Every agent runs on the scripted model (``bindings={"*": "local_scripted"}``).
With the real Codex CLI the root drives the team itself through `mmo_mesh`
(see ``demo_scripts``). The stand-in cannot call MCP tools, so with it the
demo plays the root's part through the API (the way the `mmo job` commands
act as the root) and the root only plans. docs/demo.md says what each shows.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from mmo_kernel.demo import scripts
from mmo_kernel.demo.project import create_project, run_tests, test_command
from mmo_kernel.demo.view import LiveView, fit, poller, summary

PROFILE = "adaptive-engineering"
ROUTE = "local_scripted"
BINDINGS = {"*": ROUTE}
STANDIN_NAME = "mmo-codex-standin"
WALL_SECONDS = 110.0


@dataclass
class DemoOutcome:
    """What the demo did; ``ok`` means the project's tests pass after integration."""

    ok: bool
    mode: str
    session_id: str | None
    folder: Path
    project: Path
    state_dir: Path
    tests_before: str
    tests_after: str


def choose_codex(project_root: Path) -> tuple[Path, str]:
    """The Codex every command finds (``resolve_codex_binary``), else the stand-in: the demo
    runs on any machine. An explicit choice that does not exist is an error, not a fallback."""
    from mmo_kernel.config.settings import CODEX_BIN_ENV, resolve_codex_binary

    try:
        path = resolve_codex_binary(project_root)
    except FileNotFoundError:
        if os.environ.get(CODEX_BIN_ENV):
            raise
        path = Path(sys.executable).parent / STANDIN_NAME
        if not path.is_file():
            raise FileNotFoundError(f"Codex stand-in {path} does not exist; reinstall MMO "
                                    "(pip install -e .)") from None
    return path, "stand-in" if path.name == STANDIN_NAME else "real Codex"


def prepare_env(folder: Path, keep: bool) -> Path:
    """Private state/config/CODEX_HOME under ``folder`` unless kept in the user's state dir."""
    from mmo_kernel.state.paths import state_dir

    if keep or os.environ.get("MMO_STATE_DIR"):
        chosen = state_dir()
    else:
        chosen = folder / "state"
        os.environ["MMO_STATE_DIR"] = str(chosen)
        os.environ["MMO_CONFIG_DIR"] = str(folder / "config")
    # the scripted model needs no login: never read or write the user's Codex home
    os.environ["CODEX_HOME"] = str(folder / "codex-home")
    for path in (chosen, folder / "config", folder / "codex-home"):
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return chosen


def _say(out: TextIO, text: str = "") -> None:
    out.write(fit(text) + "\n")
    out.flush()


def run_real(project: Path, view: LiveView) -> tuple[dict[str, Any], str]:
    """The root runs the whole flow through `mmo_mesh`; returns (session, final text)."""
    from mmo_kernel.api import list_jobs, run_root_exec

    outcome = run_root_exec(PROFILE, project, scripts.root_prompt(), WALL_SECONDS,
                            bindings=BINDINGS, on_progress=poller(view, list_jobs))
    return outcome["session"], outcome.get("result") or ""


def run_standin(project: Path, view: LiveView, out: TextIO) -> tuple[dict[str, Any], str]:
    """The demo acts as the root: writer first, then a review of its patch, accept, integrate."""
    from mmo_kernel import api

    session = api.create_session(PROFILE, cwd=project, bindings=BINDINGS)
    sid, root = session["session_id"], session["root_agent"]
    deadline = time.monotonic() + WALL_SECONDS

    def spawn_and_wait(spec: dict[str, Any]) -> dict[str, Any]:
        [job] = api.spawn_jobs([spec], sid, root)["accepted"]
        while True:
            waited = api.wait_for_jobs([job["job_id"]], sid, 0.5, include_results=False)
            view.update(api.load_session(sid), api.list_jobs(sid))
            if not waited["unfinished"] or time.monotonic() > deadline:
                return api.load_job(job["job_id"])

    writer = spawn_and_wait({"agent": scripts.WRITER, "task_kind": "implement",
                             "mode": "workspace-write", "write_scopes": ["calc/"],
                             "task": scripts.standin_writer_task()})
    patch = writer.get("patch") or {}
    diff_file = Path(writer["events_path"]).parent / patch.get("diff_file", "patch.diff")
    diff = diff_file.read_text(encoding="utf-8") if diff_file.is_file() else ""
    reviewer = spawn_and_wait({"agent": scripts.REVIEWER, "task_kind": "review",
                               "task": scripts.standin_reviewer_task(diff)})
    for job, reason in ((reviewer, "the review of the patch is on record"),
                        (writer, "the patch fixes the off-by-one")):
        api.read_result(job["job_id"], sid, caller_agent=root)
        api.accept_result(job["job_id"], reason, sid, root)
        _say(out, f"accepted {job['job_id']}")
    api.integrate_patch(writer["job_id"], "reviewed and accepted", sid, root)
    _say(out, f"integrated the patch of {writer['job_id']}")
    api.finish_session(sid, 0)
    return api.load_session(sid), "the demo acted as the root (the stand-in has no MCP)"


def run_demo(out: TextIO = sys.stdout, keep: bool = False, tty: bool | None = None,
             project_root: Path | None = None) -> DemoOutcome:
    """Create the project, run the team, integrate the fix and verify it."""
    from mmo_kernel.gateway.process import stop_gateway

    root_dir = project_root or Path(__file__).resolve().parents[2]
    binary, mode = choose_codex(root_dir)
    os.environ["MMO_CODEX_BIN"] = str(binary)
    folder = Path(tempfile.mkdtemp(prefix="mmo-demo-"))
    state = prepare_env(folder, keep)
    project = create_project(folder / "project")
    _say(out, f"MMO demo: team {PROFILE}, all agents on {ROUTE} (offline)")
    _say(out, f"Codex: {mode} ({binary.name})")
    out.write(_wrap(f"project: {project}"))
    passed, before = run_tests(project)
    _say(out, f"tests before: {'pass' if passed else 'FAIL'} ({before})")
    _say(out)
    view = LiveView(out, ROUTE, out.isatty() if tty is None else tty)
    try:
        if mode == "real Codex":
            session, final = run_real(project, view)
        else:
            session, final = run_standin(project, view, out)
        from mmo_kernel.api import list_jobs, load_session

        session = load_session(session["session_id"])
        jobs = list_jobs(session["session_id"])
    finally:
        if not keep and state.is_relative_to(folder):
            stop_gateway()
    ok, after = run_tests(project)
    _report(out, session, jobs, final, ok, after, state, folder)
    return DemoOutcome(ok and session["status"] == "completed", mode, session["session_id"],
                       folder, project, state, before, after)


def _report(out: TextIO, session: dict[str, Any], jobs: list[dict[str, Any]], final: str,
            ok: bool, after: str, state: Path, folder: Path) -> None:
    _say(out)
    for line in summary(session, jobs, ROUTE):
        _say(out, line)
    _say(out)
    _say(out, f"root says: {' '.join(final.split())}")
    _say(out, f"tests after ({test_command()}): {'pass' if ok else 'FAIL'} ({after})")
    _say(out)
    _say(out, "evidence:")
    prefix = f"MMO_STATE_DIR={state} " if state.is_relative_to(folder) else ""
    for line in (f"  {prefix}mmo session show {session['session_id']}",
                 f"  session dir: {state / 'sessions' / session['session_id']}",
                 f"  demo folder: {folder}"):
        out.write(_wrap(line))
    out.flush()


def _wrap(line: str, width: int = 80) -> str:
    """Long paths are broken over lines (never cut): every line stays within ``width``."""
    parts, rest = [], line
    while len(rest) > width:
        parts.append(rest[:width - 1] + "\\")
        rest = "    " + rest[width - 1:]
    return "\n".join([*parts, rest]) + "\n"

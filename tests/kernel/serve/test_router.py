"""The tool router (spec 12 "Tool results", "Projects and sessions", goals, work results,
security) through a real in-process server: HTTP ``/api/tools/call``, the RunnerHub and
real runner links (``LinkClient`` over WebSocket). The runner side is a small in-test
executor (a collaborator double) that records every forwarded call frame, so the tests
see exactly what the router sent and what a host gets back.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
from support.serve import (
    admin_token,
    running_server,
)
from support.waiting import wait_until

from mmo_kernel.project_tools.envelope import ToolFailure, from_exception, success
from mmo_kernel.runner.link_client import LinkClient
from mmo_kernel.serve.router import REDACTED_LINE, redact_secret_lines

ALL_SCOPES = ("read", "write", "execute", "goals", "delegate")
SECRET_PATH = "/home/alice/private/code/src/calc.py"


# ------------------------------------------------------------ runner double --


@dataclass
class FakeRunner:
    """The runner side: projects in memory, one handler per forwarded tool."""

    client_id: str
    owner: str
    projects: dict[str, dict[str, Any]]
    roots: dict[str, str] = field(default_factory=dict)
    frames: list[dict[str, Any]] = field(default_factory=list)
    sessions: dict[str, str] = field(default_factory=dict)  # raw id -> local project
    files: dict[tuple[str, str], bytes] = field(default_factory=dict)
    jobs: dict[str, str] = field(default_factory=dict)  # job id -> status
    status: str = "running"
    counter: Any = field(default_factory=lambda: itertools.count(1))
    lock: threading.Lock = field(default_factory=threading.Lock)
    link: LinkClient | None = None

    def wire_projects(self) -> list[dict[str, Any]]:
        return [{"id": pid, "name": p.get("name", pid), "description": p.get("description", ""),
                 "vcs": p.get("vcs", "git")} for pid, p in self.projects.items()]

    def calls(self, tool: str | None = None) -> list[dict[str, Any]]:
        with self.lock:
            return [f for f in self.frames if tool is None or f["tool"] == tool]

    def handle(self, frame: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            self.frames.append(frame)
        try:
            handler = getattr(self, "do_" + frame["tool"])
            return success(handler(frame["arguments"], frame))
        except ToolFailure as exc:
            return from_exception(exc)

    # -- tools --

    def _project(self, args: dict[str, Any], key: str = "project") -> str:
        if args.get(key) not in self.projects:
            raise ToolFailure("project_not_found", f"{key}: no such project on this runner")
        return args[key]

    def _session(self, args: dict[str, Any], project: str | None) -> str:
        sid = args.get("session_id")
        if sid not in self.sessions or (project is not None and self.sessions[sid] != project):
            raise ToolFailure("session_not_found", "no such session")
        return sid

    def do_resolve_project_path(self, args: dict[str, Any], _f: Any) -> dict[str, Any]:
        for pid, root in self.roots.items():
            if args["path"] == root or args["path"].startswith(root + "/"):
                return {"project": pid}
        raise ToolFailure("project_not_found", "no registered project contains that path")

    def do_work_on_project(self, args: dict[str, Any], _f: Any) -> dict[str, Any]:
        project = self._project(args)
        if args.get("session_id"):
            sid = self._session(args, project)
        else:
            sid = f"{self.client_id}-{next(self.counter):04d}"
            self.sessions[sid] = project
        return {"session_id": sid, "instructions": f"AGENTS.md of {project}",
                "instructions_truncated": False}

    def do_session_status(self, args: dict[str, Any], _f: Any) -> dict[str, Any]:
        self._session(args, self._project(args))
        return {"status": self.status, "workspace": {"branch": "main", "dirty_paths": ["calc.py"],
                                                     "dirty_count": 1, "dirty_truncated": False}}

    def do_read_files(self, args: dict[str, Any], _f: Any) -> dict[str, Any]:
        self._project(args)
        item = args["items"][0]
        return {"items": [{"path": item["path"], "output": {"text": "a\nb\n", "has_more": True,
                                                            "next_cursor": 2}}],
                "suggested_call": {"tool": "read_files", "arguments": {
                    "project": args["project"], "session_id": args.get("session_id"),
                    "items": [{"path": item["path"], "cursor": 2, "limit": 2,
                               "expected_read_revision": "sha256:00"}]},
                    "follow_up_kind": "mechanically_followable", "reason": "read the rest"}}

    def do_edit_project_files(self, args: dict[str, Any], _f: Any) -> dict[str, Any]:
        self._project(args)
        return {"changed": True, "state_changed": True, "items": []}

    def do_run_script(self, args: dict[str, Any], frame: dict[str, Any]) -> dict[str, Any]:
        self._project(args)
        job_id = f"mmo_pjob_{self.client_id}{next(self.counter):04d}"
        self.jobs[job_id] = "running"
        return {"execution_state": "pending", "job_id": job_id, "interactive": False,
                "status": "running",
                "suggested_call": {"tool": "wait_for_job_readiness",
                                   "arguments": {"job_ids": [job_id], "mode": "all",
                                                 "wait_secs": 20},
                                   "follow_up_kind": "mechanically_followable",
                                   "reason": "wait for it"}}

    do_run_process = do_run_script

    def _job_item(self, job_id: str) -> dict[str, Any]:
        if job_id not in self.jobs:
            raise ToolFailure("job_not_found", f"job not found: {job_id}")
        status = self.jobs[job_id]
        return {"job_id": job_id, "status": status, "terminal": status != "running",
                "exit_code": 0 if status == "completed" else None}

    def do_observe_jobs(self, args: dict[str, Any], _f: Any) -> dict[str, Any]:
        return {"items": [self._job_item(i["job_id"]) for i in args["items"]]}

    def do_wait_for_job_readiness(self, args: dict[str, Any], _f: Any) -> dict[str, Any]:
        items = [self._job_item(j) for j in args["job_ids"]]
        ready = [i["job_id"] for i in items if i["terminal"]]
        return {"ready_job_ids": ready,
                "pending_job_ids": [j for j in args["job_ids"] if j not in ready],
                "timed_out": not ready}

    def do_write_job_input(self, args: dict[str, Any], _f: Any) -> dict[str, Any]:
        self._job_item(args["job_id"])
        return {"job_id": args["job_id"], "input_id": args["input_id"], "state": "written",
                "stdin_closed": bool(args.get("close")),
                "bytes_accepted": len(args.get("data") or "")}

    def do_finish_coding_task(self, args: dict[str, Any], _f: Any) -> dict[str, Any]:
        self._session(args, self._project(args))
        output: dict[str, Any] = {"session_id": args["session_id"], "task_outcome": {
            "status": "pass", "blocking": False, "blocking_reasons": [],
            "validation": "not_run"}}
        if args.get("outputs") is not None:
            items = [{"path": p, "status": "verified", "sha256": "0" * 64, "file_bytes": 1}
                     for p in args["outputs"]]
            output["task_outputs"] = {"requested_count": len(items),
                                      "verified_count": len(items), "missing_count": 0,
                                      "unavailable_count": 0, "items": items}
        if not args.get("summary_only"):
            output["changes"] = " M calc.py"
        return output

    def do_transfer_project_artifact(self, args: dict[str, Any], _f: Any) -> dict[str, Any]:
        data = self.files[(self._project(args, "source_project"), args["source_path"])]
        dest = (self._project(args, "destination_project"), args["destination_path"])
        self.files[dest] = data
        return {"file_bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(),
                "state_changed": True}

    def do_artifact_read(self, args: dict[str, Any], _f: Any) -> dict[str, Any]:
        key = (self._project(args), args["path"])
        if key not in self.files:
            raise ToolFailure("file_not_found", f"file not found: {args['path']}")
        data = self.files[key]
        return {"data_b64": base64.b64encode(data).decode(), "file_bytes": len(data),
                "sha256": hashlib.sha256(data).hexdigest()}

    def do_artifact_write(self, args: dict[str, Any], _f: Any) -> dict[str, Any]:
        key = (self._project(args), args["path"])
        if key in self.files and not args.get("overwrite"):
            raise ToolFailure("destination_exists", f"destination exists: {args['path']}")
        data = base64.b64decode(args["data_b64"])
        self.files[key] = data
        return {"file_bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(),
                "state_changed": True}

    def do_team_status(self, args: dict[str, Any], _f: Any) -> dict[str, Any]:
        self._session(args, None)
        return {"jobs": [{"job_id": j, "session_id": args["session_id"]}
                         for j in args["job_ids"]]}


# ------------------------------------------------------------------- world --


@dataclass
class World:
    base_url: str
    app: Any
    admin: str
    pats: dict[str, str]
    runners: dict[str, FakeRunner]
    stack: ExitStack
    http: httpx.Client = field(default_factory=lambda: httpx.Client(timeout=120))

    def call(self, who: str, tool: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        token = self.admin if who == "admin" else self.pats[who]
        reply = self.http.post(self.base_url + "/api/tools/call",
                               headers={"Authorization": f"Bearer {token}"},
                               json={"tool": tool, "params": params or {}})
        assert reply.status_code == 200, reply.text
        return reply.json()

    def ok(self, who: str, tool: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        envelope = self.call(who, tool, params)
        assert envelope["success"] is True, envelope
        return envelope["output"]

    def fail(self, who: str, tool: str, params: dict[str, Any] | None,
             kind: str) -> dict[str, Any]:
        envelope = self.call(who, tool, params)
        assert envelope["success"] is False, envelope
        assert envelope["output"]["error_kind"] == kind, envelope
        assert envelope["output"]["state_changed"] is False
        return envelope

    def dispatch(self, who: str, tool: str, arguments: dict[str, Any],
                 mmo: dict[str, Any] | None = None) -> dict[str, Any]:
        params: dict[str, Any] = {"tool": tool, "arguments": arguments}
        if mmo is not None:
            params["_mmo"] = mmo
        return self.call(who, "call_project_tool", params)

    def admin_api(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        reply = self.http.post(self.base_url + path, json=body,
                               headers={"Authorization": f"Bearer {self.admin}"})
        assert reply.status_code == 200, reply.text
        return reply.json()

    def pat(self, user: str, scopes: tuple[str, ...]) -> str:
        self.admin_api("/api/users/create", {"username": user})
        return self.admin_api("/api/tokens/create", {"username": user, "name": "t",
                                                     "scopes": list(scopes)})["token"]

    def connect(self, runner: FakeRunner) -> None:
        token = self.admin_api("/api/runner-tokens/create", {
            "username": runner.owner, "client_id": runner.client_id, "name": "t"})["token"]
        link = LinkClient(self.base_url, token, runner.client_id, runner.owner,
                          handle_call=runner.handle, projects=runner.wire_projects,
                          version="test")
        runner.link = link
        link.start()
        self.stack.callback(link.stop)
        self.runners[runner.client_id] = runner
        wait_until(lambda: self.app.state.hub.online(runner.client_id), timeout=60,
                   what=f"runner {runner.client_id} online")

    def start(self, who: str, project: str, instruction: str = "fix calc") -> dict[str, Any]:
        return self.ok(who, "work_on_project", {"project": project, "instruction": instruction})


def alice_runner() -> FakeRunner:
    return FakeRunner("laptop", "alice",
                      {"code": {"name": "Code", "description": "calc"}, "data": {"vcs": "none"}},
                      roots={"code": "/home/alice/private/code", "data": "/home/alice/data"})


def bob_runner() -> FakeRunner:
    return FakeRunner("desk", "bob", {"code": {"name": "Bob's code"}})


@contextmanager
def world_at(state: Path) -> Iterator[World]:
    with ExitStack() as stack:
        base_url, app = stack.enter_context(running_server(state))
        admin = admin_token(state)
        world = World(base_url, app, admin, {}, {}, stack)
        stack.callback(world.http.close)
        world.pats = {"alice": world.pat("alice", ALL_SCOPES), "bob": world.pat("bob", ALL_SCOPES)}
        world.connect(alice_runner())
        world.connect(bob_runner())
        yield world


@pytest.fixture
def world(mmo_env: Any, tmp_path: Path) -> Iterator[World]:
    with world_at(tmp_path / "serve") as built:
        yield built


ALICE_CODE = "runner:laptop:code"
ALICE_DATA = "runner:laptop:data"
BOB_CODE = "runner:desk:code"


# --------------------------------------------------------------- projects --


def test_list_projects_shows_only_the_users_runners_with_stable_refs(world: World) -> None:
    listed = world.ok("alice", "list_projects")
    assert listed["total_count"] == 2
    assert listed["projects"] == [
        {"id": ALICE_CODE, "project_ref": listed["projects"][0]["project_ref"], "name": "Code",
         "description": "calc", "client_id": "laptop", "online": True, "vcs": "git"},
        {"id": ALICE_DATA, "project_ref": listed["projects"][1]["project_ref"], "name": "data",
         "description": "", "client_id": "laptop", "online": True, "vcs": "none"}]
    refs = {p["id"]: p["project_ref"] for p in listed["projects"]}
    assert sorted(refs.values()) == ["~p1", "~p2"]
    assert world.ok("alice", "list_projects") == listed  # stable
    bob = world.ok("bob", "list_projects")
    assert [p["id"] for p in bob["projects"]] == [BOB_CODE]
    assert bob["projects"][0]["project_ref"] == "~p1"  # refs are per user
    admin = world.ok("admin", "list_projects")
    assert [p["id"] for p in admin["projects"]] == [BOB_CODE, ALICE_CODE, ALICE_DATA]


def test_an_offline_runner_lists_offline_and_its_calls_fail_unavailable(world: World) -> None:
    session = world.start("alice", ALICE_CODE)
    world.runners["laptop"].link.stop()
    wait_until(lambda: not world.app.state.hub.online("laptop"), what="laptop offline")
    listed = world.ok("alice", "list_projects")
    assert {p["online"] for p in listed["projects"]} == {False}
    assert world.ok("admin", "list_projects")["total_count"] == 1  # admin: online only
    world.fail("alice", "read_files", {"project": ALICE_CODE, "items": [{"path": "a"}]},
               "runner_unavailable")
    # The handoff still answers: an offline runner's session is suspended.
    handoff = world.dispatch("alice", "read_session_handoff", {
        "project": ALICE_CODE, "session_id": session["session_id"],
        "include_workspace": True})["output"]
    assert handoff["status"] == "suspended" and handoff["workspace"] is None


def test_refs_and_sessions_survive_a_server_restart(mmo_env: Any, tmp_path: Path) -> None:
    state = tmp_path / "serve"
    with world_at(state) as first:
        refs = {p["id"]: p["project_ref"] for p in first.ok("alice", "list_projects")["projects"]}
        session = first.start("alice", ALICE_CODE)
        goal = first.dispatch("alice", "prepare_goal_workflow", {
            "session_id": session["session_ref"], "title": "t", "objective": "o",
            "completion_conditions": [], "steps": [{"id": "a", "title": "A"}],
            "idempotency_key": "k"})["output"]["goal"]
        first.ok("alice", "finish_coding_task", {"project": ALICE_CODE,
                                                 "session_id": session["session_id"],
                                                 "outputs": ["out.txt"]})
        job_id = first.ok("alice", "run_script", {"project": ALICE_CODE,
                                                  "session_id": session["session_id"],
                                                  "language": "python", "script": "x"})["job_id"]
        pats, sessions = first.pats, first.runners["laptop"].sessions
    with ExitStack() as stack:
        base_url, app = stack.enter_context(running_server(state))
        again = World(base_url, app, admin_token(state), pats, {}, stack)
        stack.callback(again.http.close)
        runner = alice_runner()
        runner.counter = itertools.count(100)  # a real runner never reuses a session id
        runner.sessions.update(sessions)
        runner.jobs[job_id] = "completed"
        again.connect(runner)
        assert again.ok("alice", "observe_jobs", {"items": [{"job_id": job_id}]})["items"][0][
            "status"] == "completed"
        assert {p["id"]: p["project_ref"]
                for p in again.ok("alice", "list_projects")["projects"]} == refs
        resumed = again.ok("alice", "work_on_project", {"project": refs[ALICE_CODE],
                                                        "session_id": session["session_ref"],
                                                        "instruction": "go on"})
        assert resumed["session_id"] == session["session_id"]
        assert resumed["session_ref"] == session["session_ref"]
        assert again.dispatch("alice", "get_goal", {"goal_id": goal["summary"]["goal_id"]})[
            "output"]["goal"] == goal
        state_now = again.dispatch("alice", "get_work_result_state", {
            "project": ALICE_CODE, "session_id": session["session_id"]})["output"]
        assert state_now["work_result"]["task_outputs"]["requested_count"] == 1
        fresh = again.start("alice", ALICE_CODE)
        assert fresh["session_ref"] != session["session_ref"]


# -------------------------------------------------------------- sessions --


def test_work_on_project_starts_new_or_resumes_exactly(world: World) -> None:
    first = world.start("alice", ALICE_CODE)
    assert first["continuation"] == "started"
    assert first["project_id"] == ALICE_CODE and first["project_ref"].startswith("~p")
    assert first["session_id"].startswith("mmo_sess_laptop-")
    assert first["session_ref"].startswith("~s")
    assert first["instructions"] == "AGENTS.md of code"
    second = world.start("alice", first["project_ref"])
    assert second["continuation"] == "started"  # never resumed by recency
    assert second["session_id"] != first["session_id"]
    for selector in (first["session_id"], first["session_ref"]):
        resumed = world.ok("alice", "work_on_project", {"project": ALICE_CODE,
                                                        "session_id": selector,
                                                        "instruction": "continue"})
        assert resumed["continuation"] == "resumed_explicitly"
        assert (resumed["session_id"], resumed["session_ref"]) == (first["session_id"],
                                                                   first["session_ref"])
    frame = world.runners["laptop"].calls("work_on_project")[-1]
    assert frame["arguments"] == {"project": "code", "session_id": first["session_id"][9:],
                                  "instruction": "continue"}
    assert frame["user"] == "alice" and frame["session"] == first["session_id"][9:]
    # A session of another project of the same user is not found there.
    world.fail("alice", "work_on_project", {"project": ALICE_DATA,
                                            "session_id": first["session_id"],
                                            "instruction": "x"}, "session_not_found")


def test_a_raw_path_needs_client_id_and_is_never_echoed(world: World) -> None:
    before = len(world.runners["laptop"].frames)
    envelope = world.fail("alice", "work_on_project", {"path": SECRET_PATH,
                                                       "instruction": "fix"},
                          "invalid_project_selector")
    assert envelope["error"] == ("missing client_id required with path; call list_projects to "
                                 "find project ids")
    assert envelope["output"]["suggested_call"]["tool"] == "list_projects"
    assert envelope["output"]["suggested_call"]["arguments"] == {}
    assert envelope["output"]["suggested_call"]["follow_up_kind"] == "mechanically_followable"
    assert "private" not in json.dumps(envelope)
    assert len(world.runners["laptop"].frames) == before  # nothing reached the runner
    # Following the suggestion as given works.
    assert world.ok("alice", "list_projects")["total_count"] == 2
    # With client_id the path selects the project holding it; the path is not forwarded on.
    started = world.ok("alice", "work_on_project", {"client_id": "laptop", "path": SECRET_PATH,
                                                    "instruction": "fix"})
    assert started["project_id"] == ALICE_CODE and "private" not in json.dumps(started)
    forwarded = world.runners["laptop"].calls("work_on_project")[-1]["arguments"]
    assert forwarded == {"project": "code", "session_id": None, "instruction": "fix"}
    outside = world.fail("alice", "work_on_project", {"client_id": "laptop",
                                                      "path": "/etc/private-passwd",
                                                      "instruction": "x"}, "project_not_found")
    assert "private" not in json.dumps(outside)
    # Someone else's runner is just as unknown, and the path is not sent there.
    bob_frames = len(world.runners["desk"].frames)
    foreign = world.fail("alice", "work_on_project", {"client_id": "desk", "path": SECRET_PATH,
                                                      "instruction": "x"}, "project_not_found")
    assert "private" not in json.dumps(foreign)
    assert len(world.runners["desk"].frames) == bob_frames
    # A path given as the project is not echoed either.
    as_project = world.fail("alice", "read_files", {"project": SECRET_PATH,
                                                    "items": [{"path": "a"}]},
                            "project_not_found")
    assert "private" not in json.dumps(as_project)
    # Nor is it kept in any server record.
    state_dir = world.app.state.state_dir
    for path in state_dir.rglob("*"):
        if path.is_file():
            assert b"private" not in path.read_bytes(), path


def test_forwarded_calls_use_local_ids_and_replies_public_ones(world: World) -> None:
    session = world.start("alice", ALICE_CODE)
    out = world.ok("alice", "read_files", {"project": session["project_ref"],
                                           "session_id": session["session_ref"],
                                           "items": [{"path": "calc.py", "limit": 2}],
                                           "_mmo": {"record": session["session_id"]}})
    frame = world.runners["laptop"].calls("read_files")[-1]
    raw = session["session_id"].removeprefix("mmo_sess_")
    assert frame["arguments"]["project"] == "code" and frame["arguments"]["session_id"] == raw
    assert "_mmo" not in frame["arguments"]
    assert frame["arguments"]["items"][0] == {"path": "calc.py", "limit": 2, "cursor": 0,
                                              "expected_read_revision": None}
    follow = out["suggested_call"]
    assert follow["arguments"]["project"] == ALICE_CODE
    assert follow["arguments"]["session_id"] == session["session_id"]
    # Following the suggestion exactly as given is accepted.
    assert world.call("alice", follow["tool"], follow["arguments"])["success"] is True
    # Team tools reach the session's runner with the raw id and come back public.
    team = world.dispatch("alice", "team_status", {"session_id": session["session_ref"],
                                                   "job_ids": ["j1"]})["output"]
    assert team["jobs"] == [{"job_id": "j1", "session_id": session["session_id"]}]


# ----------------------------------------------------------------- scopes --


SCOPED_CALLS = [
    ("read", "list_projects", {}),
    ("read", "read_files", {"project": ALICE_CODE, "items": [{"path": "a"}]}),
    ("read", "get_goal", {"goal_id": "mmo_goal_x"}),
    ("write", "edit_project_files", {"project": ALICE_CODE, "changes": [
        {"kind": "create", "path": "n.txt", "content": "x"}]}),
    ("write", "finish_coding_task", {"project": ALICE_CODE, "session_id": "~s1"}),
    ("write", "transfer_project_artifact", {"source_project": ALICE_CODE, "source_path": "a",
                                            "destination_project": ALICE_DATA,
                                            "destination_path": "b"}),
    ("execute", "run_script", {"project": ALICE_CODE, "session_id": "~s1",
                               "language": "python", "script": "print(1)"}),
    ("execute", "write_job_input", {"project": ALICE_CODE, "job_id": "j", "input_id": "i"}),
    ("goals", "prepare_goal_workflow", {"session_id": "~s1", "title": "t", "objective": "o",
                                        "completion_conditions": [], "steps": [],
                                        "idempotency_key": "k"}),
    ("goals", "update_goal", {"goal_id": "g", "expected_revision": 1, "lifecycle": "abandoned",
                              "idempotency_key": "k"}),
    ("delegate", "team_spawn", {"session_id": "~s1", "agents": [{"agent": "a", "task": "t"}],
                                "idempotency_key": "k"}),
    ("delegate", "team_cancel", {"session_id": "~s1", "job_id": "j", "reason": "r"}),
]


def test_every_tool_needs_its_scope(world: World) -> None:
    """The scope table of spec 12, directly and through the dispatcher."""
    for scope in ALL_SCOPES:
        world.pats[f"no-{scope}"] = world.pat(f"no-{scope}",
                                              tuple(s for s in ALL_SCOPES if s != scope))
        world.pats[f"only-{scope}"] = world.pat(f"only-{scope}", (scope,))
    frames = len(world.runners["laptop"].frames)
    for scope, tool, arguments in SCOPED_CALLS:
        for envelope in (world.call(f"no-{scope}", tool, arguments),
                         world.dispatch(f"no-{scope}", tool, arguments)):
            assert envelope == {"success": False, "error": f"missing required scope: {scope}",
                                "output": {"error_kind": "insufficient_scope",
                                           "state_changed": False}}, (tool, envelope)
        # With the scope the same call gets past the check (to its own outcome).
        reply = world.call(f"only-{scope}", tool, arguments)
        assert reply["output"].get("error_kind") != "insufficient_scope", (tool, reply)
    assert len(world.runners["laptop"].frames) == frames


def test_the_admin_token_reaches_list_projects_only(world: World) -> None:
    assert world.ok("admin", "list_projects")["total_count"] == 3
    frames = len(world.runners["laptop"].frames)
    for tool, arguments in (("read_files", {"project": ALICE_CODE, "items": [{"path": "a"}]}),
                            ("edit_project_files", {"project": ALICE_CODE, "changes": [
                                {"kind": "create", "path": "n", "content": "x"}]})):
        envelope = world.fail("admin", tool, arguments, "insufficient_scope")
        assert envelope["error"].startswith("missing required scope: ")
    assert len(world.runners["laptop"].frames) == frames


def test_unknown_and_internal_tools_are_unknown(world: World) -> None:
    for tool in ("no_such_tool", "resolve_project_path", "artifact_read", "session_status"):
        envelope = world.dispatch("alice", tool, {"path": "/home/alice/private/code"})
        assert envelope["output"]["error_kind"] == "unknown_tool", envelope
        assert world.call("alice", tool, {})["output"]["error_kind"] == "unknown_tool"
    assert not world.runners["laptop"].calls("resolve_project_path")


def test_bad_arguments_are_a_failed_result(world: World) -> None:
    envelope = world.fail("alice", "read_files", {"project": ALICE_CODE, "items": [],
                                                  "surprise": 1}, "invalid_arguments")
    assert "read_files" in envelope["error"]
    envelope = world.fail("alice", "list_projects", {"_mmo": {"record": 5}},
                          "invalid_arguments")
    assert "_mmo" in envelope["error"]
    twice = world.call("alice", "call_project_tool", {"tool": "list_projects",
                                                      "arguments": {"_mmo": {"record": "~s1"}},
                                                      "_mmo": {"record": "~s1"}})
    assert twice["output"]["error_kind"] == "invalid_arguments"
    nested = world.dispatch("alice", "call_project_tool", {"tool": "list_projects"})
    assert nested["output"]["error_kind"] == "invalid_arguments"


# -------------------------------------------------------------- ownership --


def test_another_users_things_are_not_found(world: World) -> None:
    session = world.start("alice", ALICE_CODE)
    job = world.ok("alice", "run_script", {"project": ALICE_CODE,
                                           "session_id": session["session_id"],
                                           "language": "python", "script": "print(1)"})
    goal = world.dispatch("alice", "prepare_goal_workflow", {
        "session_id": session["session_id"], "title": "t", "objective": "o",
        "completion_conditions": [], "steps": [{"id": "a", "title": "A"}],
        "idempotency_key": "k"})["output"]["goal"]
    gid = goal["summary"]["goal_id"]
    alice_frames = len(world.runners["laptop"].frames)
    sid = session["session_id"]

    unknown_session = world.fail("bob", "read_files", {
        "project": BOB_CODE, "session_id": "mmo_sess_nobody", "items": [{"path": "a"}]},
        "session_not_found")
    foreign_session = world.fail("bob", "read_files", {
        "project": BOB_CODE, "session_id": sid, "items": [{"path": "a"}]}, "session_not_found")
    # Same wording for someone else's session as for one that does not exist.
    assert foreign_session["error"].replace(sid, "X") == \
        unknown_session["error"].replace("mmo_sess_nobody", "X")
    world.fail("bob", "read_files", {"project": ALICE_CODE, "items": [{"path": "a"}]},
               "project_not_found")
    world.fail("bob", "work_on_project", {"project": ALICE_CODE, "instruction": "x"},
               "project_not_found")
    world.fail("bob", "finish_coding_task", {"project": ALICE_CODE, "session_id": sid},
               "project_not_found")
    assert world.dispatch("bob", "read_session_handoff", {
        "project": BOB_CODE, "session_id": sid, "include_workspace": False})["output"][
        "error_kind"] == "session_not_found"
    assert world.dispatch("bob", "team_status", {"session_id": sid, "job_ids": ["j"]})[
        "output"]["error_kind"] == "session_not_found"
    for tool, args in (("get_goal", {"goal_id": gid}), ("present_goal_plan", {"goal_id": gid}),
                       ("checkpoint_goal", {"goal_id": gid, "expected_revision": 1,
                                            "summary": "s", "idempotency_key": "b"})):
        envelope = world.dispatch("bob", tool, args)
        assert envelope["output"]["error_kind"] == "goal_not_found", envelope
    world.fail("bob", "observe_jobs", {"items": [{"job_id": job["job_id"]}]}, "job_not_found")
    world.fail("bob", "wait_for_job_readiness", {"job_ids": [job["job_id"]], "mode": "all",
                                                 "wait_secs": 0}, "job_not_found")
    assert world.dispatch("bob", "write_job_input", {
        "project": BOB_CODE, "job_id": job["job_id"], "input_id": "i", "data": "x"})[
        "output"]["error_kind"] == "job_not_found"
    # Bob's ~s1 / ~p1 are his own book: they never name Alice's things.
    world.fail("bob", "read_files", {"project": "~p9", "items": [{"path": "a"}]},
               "project_not_found")
    world.fail("bob", "prepare_goal_workflow", {
        "session_id": session["session_ref"], "title": "t", "objective": "o",
        "completion_conditions": [], "steps": [{"id": "a", "title": "A"}],
        "idempotency_key": "k"}, "session_not_found")
    assert len(world.runners["laptop"].frames) == alice_frames  # nothing reached Alice's runner
    # Alice still has all of it.
    assert world.dispatch("alice", "get_goal", {"goal_id": gid})["output"]["goal"] == goal


# ------------------------------------------------------------------- jobs --


def test_jobs_are_routed_by_id_to_their_runner(world: World) -> None:
    session = world.start("alice", ALICE_CODE)
    started = world.ok("alice", "run_script", {"project": ALICE_CODE,
                                               "session_id": session["session_id"],
                                               "language": "python", "script": "x"})
    job_id = started["job_id"]
    assert world.ok("alice", "observe_jobs", {"items": [{"job_id": job_id}]})["items"][0][
        "status"] == "running"
    world.runners["laptop"].jobs[job_id] = "completed"
    follow = started["suggested_call"]
    assert world.ok("alice", follow["tool"], follow["arguments"])["ready_job_ids"] == [job_id]
    receipt = world.dispatch("alice", "write_job_input", {"project": ALICE_CODE,
                                                          "job_id": job_id, "input_id": "i1",
                                                          "data": "hi"})["output"]
    assert receipt["bytes_accepted"] == 2
    assert world.runners["laptop"].calls("write_job_input")[-1]["arguments"]["project"] == "code"
    world.fail("alice", "observe_jobs", {"items": [{"job_id": "mmo_pjob_nope"}]},
               "job_not_found")
    # A job the server learned only from a job_event frame is its runner owner's.
    runner = world.runners["laptop"]
    runner.jobs["mmo_pjob_announced"] = "running"
    assert runner.link is not None
    runner.link.send_job_event({"job_id": "mmo_pjob_announced", "status": "running"})
    wait_until(lambda: world.call("alice", "observe_jobs", {
        "items": [{"job_id": "mmo_pjob_announced"}]})["success"], what="job_event indexed")
    world.fail("bob", "observe_jobs", {"items": [{"job_id": "mmo_pjob_announced"}]},
               "job_not_found")


def test_jobs_on_two_runners_are_observed_and_joined_together(world: World) -> None:
    world.connect(FakeRunner("server2", "alice", {"web": {}}))
    one = world.start("alice", ALICE_CODE)
    two = world.start("alice", "runner:server2:web")
    j1 = world.ok("alice", "run_script", {"project": ALICE_CODE, "session_id": one["session_id"],
                                          "language": "python", "script": "x"})["job_id"]
    j2 = world.ok("alice", "run_script", {"project": "runner:server2:web",
                                          "session_id": two["session_id"],
                                          "language": "python", "script": "x"})["job_id"]
    observed = world.ok("alice", "observe_jobs", {"items": [{"job_id": j2}, {"job_id": j1}]})
    assert [i["job_id"] for i in observed["items"]] == [j2, j1]
    world.runners["server2"].jobs[j2] = "completed"
    joined = world.ok("alice", "wait_for_job_readiness", {"job_ids": [j1, j2], "mode": "any",
                                                          "wait_secs": 0})
    assert joined["ready_job_ids"] == [j2] and joined["pending_job_ids"] == [j1]
    every = world.ok("alice", "wait_for_job_readiness", {"job_ids": [j1, j2], "mode": "all",
                                                         "wait_secs": 0})
    assert every == {"ready_job_ids": [j2], "pending_job_ids": [j1], "timed_out": True}


# ------------------------------------------------------ transfers, finish --


def test_transfers_on_one_runner_and_across_runners(world: World) -> None:
    world.connect(FakeRunner("server2", "alice", {"web": {}}))
    laptop, server2 = world.runners["laptop"], world.runners["server2"]
    payload = bytes(range(256)) * 4
    laptop.files[("code", "img.png")] = payload
    same = world.dispatch("alice", "transfer_project_artifact", {
        "source_project": ALICE_CODE, "source_path": "img.png",
        "destination_project": ALICE_DATA, "destination_path": "x.png"})
    assert same["success"] is True
    frame = laptop.calls("transfer_project_artifact")[-1]["arguments"]
    assert (frame["source_project"], frame["destination_project"]) == ("code", "data")
    across = world.dispatch("alice", "transfer_project_artifact", {
        "source_project": ALICE_CODE, "source_path": "img.png",
        "destination_project": "runner:server2:web", "destination_path": "in/x.png"})["output"]
    assert across == {"file_bytes": 1024, "sha256": hashlib.sha256(payload).hexdigest(),
                      "state_changed": True}
    assert server2.files[("web", "in/x.png")] == payload
    refused = world.dispatch("alice", "transfer_project_artifact", {
        "source_project": ALICE_CODE, "source_path": "img.png",
        "destination_project": "runner:server2:web", "destination_path": "in/x.png"})
    assert refused["output"]["error_kind"] == "destination_exists"
    world.fail("bob", "transfer_project_artifact", {
        "source_project": ALICE_CODE, "source_path": "img.png",
        "destination_project": BOB_CODE, "destination_path": "stolen.png"}, "project_not_found")


def test_finish_records_the_business_sessions_work_result_only(world: World) -> None:
    business = world.start("alice", ALICE_CODE)
    recorder = world.start("alice", ALICE_CODE)
    open_state = world.dispatch("alice", "get_work_result_state", {
        "project": ALICE_CODE, "session_id": business["session_ref"]})["output"]
    assert open_state == {"work_result": {
        "session_id": business["session_id"], "status": "open", "summary": None,
        "task_outcome": None, "task_outputs": None, "finished_at_unix_ms": None}}
    # The recorder finishes with outputs: its own receipt.
    own = world.ok("alice", "finish_coding_task", {"project": ALICE_CODE,
                                                   "session_id": recorder["session_id"],
                                                   "outputs": ["big.bin"]})
    finished = world.ok("alice", "finish_coding_task", {
        "project": ALICE_CODE, "session_id": business["session_id"], "summary": "done",
        "outputs": ["out.csv", "report.md"], "_mmo": {"record": recorder["session_ref"]}})
    assert finished["session_id"] == business["session_id"]
    state = world.dispatch("alice", "get_work_result_state", {
        "project": ALICE_CODE, "session_id": business["session_id"]})["output"]["work_result"]
    assert state["status"] == "finished" and state["summary"] == "done"
    assert state["task_outputs"] == finished["task_outputs"]
    assert state["task_outcome"] == finished["task_outcome"]
    assert isinstance(state["finished_at_unix_ms"], int)
    recorder_state = world.dispatch("alice", "get_work_result_state", {
        "project": ALICE_CODE, "session_id": recorder["session_id"]})["output"]["work_result"]
    assert recorder_state["task_outputs"] == own["task_outputs"]
    # The call was recorded in the recorder's activity log, naming the business session.
    handoff = world.dispatch("alice", "read_session_handoff", {
        "project": ALICE_CODE, "session_id": recorder["session_id"],
        "include_workspace": False})["output"]
    assert [(a["tool"], a["success"], a["business_session"])
            for a in handoff["recent_activity"]] == [
        ("finish_coding_task", True, business["session_id"])]
    # A finish without outputs clears only its own session's receipt.
    world.ok("alice", "finish_coding_task", {"project": ALICE_CODE,
                                             "session_id": business["session_id"]})
    cleared = world.dispatch("alice", "get_work_result_state", {
        "project": ALICE_CODE, "session_id": business["session_id"]})["output"]["work_result"]
    assert cleared["task_outputs"] is None and cleared["status"] == "finished"
    kept = world.dispatch("alice", "get_work_result_state", {
        "project": ALICE_CODE, "session_id": recorder["session_id"]})["output"]["work_result"]
    assert kept["task_outputs"] == own["task_outputs"]


def test_mmo_record_logs_on_the_recorded_session_only(world: World) -> None:
    business = world.start("alice", ALICE_CODE)
    recorder = world.start("alice", ALICE_CODE)
    world.dispatch("alice", "read_files", {"project": ALICE_CODE,
                                           "session_id": business["session_id"],
                                           "items": [{"path": "a"}]},
                   mmo={"record": recorder["session_ref"]})
    world.call("alice", "read_files", {"project": ALICE_DATA, "items": [{"path": "a"}],
                                       "_mmo": {"record": recorder["session_id"]}})
    world.fail("alice", "observe_jobs", {"items": [{"job_id": "mmo_pjob_x"}],
                                         "_mmo": {"record": recorder["session_id"]}},
               "job_not_found")
    log = world.dispatch("alice", "read_session_handoff", {
        "project": ALICE_CODE, "session_id": recorder["session_id"],
        "include_workspace": False})["output"]["recent_activity"]
    assert [(a["tool"], a["success"], a["business_session"]) for a in log] == [
        ("read_files", True, business["session_id"]), ("read_files", True, None),
        ("observe_jobs", False, None)]
    assert log[2]["error_kind"] == "job_not_found"
    assert all(isinstance(a["time_unix_ms"], int) for a in log)
    # The business session acted on got nothing in its own log.
    assert world.dispatch("alice", "read_session_handoff", {
        "project": ALICE_CODE, "session_id": business["session_id"],
        "include_workspace": False})["output"]["recent_activity"] == []
    # The read acted on the business session, never the recorder.
    assert world.runners["laptop"].calls("read_files")[0]["arguments"]["session_id"] == \
        business["session_id"].removeprefix("mmo_sess_")
    # Recording into someone else's (or no) session fails before anything runs.
    frames = len(world.runners["laptop"].frames)
    bob_session = world.start("bob", BOB_CODE)
    world.fail("alice", "read_files", {"project": ALICE_CODE, "items": [{"path": "a"}],
                                       "_mmo": {"record": bob_session["session_id"]}},
               "session_not_found")
    assert len(world.runners["laptop"].frames) == frames


def test_handoff_composes_status_brief_activity_goal_and_workspace(world: World) -> None:
    instruction = "Fix calc.py\npassword = hunter2hunter2\nkeep the API stable"
    session = world.start("alice", ALICE_CODE, instruction)
    prepared = world.dispatch("alice", "prepare_goal_workflow", {
        "session_id": session["session_id"], "title": "Repair", "objective": "calc adds",
        "completion_conditions": ["tests pass"],
        "steps": [{"id": "fix", "title": "Fix"}, {"id": "test", "title": "Test"}],
        "idempotency_key": "p1"}, mmo={"record": session["session_id"]})["output"]["goal"]
    for _ in range(22):
        world.call("alice", "list_projects", {"_mmo": {"record": session["session_ref"]}})
    handoff = world.dispatch("alice", "read_session_handoff", {
        "project": ALICE_CODE, "session_id": session["session_ref"],
        "include_workspace": True})["output"]
    assert handoff["session_id"] == session["session_id"]
    assert handoff["session_ref"] == session["session_ref"]
    assert handoff["project_ref"] == session["project_ref"]
    assert handoff["status"] == "running"
    assert handoff["instruction"] == f"Fix calc.py\n{REDACTED_LINE}\nkeep the API stable"
    assert handoff["workspace"]["branch"] == "main"
    assert len(handoff["recent_activity"]) == 20
    assert {a["tool"] for a in handoff["recent_activity"]} == {"list_projects"}
    gid = prepared["summary"]["goal_id"]
    assert handoff["goal_context"] == {"goal": {
        "goal_id": gid, "title": "Repair", "revision": 1, "lifecycle": "active",
        "plan": {"current_step_id": None, "steps": {
            "items": [{"id": "fix", "title": "Fix", "status": "pending"},
                      {"id": "test", "title": "Test", "status": "pending"}],
            "total_count": 2, "returned_count": 2}}}}
    brief = handoff["handoff_brief"]
    assert "hunter2" not in brief and REDACTED_LINE in brief
    assert "keep the API stable" in brief and "Repair" in brief
    assert session["session_id"] in brief
    assert len(brief.encode()) <= 8192
    without = world.dispatch("alice", "read_session_handoff", {
        "project": ALICE_CODE, "session_id": session["session_id"],
        "include_workspace": False})["output"]
    assert "workspace" not in without
    fresh = world.start("alice", ALICE_CODE, "x" * 20000)
    big = world.dispatch("alice", "read_session_handoff", {
        "project": ALICE_CODE, "session_id": fresh["session_id"],
        "include_workspace": False})["output"]
    assert big["goal_context"] is None
    assert len(big["handoff_brief"].encode()) <= 8192
    assert big["handoff_brief"].endswith("[... handoff brief truncated ...]")


def test_goal_tools_take_session_refs_and_replay_across_id_forms(world: World) -> None:
    session = world.start("alice", ALICE_CODE)
    args = {"title": "t", "objective": "o", "completion_conditions": [],
            "steps": [{"id": "a", "title": "A"}], "idempotency_key": "k1"}
    first = world.dispatch("alice", "prepare_goal_workflow",
                           {**args, "session_id": session["session_ref"]})["output"]
    again = world.dispatch("alice", "prepare_goal_workflow",
                           {**args, "session_id": session["session_id"]},
                           mmo={"record": session["session_id"]})["output"]
    assert first["goal"]["summary"]["session_id"] == session["session_id"]
    assert (again["replayed"], again["goal"]) == (True, first["goal"])
    gid = first["goal"]["summary"]["goal_id"]
    bad = world.dispatch("alice", "checkpoint_goal", {"goal_id": gid, "expected_revision": 7,
                                                      "summary": "s", "idempotency_key": "c"})
    assert bad["output"]["error_kind"] == "goal_revision_changed"
    assert bad["output"]["state_changed"] is False
    card = world.dispatch("alice", "present_goal_plan", {"goal_id": gid})["output"]["goal_plan"]
    assert card["steps"] == first["goal"]["plan"]["steps"] and card["total_step_count"] == 1


def test_redact_secret_lines() -> None:
    text = "\n".join(["plain words about tokens", "API_KEY=abcdefgh1234", "token: xyz",
                      "Authorization: Bearer abcdefghijklmnop", "use mmo_pat_0123456789abcdef",
                      "-----BEGIN RSA PRIVATE KEY-----", "the end"])
    assert redact_secret_lines(text).split("\n") == [
        "plain words about tokens", REDACTED_LINE, REDACTED_LINE, REDACTED_LINE, REDACTED_LINE,
        REDACTED_LINE, "the end"]

"""Spec 12 from outside, as a user and a hostile client would meet it: a real ``mmo serve``
and two real ``mmo runner`` processes (alice's and bob's), talked to over HTTP/JSON-RPC.

Covered: Processes (server.json, admin-token, state dir), Accounts/tokens/scopes (every
tool of the scope table refused without its scope, directly, through the dispatcher and
through ``/api/tools/call``, with nothing changed; a second user's runner and PAT reach
none of the first user's projects, sessions, goals, process jobs or team jobs), the Admin
HTTP API's statuses, the Security rules (no token or planted credential in any state,
config or log file, nor in a process job's environment; no absolute path of the runner's
machine in any response body of a session that used every tool kind) and the Limits.

One server and two runners serve the whole module; the session that uses every tool kind
runs while the world is built, so every process it starts is there before any test. The
last tests restart the server (everything survives), revoke bob's runner token and stop
alice's runner with SIGINT.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from support.mcp_http import UI_CAPABILITIES, post, stateless_request
from support.mcp_http import client as http_client
from support.runner_core import JOB_LAB, register_project, write_runner_config
from support.serve import ServeProcess, start_serve_process
from support.waiting import wait_until

from mmo_kernel.hosts.codex_cli import project_codex
from mmo_kernel.project_tools.catalog import TOOLS

# one server (and runner) per module: its tests stay on one xdist worker
pytestmark = pytest.mark.xdist_group("test_security_limits")

PROJECT_ROOT = Path(__file__).resolve().parents[3]
MMO = Path(sys.executable).with_name("mmo")
ALL_SCOPES = ("read", "write", "execute", "goals", "delegate")
MiB = 1024 * 1024
GIT_ENV = {"GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@localhost",
           "GIT_COMMITTER_NAME": "T", "GIT_COMMITTER_EMAIL": "t@localhost"}
PLANTED_FILE = "planted-credential-" + "7f3a9c" * 6
PLANTED_ENV = "planted-envsecret-" + "b41d0e" * 6
SCOPE_TABLE = {
    "read": ["list_projects", "work_on_project", "read_files", "read_session_handoff",
             "review_changes", "observe_jobs", "wait_for_job_readiness", "get_goal",
             "present_goal_plan", "get_work_result_state", "team_agents", "team_status"],
    "write": ["edit_project_files", "transfer_project_artifact", "finish_coding_task"],
    "execute": ["run_script", "run_process", "write_job_input"],
    "goals": ["prepare_goal_workflow", "checkpoint_goal", "revise_goal_plan", "update_goal"],
    "delegate": ["team_spawn", "team_wait", "team_result", "team_accept", "team_reject",
                 "team_integrate", "team_cancel"],
}


# --------------------------------------------------------------------------- world --

def api(base_url: str, token: str | None, path: str, body: Any = None, *,
        method: str = "POST") -> Any:
    """One admin-API request on the shared HTTP client (a new client costs ~50 ms)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    if method == "GET":
        return http_client().get(base_url + path, headers=headers)
    return http_client().post(base_url + path, headers=headers, json=body)


def create_runner_token(base_url: str, admin: str, username: str,
                        client_id: str) -> tuple[str, str]:
    """(token, token_id) of a new runner token."""
    reply = api(base_url, admin, "/api/runner-tokens/create",
                {"username": username, "client_id": client_id, "name": "test"})
    assert reply.status_code == 200, reply.text
    return reply.json()["token"], reply.json()["token_id"]


@dataclass
class Runner:
    process: subprocess.Popen[bytes]
    log: Path
    state_dir: Path
    config_dir: Path
    token: str
    token_id: str


@dataclass
class World:
    root: Path
    server: ServeProcess
    admin: str
    pats: dict[str, str]
    runners: dict[str, Runner]
    code: Path
    data: Path
    ids: dict[str, Any] = field(default_factory=dict)
    bodies: list[tuple[str, bytes]] = field(default_factory=list)
    tokens: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return self.server.url

    def mcp(self, token: str | None, tool: str, arguments: dict[str, Any], *,
            ui: bool = True, record: bool = True) -> tuple[Any, dict[str, Any] | None]:
        """One stateless ``tools/call``: (HTTP response, the envelope or None)."""
        body, headers = stateless_request("tools/call", {"name": tool, "arguments": arguments},
                                          capabilities=UI_CAPABILITIES if ui else None)
        reply = post(self.url, token, body, headers)
        if record:
            self.bodies.append((tool, reply.content))
        data = reply.json() if reply.content else None
        result = (data or {}).get("result")
        return reply, (result or {}).get("structuredContent")

    def tool(self, token: str, tool: str, arguments: dict[str, Any], *,
             dispatch: bool = False) -> dict[str, Any]:
        """A tool's envelope through /mcp, directly or through ``call_project_tool``."""
        if dispatch:
            reply, envelope = self.mcp(token, "call_project_tool",
                                       {"tool": tool, "arguments": arguments})
        else:
            reply, envelope = self.mcp(token, tool, arguments)
        assert reply.status_code == 200 and envelope is not None, reply.text[:2000]
        result = reply.json()["result"]
        assert result["isError"] is (not envelope["success"])
        assert json.loads(result["content"][0]["text"]) == envelope
        return envelope

    def ok(self, token: str, tool: str, arguments: dict[str, Any], **kw: Any) -> dict[str, Any]:
        envelope = self.tool(token, tool, arguments, **kw)
        assert envelope["success"] is True, envelope
        return envelope["output"]

    def api_tool(self, token: str, tool: str, params: dict[str, Any]) -> dict[str, Any]:
        reply = api(self.url, token, "/api/tools/call", {"tool": tool, "params": params})
        assert reply.status_code == 200, reply.text[:2000]
        self.bodies.append((tool, reply.content))
        return reply.json()


def _private(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o700)
    return path


def _env(home: Path, codex: Path, **extra: str) -> dict[str, str]:
    """A private MMO environment for one process (nothing of the test's own)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("MMO_") and not k.startswith("XDG_")}
    codex_home = _private(home / "codex-home")
    (codex_home / "auth.json").write_text(
        '{"OPENAI_API_KEY": null, "tokens": null, "last_refresh": null}\n')
    os.chmod(codex_home / "auth.json", 0o600)
    env.update({"MMO_STATE_DIR": str(_private(home / "state")),
                "MMO_CONFIG_DIR": str(_private(home / "config")),
                "CODEX_HOME": str(codex_home), "HOME": str(_private(home / "home")),
                "XDG_STATE_HOME": str(_private(home / "xdg-state")),
                "XDG_CONFIG_HOME": str(_private(home / "xdg-config")),
                "MMO_CODEX_BIN": str(codex), **GIT_ENV, **extra})
    return env


def _runners(world_url: str, admin: str) -> dict[str, dict[str, Any]]:
    reply = api(world_url, admin, "/api/runners", method="GET")
    assert reply.status_code == 200, reply.text
    return {r["client_id"]: r for r in reply.json()["runners"]}


def _start_runner(root: Path, name: str, url: str, admin: str, owner: str, client_id: str,
                  codex: Path, projects: dict[str, Path], **env_extra: str) -> Runner:
    home = _private(root / name)
    env = _env(home, codex, **env_extra)
    token, token_id = create_runner_token(url, admin, owner, client_id)
    config = write_runner_config(home / "runner-config", server_url=url, token=token,
                                 client_id=client_id, owner=owner,
                                 allowed_roots=[root / "projects"], team_profile=str(JOB_LAB))
    with open(config, "a", encoding="utf-8") as handle:
        handle.write(f'allowed_executables = ["{sys.executable}"]\n')
    for project_id, path in projects.items():
        register_project(config, project_id, path)
    log = home / "runner.stderr.log"
    with open(log, "wb") as stderr:
        process = subprocess.Popen([str(MMO), "runner", "--config", str(config)],
                                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=stderr, env=env)
    return Runner(process=process, log=log, state_dir=Path(env["MMO_STATE_DIR"]),
                  config_dir=Path(env["MMO_CONFIG_DIR"]), token=token, token_id=token_id)


def _git_project(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "README.md").write_text("# code\nline two\n")
    (path / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "init"]):
        subprocess.run(["git", *args], cwd=path, check=True, env={**os.environ, **GIT_ENV},
                       capture_output=True)
    return path


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    codex = project_codex(PROJECT_ROOT)
    if codex is None:
        pytest.fail("the pinned Codex CLI is missing: run `make codex`", pytrace=False)
    root = Path(os.path.realpath(tmp_path_factory.mktemp("security")))
    projects = _private(root / "projects")
    code = _git_project(projects / "code")
    data = projects / "data"
    data.mkdir()
    (data / "note.txt").write_text("data note\n")
    bob_project = projects / "bobproj"
    bob_project.mkdir()
    (bob_project / "b.txt").write_text("bob\n")

    server = start_serve_process(root / "serve-state",
                                 env=_env(_private(root / "serve-home"), codex))
    started: list[Runner] = []
    world: World | None = None
    try:
        admin = (root / "serve-state" / "admin-token").read_text().strip()
        pats: dict[str, str] = {}
        for user in ("alice", "bob"):
            assert api(server.url, admin, "/api/users/create",
                       {"username": user}).status_code == 200
            reply = api(server.url, admin, "/api/tokens/create",
                        {"username": user, "name": "full", "scopes": list(ALL_SCOPES)})
            pats[user] = reply.json()["token"]
        alice_home = root / "alice-runner"
        _private(alice_home / "config")
        creds = alice_home / "config" / "credentials.env"
        creds.write_text(f"ACME_LICENSE={PLANTED_FILE}\n")
        os.chmod(creds, 0o600)
        outside = root / "elsewhere" / "out"
        outside.mkdir(parents=True)
        (projects / "linked").symlink_to(code)
        (code / "etc_link").symlink_to("/etc")
        (code / "pw_link").symlink_to("/etc/passwd")
        alice = _start_runner(root, "alice-runner", server.url, admin, "alice", "laptop", codex,
                              {"code": code, "data": data, "outside": outside,
                               "linked": projects / "linked"},
                              ACME_LICENSE=PLANTED_FILE, DEPLOY_PASSWORD=PLANTED_ENV,
                              PLAIN_COPY=PLANTED_FILE)
        started.append(alice)
        bob = _start_runner(root, "bob-runner", server.url, admin, "bob", "bobbox", codex,
                            {"bobproj": bob_project})
        started.append(bob)
        wait_until(lambda: all(_runners(server.url, admin).get(c, {}).get("online")
                               for c in ("laptop", "bobbox")),
                   timeout=90, what="both runners to link up")
        world = World(root=root, server=server, admin=admin, pats=pats,
                      runners={"alice": alice, "bob": bob}, code=code, data=data)
        world.tokens = [admin, *pats.values(), alice.token, bob.token]
        _every_tool_kind_session(world)
        yield world
    finally:
        for runner in started:
            if runner.process.poll() is None:
                runner.process.send_signal(signal.SIGTERM)
        for runner in started:
            try:
                runner.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                runner.process.kill()
                runner.process.wait()
        for runner in started:
            stopped = subprocess.run([str(MMO), "gateway", "stop"], capture_output=True,
                                     timeout=60, env=_env(runner.state_dir.parent, codex))
            assert stopped.returncode == 0, stopped.stderr
        (world.server if world is not None else server).stop()  # a restart replaces it


def _every_tool_kind_session(w: World) -> None:
    """alice's session: every tool kind once (its raw response bodies are kept)."""
    pat = w.pats["alice"]
    listed = w.ok(pat, "list_projects", {})
    assert {p["id"] for p in listed["projects"]} == {"runner:laptop:code", "runner:laptop:data"}
    P, D = "runner:laptop:code", "runner:laptop:data"
    started = w.ok(pat, "work_on_project", {"project": P, "instruction": "fix calc"})
    S = started["session_id"]
    w.ids.update(P=P, D=D, S=S, S_ref=started["session_ref"], P_ref=started["project_ref"])
    w.ok(pat, "read_files", {"project": P, "session_id": S, "items": [{"path": "README.md"}]})
    w.ok(pat, "edit_project_files", {"project": P, "session_id": S, "changes": [
        {"kind": "create", "path": "notes/new.txt", "content": "hello\n"}]})
    envdump = ("import json, os\n"
               "json.dump(dict(os.environ), open('.git/env.json', 'w'))\nprint('dumped')\n")
    ran = w.ok(pat, "run_script", {"project": P, "session_id": S, "language": "python",
                                   "script": envdump, "purpose": "validation"})
    assert ran["status"] == "completed", ran
    w.ok(pat, "run_process", {"project": P, "session_id": S, "executable": sys.executable,
                              "args": ["-c", "print(1)"], "timeout_secs": 30})
    pending = w.ok(pat, "run_process", {
        "project": P, "session_id": S, "executable": sys.executable,
        "args": ["-c", "import sys; print(sys.stdin.read())"], "interactive": True,
        "timeout_secs": 120})
    J = pending["job_id"]
    w.ids["J"] = J
    w.ok(pat, "write_job_input", {"project": P, "job_id": J, "input_id": "i1",
                                  "data": "abc\n", "close": True}, dispatch=True)
    joined = w.ok(pat, "wait_for_job_readiness", {"job_ids": [J], "mode": "all",
                                                  "wait_secs": 30})
    assert joined["ready_job_ids"] == [J], joined
    w.ok(pat, "observe_jobs", {"items": [{"job_id": J}]})
    w.ok(pat, "review_changes", {"project": P, "session_id": S, "scope": {"kind": "workspace"}})
    w.ok(pat, "transfer_project_artifact", {
        "source_project": P, "source_path": "notes/new.txt", "destination_project": D,
        "destination_path": "copy.txt"}, dispatch=True)
    goal = w.ok(pat, "prepare_goal_workflow", {
        "session_id": S, "title": "fix", "objective": "fix calc",
        "completion_conditions": ["tests pass"], "steps": [{"id": "a", "title": "A"},
                                                           {"id": "b", "title": "B"}],
        "idempotency_key": "g1"}, dispatch=True)["goal"]
    G = goal["summary"]["goal_id"]
    w.ids["G"] = G
    w.ok(pat, "checkpoint_goal", {"goal_id": G, "expected_revision": 1, "current_step_id": "a",
                                  "summary": "s", "idempotency_key": "g2"}, dispatch=True)
    w.ok(pat, "revise_goal_plan", {"goal_id": G, "expected_revision": 2, "reason": "r",
                                   "steps": [{"id": "a", "title": "A"}, {"id": "c", "title": "C"}],
                                   "idempotency_key": "g3"}, dispatch=True)
    w.ok(pat, "get_goal", {"goal_id": G}, dispatch=True)
    w.ok(pat, "present_goal_plan", {"goal_id": G}, dispatch=True)
    w.ok(pat, "finish_coding_task", {"project": P, "session_id": S, "summary": "done",
                                     "outputs": ["notes/new.txt"]})
    w.ok(pat, "get_work_result_state", {"project": P, "session_id": S})
    w.ok(pat, "read_session_handoff", {"project": P, "session_id": S,
                                       "include_workspace": True}, dispatch=True)
    w.ok(pat, "team_agents", {"session_id": S}, dispatch=True)
    T = w.ok(pat, "team_spawn", {"session_id": S, "idempotency_key": "t1",
                                 "agents": [{"agent": "plain", "task": "Say hello"}]},
             dispatch=True)["job_ids"][0]
    w.ids["T"] = T

    def done() -> bool:
        out = w.ok(pat, "team_wait", {"session_id": S, "job_ids": [T], "timeout_seconds": 30},
                   dispatch=True)
        return not out.get("timed_out_waiting")

    wait_until(done, timeout=120, what="the team job to finish")
    w.ok(pat, "team_status", {"session_id": S, "job_ids": [T]}, dispatch=True)
    w.ok(pat, "team_result", {"session_id": S, "job_id": T}, dispatch=True)
    w.ok(pat, "team_accept", {"session_id": S, "job_id": T, "reason": "fine"}, dispatch=True)
    for name in ("team_reject", "team_integrate", "team_cancel"):  # refused: already accepted
        w.tool(pat, name, {"session_id": S, "job_id": T, "reason": "r"}, dispatch=True)
    # a few failures, whose errors are responses too
    paths = ["../../etc/passwd", "/etc/passwd", "missing.txt", "etc_link/passwd", "pw_link",
             "notes"]
    items = w.ok(pat, "read_files", {"project": P, "items": [{"path": p} for p in paths]}
                 )["items"]
    kinds = [item.get("error_kind") for item in items]
    assert kinds[:4] == ["path_outside_project", "path_outside_project", "file_not_found",
                         "path_outside_project"], items
    assert kinds[4] in ("path_outside_project", "not_a_regular_file"), items  # a symlink
    assert kinds[5] == "not_a_regular_file", items
    w.ids["path_errors"] = items
    selector = w.tool(pat, "work_on_project", {"path": str(w.code), "instruction": "x"})
    assert selector["output"]["error_kind"] == "invalid_project_selector"
    assert selector["error"] == ("missing client_id required with path; call list_projects "
                                 "to find project ids")
    assert {k: selector["output"]["suggested_call"][k] for k in ("tool", "arguments",
                                                                  "follow_up_kind")} == {
        "tool": "list_projects", "arguments": {}, "follow_up_kind": "mechanically_followable"}
    where = ("import os, sys\nprint(os.getcwd()); print(__file__)\n"
             "print(os.path.abspath('notes/new.txt')); print(os.environ['HOME'])\n"
             "sys.stdout.flush(); raise RuntimeError(os.getcwd())\n")
    crashed = w.tool(pat, "run_script", {"project": P, "session_id": S, "language": "python",
                                         "script": where})
    assert crashed["output"]["error_kind"] == "nonzero_exit", crashed
    assert "RuntimeError" in crashed["output"]["stderr"]
    denied = w.tool(pat, "run_process", {"project": P, "session_id": S, "executable": "/bin/sh",
                                         "args": ["-c", "true"], "timeout_secs": 5})
    assert denied["output"]["error_kind"] == "policy_denied", denied
    plain = w.tool(pat, "review_changes", {"project": D, "session_id": S,
                                           "scope": {"kind": "commit", "rev": "HEAD"}})
    assert plain["output"]["error_kind"] in ("not_a_git_project", "session_not_found"), plain


# ----------------------------------------------------------------------- helpers --

def _snapshot(w: World) -> dict[str, Any]:
    """What a refused call must not change: project bytes, process jobs, team jobs, the
    goal and the work result (read with alice's full PAT)."""
    trees = {}
    for root in (w.code, w.data):
        for path in sorted(root.rglob("*")):
            if ".git" in path.relative_to(root).parts or not path.is_file():
                continue
            trees[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    state = w.runners["alice"].state_dir
    pat = w.pats["alice"]
    return {
        "trees": trees,
        "process_jobs": sorted(p.name for p in state.glob("runner/laptop/**/mmo_pjob_*")),
        "team_jobs": sorted(p.name for p in (state / "jobs").iterdir()),
        "goal": w.ok(pat, "get_goal", {"goal_id": w.ids["G"]}, dispatch=True, ),
        "work_result": w.ok(pat, "get_work_result_state",
                            {"project": w.ids["P"], "session_id": w.ids["S"]}),
        "sessions": w.ok(pat, "list_projects", {})["total_count"],
    }


def _probe_arguments(w: World) -> dict[str, dict[str, Any]]:
    """Arguments that would succeed (or change something) for each tool."""
    P, D, S, J, G, T = (w.ids[k] for k in ("P", "D", "S", "J", "G", "T"))
    reason = {"session_id": S, "job_id": T, "reason": "probe"}
    return {
        "list_projects": {},
        "work_on_project": {"project": P, "instruction": "probe"},
        "read_files": {"project": P, "session_id": S, "items": [{"path": "README.md"}]},
        "read_session_handoff": {"project": P, "session_id": S, "include_workspace": False},
        "review_changes": {"project": P, "session_id": S, "scope": {"kind": "workspace"}},
        "observe_jobs": {"items": [{"job_id": J}]},
        "wait_for_job_readiness": {"job_ids": [J], "mode": "all", "wait_secs": 0},
        "get_goal": {"goal_id": G},
        "present_goal_plan": {"goal_id": G},
        "get_work_result_state": {"project": P, "session_id": S},
        "team_agents": {"session_id": S},
        "team_status": {"session_id": S, "job_ids": [T]},
        "edit_project_files": {"project": P, "session_id": S, "changes": [
            {"kind": "create", "path": "probe.txt", "content": "x"}]},
        "transfer_project_artifact": {"source_project": P, "source_path": "README.md",
                                      "destination_project": D,
                                      "destination_path": "probe.txt"},
        "finish_coding_task": {"project": P, "session_id": S, "summary": "probe"},
        "run_script": {"project": P, "session_id": S, "language": "python",
                       "script": "open('probe.txt', 'w').write('x')"},
        "run_process": {"project": P, "session_id": S, "executable": sys.executable,
                        "args": ["-c", "open('probe.txt', 'w').write('x')"], "timeout_secs": 9},
        "write_job_input": {"project": P, "job_id": J, "input_id": "probe", "data": "x"},
        "prepare_goal_workflow": {"session_id": S, "title": "t", "objective": "o",
                                  "completion_conditions": [], "steps": [{"id": "a",
                                                                          "title": "A"}],
                                  "idempotency_key": "probe"},
        "checkpoint_goal": {"goal_id": G, "expected_revision": 3, "completed_step_ids": ["a"],
                            "summary": "s", "idempotency_key": "probe"},
        "revise_goal_plan": {"goal_id": G, "expected_revision": 3, "reason": "r",
                             "steps": [{"id": "a", "title": "A2"}],
                             "idempotency_key": "probe"},
        "update_goal": {"goal_id": G, "expected_revision": 3, "lifecycle": "abandoned",
                        "idempotency_key": "probe"},
        "team_spawn": {"session_id": S, "idempotency_key": "probe",
                       "agents": [{"agent": "plain", "task": "probe"}]},
        "team_wait": {"session_id": S, "job_ids": [T], "timeout_seconds": 0},
        "team_result": {"session_id": S, "job_id": T},
        "team_accept": reason, "team_reject": reason, "team_integrate": reason,
        "team_cancel": reason,
    }


def _scan_files(roots: list[Path], needles: dict[str, str], skip: set[Path]) -> list[str]:
    hits = []
    for root in roots:
        for path in root.rglob("*"):
            if path in skip or not path.is_file() or path.is_symlink():
                continue
            try:
                data = path.read_bytes()
            except OSError:
                continue
            for name, needle in needles.items():
                if needle.encode() in data:
                    hits.append(f"{name} in {path}")
    return hits


# ------------------------------------------------------------------------- tests --

def test_server_json_admin_token_and_state_dir(world: World):
    state = world.root / "serve-state"
    info = json.loads((state / "server.json").read_text())
    assert set(info) == {"url", "mcp_url", "runner_url", "pid", "started_at"}
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+", info["url"]) and not info["url"].endswith(
        ":0")
    assert info["mcp_url"] == info["url"] + "/mcp"
    assert info["runner_url"] == "ws://" + info["url"].removeprefix("http://") + \
        "/api/runners/ws"
    assert info["pid"] == world.server.process.pid
    assert (state.stat().st_mode & 0o777) == 0o700
    token_file = state / "admin-token"
    assert (token_file.stat().st_mode & 0o777) == 0o600
    text = token_file.read_text()
    assert text.count("\n") == 1 and text.endswith("\n")
    assert text.strip().startswith("mmo_adm_") and text.strip() == world.admin


def test_runner_refuses_plain_http_to_a_non_loopback_server(tmp_path):
    config = write_runner_config(tmp_path, server_url="http://mmo.example.com:8765")
    done = subprocess.run([str(MMO), "runner", "--config", str(config)], capture_output=True,
                          text=True, timeout=60, env={**os.environ,
                                                      "MMO_STATE_DIR": str(tmp_path / "st"),
                                                      "MMO_CONFIG_DIR": str(tmp_path / "cf")})
    assert done.returncode != 0
    assert "allow_insecure_transport" in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


@pytest.mark.parametrize("scope", list(SCOPE_TABLE))
def test_every_tool_without_its_scope_is_refused_and_changes_nothing(world: World, scope):
    assert {name for names in SCOPE_TABLE.values() for name in names} == {
        n for n, s in TOOLS.items() if s.scope is not None and s.listing != "internal"}
    reply = api(world.url, world.admin, "/api/tokens/create", {
        "username": "alice", "name": f"no-{scope}",
        "scopes": [s for s in ALL_SCOPES if s != scope]})
    pat = reply.json()["token"]
    world.tokens.append(pat)
    before = _snapshot(world)
    probes = _probe_arguments(world)
    expected = {"error_kind": "insufficient_scope", "state_changed": False}
    for name in SCOPE_TABLE[scope]:
        surfaces = [("dispatcher", world.tool(pat, name, probes[name], dispatch=True)),
                    ("api", world.api_tool(pat, name, probes[name]))]
        if TOOLS[name].listing in ("direct", "app"):
            surfaces.append(("direct", world.tool(pat, name, probes[name])))
        for surface, envelope in surfaces:
            assert envelope["success"] is False, (name, surface, envelope)
            assert envelope["error"] == f"missing required scope: {scope}", (name, surface)
            assert {k: envelope["output"].get(k) for k in expected} == expected, (name, surface)
    assert _snapshot(world) == before


def test_internal_runner_tools_are_unreachable_for_clients(world: World):
    w, pat = world, world.pats["alice"]
    probes = {"resolve_project_path": {"path": str(w.code)},
              "session_status": {"session_id": w.ids["S"]},
              "artifact_read": {"project": w.ids["P"], "path": "README.md"},
              "artifact_write": {"project": w.ids["P"], "path": "x.txt", "data_b64": "eA==",
                                 "overwrite": True}}
    for name, args in probes.items():
        for envelope in (w.tool(pat, "call_project_tool", {"tool": name, "arguments": args}),
                         w.api_tool(pat, name, args), w.api_tool(w.admin, name, args)):
            assert envelope["output"]["error_kind"] == "unknown_tool", (name, envelope)
        reply, _ = w.mcp(pat, name, args)
        assert reply.json()["error"]["code"] == -32602, reply.text
    assert not (w.code / "x.txt").exists()


def test_admin_token_reaches_list_projects_only(world: World):
    listed = world.api_tool(world.admin, "list_projects", {})
    assert listed["success"] is True
    assert {p["id"] for p in listed["output"]["projects"]} >= {
        "runner:laptop:code", "runner:laptop:data", "runner:bobbox:bobproj"}
    refused = world.api_tool(world.admin, "read_files", {
        "project": "runner:laptop:code", "items": [{"path": "README.md"}]})
    assert refused["success"] is False
    assert refused["output"]["error_kind"] == "insufficient_scope"
    assert refused["error"] == "missing required scope: read"
    reply, _ = world.mcp(world.admin, "list_projects", {})
    assert reply.status_code == 401  # /mcp takes PATs only


def _same_shape(a: dict[str, Any], b: dict[str, Any], real: str, fake: str) -> None:
    """Two refusals that differ only by the id asked for: no hint that one exists."""
    assert a["success"] is False and b["success"] is False
    assert json.loads(json.dumps(a).replace(real, fake)) == b, (a, b)


def test_another_users_runner_and_pat_reach_nothing_of_the_first_user(world: World):
    bob, w = world.pats["bob"], world
    P, S, J, G, T = (w.ids[k] for k in ("P", "S", "J", "G", "T"))
    listed = w.ok(bob, "list_projects", {})
    assert [p["id"] for p in listed["projects"]] == ["runner:bobbox:bobproj"]
    assert listed["total_count"] == 1
    mine = "runner:bobbox:bobproj"
    fake_p, fake_s = "runner:laptop:nope", "mmo_sess_20990101-000000-nope-abcdef"
    fake_g, fake_j, fake_t = "goal_" + "0" * 16, "mmo_pjob_" + "0" * 16, "mmo-" + "0" * 12
    for tool, args in [
        ("read_files", {"project": P, "items": [{"path": "README.md"}]}),
        ("edit_project_files", {"project": P, "changes": [
            {"kind": "create", "path": "bob.txt", "content": "x"}]}),
        ("run_script", {"project": P, "session_id": S, "language": "python",
                        "script": "print(1)"}),
        ("work_on_project", {"project": P, "instruction": "x"}),
        ("get_work_result_state", {"project": P, "session_id": S}),
        ("transfer_project_artifact", {"source_project": P, "source_path": "README.md",
                                       "destination_project": mine,
                                       "destination_path": "stolen.txt"}),
    ]:
        real = w.tool(bob, tool, args, dispatch=True)
        assert real["output"]["error_kind"] == "project_not_found", (tool, real)
        fake = w.tool(bob, tool, json.loads(json.dumps(args).replace(P, fake_p)), dispatch=True)
        _same_shape(real, fake, P, fake_p)
    # a path selector on alice's runner: the same refusal for her real path and any other,
    # and for a runner that does not exist at all
    refusals = [w.tool(bob, "work_on_project", {"client_id": client_id, "path": path,
                                                "instruction": "x"})
                for client_id, path in (("laptop", str(w.code / "calc.py")),
                                        ("laptop", "/nowhere/at/all"),
                                        ("ghost", str(w.code / "calc.py")))]
    assert refusals[0]["output"]["error_kind"] == "project_not_found", refusals[0]
    assert refusals[0] == refusals[1] == refusals[2]
    assert str(w.code) not in json.dumps(refusals)
    # alice's session through bob's own project, and on its own
    for tool, args in [
        ("work_on_project", {"project": mine, "session_id": S, "instruction": "x"}),
        ("read_session_handoff", {"project": mine, "session_id": S, "include_workspace": True}),
        ("finish_coding_task", {"project": mine, "session_id": S, "summary": "x"}),
        ("run_script", {"project": mine, "session_id": S, "language": "python",
                        "script": "print(1)"}),
        ("review_changes", {"project": mine, "session_id": S, "scope": {"kind": "workspace"}}),
        ("prepare_goal_workflow", {"session_id": S, "title": "t", "objective": "o",
                                   "completion_conditions": [], "steps": [
                                       {"id": "a", "title": "A"}], "idempotency_key": "b"}),
        ("team_agents", {"session_id": S}),
        ("team_status", {"session_id": S, "job_ids": [T]}),
        ("team_spawn", {"session_id": S, "idempotency_key": "b",
                        "agents": [{"agent": "plain", "task": "x"}]}),
        ("read_files", {"project": mine, "session_id": S, "items": [{"path": "b.txt"}]}),
    ]:
        real = w.tool(bob, tool, args, dispatch=True)
        assert real["output"]["error_kind"] == "session_not_found", (tool, real)
        fake = w.tool(bob, tool, json.loads(json.dumps(args).replace(S, fake_s)), dispatch=True)
        _same_shape(real, fake, S, fake_s)
    # recording into alice's session is refused the same way, and records nothing
    recorded = w.tool(bob, "list_projects", {"_mmo": {"record": S}})
    assert recorded["output"]["error_kind"] == "session_not_found", recorded
    _same_shape(recorded, w.tool(bob, "list_projects", {"_mmo": {"record": fake_s}}), S, fake_s)
    # alice's session ref means nothing to bob (refs are per user)
    by_ref = w.tool(bob, "read_session_handoff", {"project": mine, "session_id": w.ids["S_ref"],
                                                  "include_workspace": False}, dispatch=True)
    assert by_ref["output"]["error_kind"] == "session_not_found", by_ref
    # alice's goal
    for tool, args in [("get_goal", {"goal_id": G}), ("present_goal_plan", {"goal_id": G}),
                       ("update_goal", {"goal_id": G, "expected_revision": 3,
                                        "lifecycle": "abandoned", "idempotency_key": "b"})]:
        real = w.tool(bob, tool, args, dispatch=True)
        assert real["output"]["error_kind"] == "goal_not_found", (tool, real)
        _same_shape(real, w.tool(bob, tool, json.loads(json.dumps(args).replace(G, fake_g)),
                                 dispatch=True), G, fake_g)
    # alice's process job
    for tool, args in [("observe_jobs", {"items": [{"job_id": J}]}),
                       ("wait_for_job_readiness", {"job_ids": [J], "mode": "any",
                                                   "wait_secs": 0}),
                       ("write_job_input", {"project": mine, "job_id": J, "input_id": "b",
                                            "close": True})]:
        real = w.tool(bob, tool, args, dispatch=True)
        assert real["output"]["error_kind"] == "job_not_found", (tool, real)
        _same_shape(real, w.tool(bob, tool, json.loads(json.dumps(args).replace(J, fake_j)),
                                 dispatch=True), J, fake_j)
    # alice's team job, asked in bob's own session
    bob_s = w.ok(bob, "work_on_project", {"project": mine, "instruction": "mine"})["session_id"]
    for tool, args in [("team_status", {"session_id": bob_s, "job_ids": [T]}),
                       ("team_result", {"session_id": bob_s, "job_id": T}),
                       ("team_cancel", {"session_id": bob_s, "job_id": T, "reason": "x"}),
                       ("team_wait", {"session_id": bob_s, "job_ids": [T],
                                      "timeout_seconds": 0}),
                       ("review_changes", {"project": mine, "session_id": bob_s,
                                           "scope": {"kind": "job", "job_id": T}})]:
        real = w.tool(bob, tool, args, dispatch=True)
        assert real["output"]["error_kind"] == "job_not_found", (tool, real)
        _same_shape(real, w.tool(bob, tool, json.loads(json.dumps(args).replace(T, fake_t)),
                                 dispatch=True), T, fake_t)
    # and alice's files are untouched
    assert not (w.code / "bob.txt").exists()
    assert not list(w.root.glob("projects/bobproj/stolen.txt"))


def test_admin_api_statuses_and_phrases(world: World):
    url, admin = world.url, world.admin
    pat = world.pats["alice"]

    def call(path, body, token=admin, method="POST"):
        reply = api(url, token, path, body, method=method)
        data = reply.json()
        assert data["success"] is (reply.status_code == 200), (path, reply.text)
        return reply.status_code, data.get("error")

    def raw(path, content, token=admin):
        reply = http_client().post(url + path, content=content, headers={
            "Authorization": f"Bearer {token}", "Content-Type": "application/json"})
        return reply.status_code, reply.json().get("error")

    created = api(url, admin, "/api/users/create", {"username": "carol"}).json()
    assert created["success"] is True and set(created["user"]) == {"username", "created_at"}
    assert created["user"]["username"] == "carol"
    assert call("/api/users/create", {"username": "carol"}) == (409, "already exists")
    for body in ({"username": "Carol"}, {"username": "-x"}, {"username": "a" * 65},
                 {"username": "dave", "extra": 1}, {}, {"username": 5}):
        assert call("/api/users/create", body) == (400, "invalid request"), body
    assert raw("/api/users/create", b"not json") == (400, "invalid request")
    assert raw("/api/users/create", b"[1]") == (400, "invalid request")
    assert call("/api/users/create", {"username": "dave"}, token=None) == (401, "unauthorized")
    assert call("/api/users/create", {"username": "dave"}, token="mmo_adm_wrong") == (
        401, "unauthorized")
    assert call("/api/users/create", {"username": "dave"}, token=pat) == (403, "forbidden")
    assert call("/api/runners", None, token=pat, method="GET") == (403, "forbidden")
    assert call("/api/tokens/create", {"username": "nobody", "name": "n",
                                       "scopes": ["read"]}) == (404, "unknown user")
    assert call("/api/runner-tokens/create", {"username": "nobody", "name": "n",
                                              "client_id": "box"}) == (404, "unknown user")
    assert call("/api/tokens/create", {"username": "carol", "name": "n",
                                       "scopes": ["root"]}) == (400, "unknown scope")
    assert call("/api/tokens/create", {"username": "carol", "name": "n", "scopes": ["read"],
                                       "expires": 1}) == (400, "invalid request")
    for client_id in ("Box", "_box", "a" * 65, "bad/id"):
        assert call("/api/runner-tokens/create", {"username": "carol", "name": "n",
                                                  "client_id": client_id}) == (
            400, "invalid request"), client_id
    issued = api(url, admin, "/api/runner-tokens/create",
                 {"username": "carol", "name": "n", "client_id": "carolbox"}).json()
    assert set(issued) == {"success", "token", "token_id", "client_id"}
    assert issued["token"].startswith("mmo_rt_") and issued["client_id"] == "carolbox"
    world.tokens.append(issued["token"])
    # a client_id belongs to its first user: the same user may rotate, another may not
    again = api(url, admin, "/api/runner-tokens/create",
                {"username": "carol", "name": "rotated", "client_id": "carolbox"}).json()
    assert again["success"] is True and again["token"] != issued["token"]
    world.tokens.append(again["token"])
    assert call("/api/runner-tokens/create", {"username": "bob", "name": "n",
                                              "client_id": "laptop"}) == (409, "already exists")
    assert call("/api/tokens/revoke", {"token_id": again["token_id"]}) == (200, None)
    _assert_link_refused(world, again["token"])
    assert call("/api/tokens/revoke", {"token_id": "tok_nope"}) == (404, "unknown token")
    for name in ("a" * 64, "0a.b-c_d"):
        assert call("/api/users/create", {"username": name})[0] == 200, name
    # a runner token is for the runner link only; a PAT is no runner token
    rt = world.runners["alice"].token
    assert world.mcp(rt, "list_projects", {})[0].status_code == 401
    assert api(url, rt, "/api/tools/call", {"tool": "list_projects", "params": {}}
               ).status_code == 401
    assert call("/api/runners", None, token=rt, method="GET") == (401, "unauthorized")
    _assert_link_refused(world, pat)
    _assert_link_refused(world, admin)
    assert call("/api/tokens/revoke", {"token_id": "x", "why": 1}) == (400, "invalid request")
    assert call("/api/tools/call", {"tool": "list_projects", "params": {}, "x": 1}) == (
        400, "invalid request")
    runners = api(url, admin, "/api/runners", method="GET").json()
    for runner in runners["runners"]:
        assert set(runner) == {"client_id", "owner", "online", "projects", "last_seen_at"}
    owners = {r["client_id"]: r["owner"] for r in runners["runners"]}
    assert owners.items() >= {"laptop": "alice", "bobbox": "bob"}.items()

    # an admin-scoped PAT uses the admin API as its user; without read it lists nothing
    made = api(url, admin, "/api/tokens/create",
               {"username": "carol", "name": "adm", "scopes": ["admin"]}).json()
    assert made["scopes"] == ["admin"] and made["token"].startswith("mmo_pat_")
    adm = made["token"]
    world.tokens.append(adm)
    assert call("/api/users/create", {"username": "erin"}, token=adm)[0] == 200
    assert call("/api/runners", None, token=adm, method="GET")[0] == 200
    both = api(url, admin, "/api/tokens/create",
               {"username": "carol", "name": "both", "scopes": ["read", "admin"]}).json()
    world.tokens.append(both["token"])
    listed = world.api_tool(both["token"], "list_projects", {})  # admin widens nothing
    assert listed["output"] == {"projects": [], "total_count": 0}, listed
    refused = world.api_tool(adm, "list_projects", {})
    assert refused["output"]["error_kind"] == "insufficient_scope"
    assert refused["error"] == "missing required scope: read"

    # revoke: the token fails from the very next request, on every surface
    made = api(url, admin, "/api/tokens/create",
               {"username": "carol", "name": "gone", "scopes": ["read", "admin"]}).json()
    gone = made["token"]
    world.tokens.append(gone)
    assert world.api_tool(gone, "list_projects", {})["success"] is True
    assert world.mcp(gone, "list_projects", {})[0].status_code == 200
    assert call("/api/tokens/revoke", {"token_id": made["token_id"]}, token=adm) == (200, None)
    reply, _ = world.mcp(gone, "list_projects", {})
    assert reply.status_code == 401
    assert reply.headers["www-authenticate"] == 'Bearer realm="mmo"'
    assert reply.json()["error"]["code"] == -32001
    assert api(url, gone, "/api/tools/call", {"tool": "list_projects", "params": {}}
               ).status_code == 401
    assert call("/api/runners", None, token=gone, method="GET") == (401, "unauthorized")


def _assert_link_refused(world: World, token: str) -> None:
    """A runner link with ``token`` is refused with HTTP 401 before the upgrade."""
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    with pytest.raises(InvalidStatus) as refused:
        connect(world.server.info["runner_url"],
                additional_headers={"Authorization": f"Bearer {token}"}, open_timeout=60)
    assert refused.value.response.status_code == 401


def _raw_post(url: str, path: str, token: str, *, length: int | None,
              chunks: list[bytes] = ()) -> tuple[int, dict[str, Any]]:
    """POST over a bare socket: headers (a declared ``length``, else chunked), then the
    chunks (nothing after them, so the server has read all it was sent); the reply."""
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    framing = (f"Content-Length: {length}" if length is not None
               else "Transfer-Encoding: chunked")
    head = (f"POST {path} HTTP/1.1\r\nHost: {parts.netloc}\r\n"
            f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
            f"Accept: application/json\r\n{framing}\r\n\r\n").encode()
    with socket.create_connection((parts.hostname, parts.port), timeout=60) as conn:
        conn.sendall(head)
        for chunk in chunks:
            conn.sendall(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
        reply = b""
        while True:
            data = conn.recv(65536)
            if not data:
                break
            reply += data
            header, _, body = reply.partition(b"\r\n\r\n")
            size = re.search(rb"(?i)content-length: *(\d+)", header)
            if size and len(body) >= int(size.group(1)):
                break
    header, _, body = reply.partition(b"\r\n\r\n")
    return int(header.split(b" ")[1]), json.loads(body)


def test_request_bodies_over_8_mib_get_413(world: World):
    cases = (("/mcp", world.pats["alice"]), ("/api/tools/call", world.pats["alice"]),
             ("/api/users/create", world.admin))
    for path, token in cases:
        status, body = _raw_post(world.url, path, token, length=8 * MiB + 1)
        assert status == 413, (path, body)
        assert (body.get("success") is False) if path.startswith("/api") else (
            body["error"]["code"] == -32600), body
        # a chunked body is cut off once it passes the bound
        status, _ = _raw_post(world.url, path, token, length=None,
                              chunks=[b" " * MiB] * 8 + [b" "])
        assert status == 413, path
    # just under the bound the request is read and judged on its content
    body, headers = stateless_request("tools/call", {"name": "read_files", "arguments": {
        "project": world.ids["P"], "items": [{"path": "README.md"}],
        "pad": "x" * (8 * MiB - 4096)}})
    reply = post(world.url, world.pats["alice"], body, headers)
    assert reply.status_code == 200
    assert reply.json()["result"]["structuredContent"]["output"]["error_kind"] == \
        "invalid_arguments"


def test_mcp_response_over_1_mib_is_cut_with_a_suggested_call(world: World):
    w, pat = world, world.pats["alice"]
    line = "y" * 1023 + "\n"
    changes = [{"kind": "create", "path": f"big/{i}.txt", "content": line * 400}
               for i in range(6)]
    w.ok(pat, "edit_project_files", {"project": w.ids["D"], "changes": changes})
    reply, envelope = w.mcp(pat, "read_files", {"project": w.ids["D"], "items": [
        {"path": f"big/{i}.txt"} for i in range(6)]})
    assert reply.status_code == 200
    assert len(reply.content) <= MiB
    assert envelope["success"] is True
    assert envelope["output"]["output_truncated"] is True
    call = envelope["output"]["suggested_call"]
    assert call["tool"] == "read_files" and call["reason"]
    assert call["follow_up_kind"] in ("mechanically_followable", "needs_judgement")
    reply, dispatched = w.mcp(pat, "call_project_tool", {"tool": "read_files", "arguments": {
        "project": w.ids["D"], "items": [{"path": f"big/{i}.txt"} for i in range(6)]}})
    assert len(reply.content) <= MiB and dispatched["output"]["output_truncated"] is True


def test_read_files_page_bounds(world: World):
    w, pat = world, world.pats["alice"]
    w.ok(pat, "edit_project_files", {"project": w.ids["D"], "changes": [
        {"kind": "create", "path": "wide.txt", "content": ("z" * 999 + "\n") * 300},
        {"kind": "create", "path": "many.txt", "content": "l\n" * 2500}]})
    page = w.ok(pat, "read_files", {"project": w.ids["D"], "items": [
        {"path": "wide.txt", "limit": 2000}]})["items"][0]["output"]
    assert len(page["text"].encode()) <= 256 * 1024 and page["text"].endswith("\n")
    assert page["has_more"] is True and page["end_line"] == 262
    page = w.ok(pat, "read_files", {"project": w.ids["D"], "items": [
        {"path": "many.txt", "limit": 2000}]})["items"][0]["output"]
    assert page["end_line"] == 2000 and page["has_more"] is True
    for items in ([{"path": "many.txt", "limit": 2001}], [{"path": "many.txt"}] * 21, []):
        bad = w.tool(pat, "read_files", {"project": w.ids["D"], "items": items})
        assert bad["output"]["error_kind"] == "invalid_arguments", bad
    assert w.ok(pat, "read_files", {"project": w.ids["D"], "items": [
        {"path": "many.txt", "limit": 1}] * 20})["items"][19]["output"]["end_line"] == 1


def test_stdout_stderr_keep_32_kib_head_and_tail(world: World):
    w, pat = world, world.pats["alice"]
    script = ("import sys\nfor i in range(3000):\n    print(f'out {i:06d} ' + 'o' * 40)\n"
              "    print(f'err {i:06d} ' + 'e' * 40, file=sys.stderr)\n"
              "print('LAST-OUT')\nprint('LAST-ERR', file=sys.stderr)\n")
    out = w.ok(pat, "run_script", {"project": w.ids["P"], "session_id": w.ids["S"],
                                   "language": "python", "script": script})
    for stream, last in (("stdout", "LAST-OUT"), ("stderr", "LAST-ERR")):
        text = out[stream]
        total = out[f"{stream}_bytes"]
        assert total == 3000 * 52 + len(last) + 1
        assert out[f"{stream}_truncated"] is True
        marker = re.search(r"\[\.\.\. (\d+) bytes omitted \.\.\.\]", text)
        assert marker, text[:200]
        head, tail = text[:marker.start()], text[marker.end():]
        assert len(head.encode()) <= 8 * 1024 and len(tail.encode()) <= 24 * 1024
        kept = len(head.encode()) + len(tail.lstrip("\n").encode())
        assert int(marker.group(1)) + kept in (total, total - 1, total + 1)
        assert text.rstrip("\n").endswith(last)
        assert len(text.encode()) <= 32 * 1024 + 100


def test_observe_tail_and_write_input_bounds(world: World):
    w, pat = world, world.pats["alice"]
    P, S = w.ids["P"], w.ids["S"]
    script = "for i in range(2000):\n    print(f'{i:05d} ' + 'q' * 90)\n"
    job = w.ok(pat, "run_script", {"project": P, "session_id": S, "language": "python",
                                   "script": script})["job_id"]
    item = w.ok(pat, "observe_jobs", {"items": [{"job_id": job}], "tail_lines": 500}
                )["items"][0]
    tail = item["stdout_tail"]
    assert len(tail.encode()) <= 32 * 1024
    assert len(tail.splitlines()) <= 500 and tail.rstrip("\n").endswith("01999 " + "q" * 90)
    # 40 full tails would pass the 1 MiB response bound: the reply is cut and says so
    reply, many = w.mcp(pat, "observe_jobs", {"items": [{"job_id": job}] * 40,
                                              "tail_lines": 500})
    assert reply.status_code == 200 and len(reply.content) <= MiB
    assert many["success"] is True and many["output"]["output_truncated"] is True, \
        list(many["output"])
    assert many["output"]["suggested_call"]["tool"] == "observe_jobs"
    bad = w.tool(pat, "observe_jobs", {"items": [{"job_id": job}], "tail_lines": 501})
    assert bad["output"]["error_kind"] == "invalid_arguments"
    # a child that never reads: 1 MiB per input, 4 MiB queued, and no call blocks on it
    quiet = w.ok(pat, "run_process", {
        "project": P, "session_id": S, "executable": sys.executable,
        "args": ["-c", "import time; time.sleep(600)"], "interactive": True,
        "timeout_secs": 600})["job_id"]
    try:
        over = w.tool(pat, "write_job_input", {"project": P, "job_id": quiet, "input_id": "big",
                                               "data": "x" * (MiB + 1)}, dispatch=True)
        assert over["output"]["error_kind"] == "invalid_arguments", over
        kinds = []
        for i in range(6):
            envelope = w.tool(pat, "write_job_input", {
                "project": P, "job_id": quiet, "input_id": f"part{i}", "data": "x" * MiB},
                dispatch=True)
            kinds.append(envelope["output"].get("error_kind") or envelope["output"]["state"])
        assert kinds[:4] == ["pending"] * 4 or all(k in ("pending", "written")
                                                   for k in kinds[:4]), kinds
        assert "job_limit_reached" in kinds[4:], kinds
    finally:
        w.ok(pat, "write_job_input", {"project": P, "job_id": quiet, "input_id": "end",
                                      "close": True}, dispatch=True)
        os.kill(_job_pid(w, quiet), signal.SIGKILL)
        wait_until(lambda: w.ok(pat, "observe_jobs", {"items": [{"job_id": quiet}]}
                                )["items"][0]["terminal"], timeout=60, what="the job to end")


def _job_pid(w: World, job_id: str) -> int:
    [record] = list(w.runners["alice"].state_dir.glob(f"runner/laptop/**/{job_id}/job.json"))
    return int(json.loads(record.read_text())["pid"])


def test_edit_bounds(world: World):
    w, pat = world, world.pats["alice"]
    before = _snapshot(w)["trees"]
    too_big = w.tool(pat, "edit_project_files", {"project": w.ids["D"], "changes": [
        {"kind": "create", "path": "huge.txt", "content": "x" * (4 * MiB + 1)}]})
    assert too_big["output"]["error_kind"] == "invalid_arguments", too_big["error"]
    too_many = w.tool(pat, "edit_project_files", {"project": w.ids["D"], "changes": [
        {"kind": "create", "path": f"m/{i}.txt", "content": "x"} for i in range(51)]})
    assert too_many["output"]["error_kind"] == "invalid_arguments"
    assert _snapshot(w)["trees"] == before
    fifty = w.ok(pat, "edit_project_files", {"project": w.ids["D"], "changes": [
        {"kind": "create", "path": f"m/{i}.txt", "content": "x"} for i in range(50)]})
    assert len(fifty["items"]) == 50


def test_waits_are_capped_below_the_40_s_deadline(world: World):
    w, pat = world, world.pats["alice"]
    out = w.ok(pat, "team_wait", {"session_id": w.ids["S"], "job_ids": [w.ids["T"]],
                                  "timeout_seconds": 60}, dispatch=True)
    assert out["timeout_seconds"] < 40, out
    for tool, args in [("run_script", {"project": w.ids["P"], "session_id": w.ids["S"],
                                       "language": "python", "script": "1", "wait_secs": 31}),
                       ("wait_for_job_readiness", {"job_ids": [w.ids["J"]], "mode": "all",
                                                   "wait_secs": 31}),
                       ("observe_jobs", {"items": [{"job_id": w.ids["J"]}], "wait_secs": 31})]:
        assert w.tool(pat, tool, args)["output"]["error_kind"] == "invalid_arguments", tool


def test_a_token_pasted_into_text_arguments_is_never_recorded_or_returned(world: World):
    """A host that pastes a token into an instruction, a goal or a summary: the server
    records (and the runner receives) it redacted, and no reply repeats it."""
    w, pat, leaked = world, world.pats["alice"], world.pats["bob"]
    P = w.ids["P"]
    started = w.ok(pat, "work_on_project", {"project": P,
                                            "instruction": f"deploy with {leaked} please"})
    S = started["session_id"]
    goal = w.ok(pat, "prepare_goal_workflow", {
        "session_id": S, "title": f"use {leaked}", "objective": f"token={leaked}",
        "completion_conditions": [leaked], "steps": [{"id": "a", "title": leaked}],
        "idempotency_key": "leak"}, dispatch=True)["goal"]
    replay = w.ok(pat, "prepare_goal_workflow", {
        "session_id": S, "title": f"use {leaked}", "objective": f"token={leaked}",
        "completion_conditions": [leaked], "steps": [{"id": "a", "title": leaked}],
        "idempotency_key": "leak"}, dispatch=True)
    assert replay["replayed"] is True  # the same (redacted) payload is an inert replay
    assert goal["summary"]["title"] == "use [redacted:mmo_token]"
    w.ok(pat, "finish_coding_task", {"project": P, "session_id": S,
                                     "summary": f"done; {leaked}"})
    replies = [
        w.ok(pat, "read_session_handoff", {"project": P, "session_id": S,
                                           "include_workspace": False}, dispatch=True),
        w.ok(pat, "get_goal", {"goal_id": goal["summary"]["goal_id"]}, dispatch=True),
        w.ok(pat, "get_work_result_state", {"project": P, "session_id": S}),
    ]
    assert leaked not in json.dumps(replies)
    roots = [w.root / "serve-state", w.runners["alice"].state_dir]
    assert not _scan_files(roots, {"pasted token": leaked}, set())


def test_a_credential_a_job_prints_is_redacted_in_the_reply(world: World):
    w, pat = world, world.pats["alice"]
    half = len(PLANTED_FILE) // 2
    script = f"print({PLANTED_FILE[:half]!r} + {PLANTED_FILE[half:]!r})\n"
    out = w.ok(pat, "run_script", {"project": w.ids["P"], "session_id": w.ids["S"],
                                   "language": "python", "script": script}, )
    assert PLANTED_FILE not in out["stdout"] and "[redacted:ACME_LICENSE]" in out["stdout"]
    item = w.ok(pat, "observe_jobs", {"items": [{"job_id": out["job_id"]}]})["items"][0]
    assert PLANTED_FILE not in item["stdout_tail"]
    # the runner token too, read by the job from runner.toml itself
    config = w.root / "alice-runner" / "runner-config" / "runner.toml"
    script = f"print(open({str(config)!r}).read())\n"
    out = w.ok(pat, "run_script", {"project": w.ids["P"], "session_id": w.ids["S"],
                                   "language": "python", "script": script})
    assert "[redacted:MMO_RUNNER_TOKEN]" in out["stdout"]
    assert not [t for t in w.tokens if t in out["stdout"]]
    w.bodies.pop()  # the file it printed names the runner's own paths: its output, not MMO's


def test_no_token_or_credential_in_any_file_log_or_job_environment(world: World):
    w = world
    alice, bob = w.runners["alice"], w.runners["bob"]
    needles = {f"token#{i}": t for i, t in enumerate(w.tokens)}
    needles |= {"planted credentials.env value": PLANTED_FILE, "planted env secret": PLANTED_ENV}
    skip = {w.root / "serve-state" / "admin-token", alice.config_dir / "credentials.env",
            w.root / "alice-runner" / "config" / "credentials.env",
            w.root / "alice-runner" / "runner-config" / "runner.toml",
            w.root / "bob-runner" / "runner-config" / "runner.toml"}
    roots = [w.root / "serve-state", w.root / "serve-home", w.root / "alice-runner",
             w.root / "bob-runner", w.server.log_path]
    hits = _scan_files([r for r in roots if r.is_dir()], needles, skip)
    logs = [w.server.log_path, alice.log, bob.log]
    for log in logs:
        text = log.read_bytes()
        hits += [f"{n} in {log}" for n, v in needles.items() if v.encode() in text]
    for tool, body in w.bodies:
        hits += [f"{n} in a {tool} response" for n, v in needles.items()
                 if v.encode() in body and not body.startswith(b'{"success": true, "token"')]
    assert not hits, hits
    env = json.loads((w.code / ".git" / "env.json").read_text())
    values = "\n".join(env.values())
    for name, needle in needles.items():
        assert needle not in values, name
    # the config dir (runner.toml, credentials.env) and link variables stay with the runner
    assert not [k for k in env if k == "MMO_CONFIG_DIR" or k.startswith("MMO_RUNNER")
                or k.startswith("MMO_CALLER")], sorted(env)
    assert "ACME_LICENSE" not in env and "DEPLOY_PASSWORD" not in env and "PLAIN_COPY" not in env


def test_no_absolute_runner_path_in_any_response_body(world: World):
    w = world
    needles = {str(w.root), os.path.realpath(w.root), str(w.code), str(w.data),
               str(w.runners["alice"].state_dir), str(Path.home())}
    needles |= {n.replace("/", "\\/") for n in needles}
    assert len(w.bodies) > 30
    leaks = [(tool, n, body.decode()[max(0, body.find(n.encode()) - 300):
                                    body.find(n.encode()) + 200])
             for tool, body in w.bodies for n in needles if n.encode() in body]
    assert not leaks, leaks


def test_origin_of_another_site_is_refused(world: World):
    body, headers = stateless_request("tools/call", {"name": "list_projects", "arguments": {}})
    evil = post(world.url, world.pats["alice"], body, {**headers,
                                                       "Origin": "http://evil.example"})
    assert evil.status_code == 403
    own = post(world.url, world.pats["alice"], body, {**headers, "Origin": world.url})
    assert own.status_code == 200


def test_tokens_are_stored_as_sha256(world: World):
    stored = b"".join(p.read_bytes() for p in (world.root / "serve-state").rglob("*.json"))
    for token in (world.pats["alice"], world.pats["bob"], world.runners["alice"].token):
        assert hashlib.sha256(token.encode()).hexdigest().encode() in stored
        assert token.encode() not in stored


def test_restart_keeps_sessions_refs_goals_work_results_and_jobs(world: World,
                                                                  mmo_process_guard):
    """SIGTERM: exit 0; a new server on the same port and state dir knows everything, and
    the runner links up again by itself."""
    w, pat = world, world.pats["alice"]
    P, S, G, J = (w.ids[k] for k in ("P", "S", "G", "J"))
    before = {
        "projects": w.ok(pat, "list_projects", {}),
        "goal": w.ok(pat, "get_goal", {"goal_id": G}, dispatch=True),
        "result": w.ok(pat, "get_work_result_state", {"project": P, "session_id": S}),
        "job": w.ok(pat, "observe_jobs", {"items": [{"job_id": J}]})["items"][0]["status"],
    }
    admin_text = (w.root / "serve-state" / "admin-token").read_text()
    port = w.url.rsplit(":", 1)[1]
    assert w.server.stop() == 0
    w.server = start_serve_process(w.root / "serve-state", "--port", port,
                                   env=_env(w.root / "serve-home", project_codex(PROJECT_ROOT)))
    mmo_process_guard.allow(w.server.process.pid)  # the module's server, stopped at its end
    assert w.url.endswith(":" + port)
    assert (w.root / "serve-state" / "admin-token").read_text() == admin_text
    wait_until(lambda: _runners(w.url, w.admin).get("laptop", {}).get("online"), timeout=120,
               what="alice's runner to link up again")
    assert w.ok(pat, "list_projects", {}) == before["projects"]
    assert w.ok(pat, "get_goal", {"goal_id": G}, dispatch=True) == before["goal"]
    assert w.ok(pat, "get_work_result_state", {"project": P, "session_id": S}) == \
        before["result"]
    assert w.ok(pat, "observe_jobs", {"items": [{"job_id": J}]})["items"][0]["status"] == \
        before["job"]
    resumed = w.ok(pat, "work_on_project", {"project": w.ids["P_ref"],
                                            "session_id": w.ids["S_ref"], "instruction": "on"})
    assert (resumed["session_id"], resumed["session_ref"], resumed["continuation"]) == (
        S, w.ids["S_ref"], "resumed_explicitly")
    fresh = w.ok(pat, "work_on_project", {"project": P, "instruction": "new"})
    assert fresh["session_ref"] != w.ids["S_ref"] and fresh["session_id"] != S
    bob = w.tool(w.pats["bob"], "get_goal", {"goal_id": G}, dispatch=True)
    assert bob["output"]["error_kind"] == "goal_not_found"


def test_revoking_a_runner_token_drops_its_link(world: World):
    bob = world.runners["bob"]
    wait_until(lambda: _runners(world.url, world.admin)["bobbox"]["online"], timeout=120,
               what="bob's runner to link up after the restart")
    assert api(world.url, world.admin, "/api/tokens/revoke",
               {"token_id": bob.token_id}).status_code == 200
    wait_until(lambda: not _runners(world.url, world.admin)["bobbox"]["online"], timeout=60,
               what="bob's runner link to drop")
    _assert_link_refused(world, bob.token)
    # a refusal retrying cannot fix: the runner stops with exit 1 and one error line
    # instead of re-dialling forever (docs/project-tools.md, "Runner, link and sessions")
    assert bob.process.wait(timeout=60) == 1
    assert "runner stopped: the runner token was revoked (close 4401)" in bob.log.read_text()
    # the admin's readiness check lists online projects only; bob still sees his, offline
    admin_view = world.api_tool(world.admin, "list_projects", {})["output"]["projects"]
    assert "runner:bobbox:bobproj" not in {p["id"] for p in admin_view}
    [mine] = world.ok(world.pats["bob"], "list_projects", {})["projects"]
    assert (mine["id"], mine["online"]) == ("runner:bobbox:bobproj", False)


def test_a_line_longer_than_a_read_page_is_cut_at_256_kib(world: World):
    w, pat = world, world.pats["alice"]
    w.ok(pat, "edit_project_files", {"project": w.ids["D"], "changes": [
        {"kind": "create", "path": "oneline.txt", "content": "w" * (300 * 1024) + "\nend\n"}]})
    envelope = w.tool(pat, "read_files", {"project": w.ids["D"], "items": [
        {"path": "oneline.txt"}]})
    page = envelope["output"]["items"][0]["output"]
    # the one line that cannot fit is cut at the page bound and says so
    assert len(page["text"].encode()) == 256 * 1024 and page["line_truncated"] is True
    assert (page["end_line"], page["has_more"], page["next_cursor"]) == (1, True, 1)


def test_runner_exits_0_on_sigint_after_stopping_its_jobs(world: World):
    w, pat = world, world.pats["alice"]
    job = w.ok(pat, "run_script", {"project": w.ids["P"], "session_id": w.ids["S"],
                                   "language": "python", "script": "import time; time.sleep(600)",
                                   "timeout_secs": 900, "wait_secs": 0})["job_id"]
    pid = _job_pid(w, job)
    runner = w.runners["alice"]
    runner.process.send_signal(signal.SIGINT)
    assert runner.process.wait(timeout=60) == 0
    [record] = list(runner.state_dir.glob(f"runner/laptop/**/{job}/job.json"))
    assert json.loads(record.read_text())["status"] == "cancelled"
    from mmo_kernel.state.processes import process_matches

    saved = json.loads(record.read_text())
    assert not process_matches(pid, saved.get("start_token"))
    assert runner.token.encode() not in runner.log.read_bytes()


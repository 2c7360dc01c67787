"""Spec 12 from outside: a real ``mmo serve`` and a real ``mmo runner --config`` subprocess,
driven through stateless MCP requests to ``/mcp`` — external sessions, the runner process,
runner.toml, the project registry, the runner link across drops and restarts, and
``work_on_project`` / ``list_projects`` / ``read_session_handoff``.

One server and one runner serve the whole module (tests run in file order; a test that
restarts or replaces a process leaves the world linked again). The runner has no Codex
binary on ``PATH`` and no ``MMO_CODEX_BIN``: file and process tools must not need one.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from support.mcp_http import mcp_call
from support.runner_core import JOB_LAB
from support.serve import (
    RunnerLink,
    ServeProcess,
    admin_token,
    api,
    create_runner_token,
    create_user_and_pat,
    start_serve_process,
)
from support.waiting import wait_until

# one server (and runner) per module: its tests stay on one xdist worker
pytestmark = pytest.mark.xdist_group("test_runner_sessions")

MMO = Path(sys.executable).with_name("mmo")
DIRECT = {"list_projects", "work_on_project", "read_files", "edit_project_files", "run_script",
          "run_process", "observe_jobs", "wait_for_job_readiness", "review_changes",
          "finish_coding_task"}
SELECTOR_ERROR = "missing client_id required with path; call list_projects to find project ids"
SYSTEM_PYTHON = shutil.which("python3", path="/usr/bin:/bin")
AGENTS_TEXT = "# Agents\n" + "Keep calc.py pure — ü. " * 300  # > 4 KiB, multi-byte
WAIT = 90.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _no_codex_path() -> str:
    """The caller's PATH without any directory that holds a ``codex``."""
    dirs = [d for d in os.environ.get("PATH", "").split(os.pathsep)
            if d and not os.path.exists(os.path.join(d, "codex"))]
    return os.pathsep.join(dirs)


def _private(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(path, 0o700)
    return path


def _git(cwd: Path, *args: str, env: dict[str, str]) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, env=env)


@dataclass
class World:
    """The module's server, runner and what the tests share."""

    root: Path
    port: str
    serve_dir: Path
    env: dict[str, str]
    runner_env: dict[str, str]
    config: Path
    projects: Path
    server: ServeProcess | None = None
    runner: subprocess.Popen[bytes] | None = None
    runner_log: Path | None = None
    admin: str = ""
    pat: str = ""
    bob_pat: str = ""
    runner_token: str = ""
    bob_token: str = ""
    logs: list[Path] = field(default_factory=list)

    @property
    def url(self) -> str:
        assert self.server is not None
        return self.server.url

    # -- processes ----------------------------------------------------------------

    def start_server(self) -> None:
        self.server = start_serve_process(self.serve_dir, "--port", self.port, env=self.env)

    def start_runner(self, config: Path | None = None) -> subprocess.Popen[bytes]:
        log = self.root / f"runner-{len(self.logs)}.log"
        self.logs.append(log)
        with open(log, "wb") as stderr, open(log.with_suffix(".stdout"), "wb") as stdout:
            proc = subprocess.Popen([str(MMO), "runner", "--config", str(config or self.config)],
                                    stdin=subprocess.DEVNULL, stdout=stdout,
                                    stderr=stderr, env=self.runner_env)
        if config is None:
            self.runner, self.runner_log = proc, log
        return proc

    def runner_text(self) -> str:
        assert self.runner_log is not None
        return self.runner_log.read_text(encoding="utf-8", errors="replace")

    def runners(self) -> dict[str, dict[str, Any]]:
        reply = api(self.url, self.admin, "/api/runners", method="GET")
        assert reply.status_code == 200, reply.text
        return {r["client_id"]: r for r in reply.json()["runners"]}

    def wait_online(self, client_id: str = "laptop", online: bool = True) -> None:
        wait_until(lambda: bool(self.runners().get(client_id, {}).get("online")) is online,
                   timeout=WAIT, what=f"runner {client_id} online={online}")

    # -- tools --------------------------------------------------------------------

    def tool(self, name: str, arguments: dict[str, Any], pat: str | None = None,
             mmo: dict[str, Any] | None = None) -> dict[str, Any]:
        """One stateless ``tools/call``: direct tools by name, others via the dispatcher."""
        if name in DIRECT:
            params = {"name": name, "arguments": {**arguments, **({"_mmo": mmo} if mmo else {})}}
        else:
            params = {"name": "call_project_tool",
                      "arguments": {"tool": name, "arguments": arguments,
                                    **({"_mmo": mmo} if mmo else {})}}
        reply = mcp_call(self.url, pat or self.pat, "tools/call", params)
        assert reply.status_code == 200, reply.text
        result = reply.json()["result"]
        envelope = result["structuredContent"]
        assert result["isError"] is (not envelope["success"])
        assert json.loads(result["content"][0]["text"]) == envelope
        return envelope

    def ok(self, name: str, arguments: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        envelope = self.tool(name, arguments, **kwargs)
        assert envelope["success"] is True, envelope
        return envelope["output"]

    def fails(self, name: str, arguments: dict[str, Any], kind: str,
              **kwargs: Any) -> dict[str, Any]:
        envelope = self.tool(name, arguments, **kwargs)
        assert envelope["success"] is False, envelope
        assert envelope["output"]["error_kind"] == kind, envelope
        assert "\n" not in envelope["error"]
        return envelope

    def session(self, project: str = "runner:laptop:code") -> dict[str, Any]:
        return self.ok("work_on_project", {"project": project, "instruction": "test"})

    # -- the runner's own MMO state -----------------------------------------------

    def mmo(self, *args: str) -> Any:
        done = subprocess.run([str(MMO), *args], env=self.runner_env, capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        return json.loads(done.stdout)

    def stored(self, public_session_id: str) -> dict[str, Any]:
        """The session's ``session.json`` as stored (cheap to poll; ``record`` asks
        ``mmo session show``)."""
        raw = public_session_id.removeprefix("mmo_sess_")
        path = Path(self.runner_env["MMO_STATE_DIR"]) / "sessions" / raw / "session.json"
        return json.loads(path.read_text(encoding="utf-8"))

    def stored_status(self, public_session_id: str) -> str:
        return str(self.stored(public_session_id)["status"])

    def wait_status(self, public_session_id: str, status: str) -> None:
        wait_until(lambda: self.stored_status(public_session_id) == status, timeout=WAIT,
                   what=f"session {public_session_id} to be {status}")
        assert self.record(public_session_id)["status"] == status

    def record(self, public_session_id: str) -> dict[str, Any]:
        raw = public_session_id.removeprefix("mmo_sess_")
        return self.mmo("session", "show", raw, "--json")["session"]


def _project_file(registry: Path, name: str, text: str) -> Path:
    path = registry / f"{name}.toml"
    path.write_text(text, encoding="utf-8")
    return path


def _write_config(path: Path, *, url: str, token: str, registry: Path, roots: list[Path],
                  client_id: str = "laptop", owner: str = "alice", extra: str = "",
                  policy: str = "") -> Path:
    roots_text = ", ".join(f'"{r}"' for r in roots)
    path.write_text(
        f'server_url = "{url}"\ntoken = "{token}"\nclient_id = "{client_id}"\n'
        f'owner = "{owner}"\ntransport = "websocket"\nproject_registry_dir = "{registry}"\n'
        f'team_profile = "{JOB_LAB}"\noffline = true\n{extra}'
        f"[policy]\nallowed_roots = [{roots_text}]\n{policy}", encoding="utf-8")
    os.chmod(path, 0o600)
    return path


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("runner-sessions")
    home = _private(root / "home")
    base = {k: v for k, v in os.environ.items()
            if not k.startswith("MMO_") and k not in ("CODEX_HOME", "XDG_STATE_HOME",
                                                       "XDG_CONFIG_HOME")}
    base.update({"HOME": str(home), "PATH": _no_codex_path(), "GIT_CONFIG_NOSYSTEM": "1",
                 "GIT_CONFIG_GLOBAL": str(root / "gitconfig"), "GIT_AUTHOR_NAME": "T",
                 "GIT_AUTHOR_EMAIL": "t@localhost", "GIT_COMMITTER_NAME": "T",
                 "GIT_COMMITTER_EMAIL": "t@localhost"})
    (root / "gitconfig").write_text("", encoding="utf-8")
    env = {**base, "MMO_STATE_DIR": str(_private(root / "serve-state")),
           "MMO_CONFIG_DIR": str(_private(root / "serve-config"))}
    runner_env = {**base, "MMO_STATE_DIR": str(_private(root / "runner-state")),
                  "MMO_CONFIG_DIR": str(_private(root / "runner-config")),
                  "CODEX_HOME": str(_private(root / "codex-home"))}
    projects = _private(root / "projects")
    outside = _private(root / "outside")
    # allowed_roots names a symlink to the projects folder: realpath'd, projects inside pass
    (root / "roots-link").symlink_to(projects)
    code = _private(projects / "code")
    (code / "calc.py").write_text("def add(a, b):\n    return a + b\n", encoding="utf-8")
    (code / "AGENTS.md").write_text(AGENTS_TEXT, encoding="utf-8")
    (code / "pkg" / "sub").mkdir(parents=True)
    (code / "pkg" / "sub" / "x.txt").write_text("x\n", encoding="utf-8")
    _git(code, "init", "-q", "-b", "main", env=base)
    _git(code, "add", "-A", env=base)
    _git(code, "commit", "-q", "-m", "init", env=base)
    data = _private(projects / "data")
    (data / "AGENTS.md").write_text("Data only.\n", encoding="utf-8")
    (projects / "real-target").mkdir()
    (projects / "linked").symlink_to(projects / "real-target")
    _private(outside / "elsewhere")
    _private(projects / "twin-a")
    _private(projects / "twin-b")

    registry = _private(root / "projects.d")
    _project_file(registry, "code", f'id = "code"\npath = "{code}"\nname = "Code"\n'
                                    'description = "a git repo"\n')
    _project_file(registry, "data", f'id = "data"\npath = "{data}"\n')
    _project_file(registry, "broken", 'id = "broken"\npath = \n')
    _project_file(registry, "missing", f'id = "missing"\npath = "{projects / "nowhere"}"\n')
    _project_file(registry, "outside", f'id = "outside"\npath = "{outside / "elsewhere"}"\n')
    _project_file(registry, "symlinked", f'id = "symlinked"\npath = "{projects / "linked"}"\n')
    _project_file(registry, "twin-a", f'id = "twin"\npath = "{projects / "twin-a"}"\n')
    _project_file(registry, "twin-b", f'id = "twin"\npath = "{projects / "twin-b"}"\n')

    world = World(root=root, port=str(_free_port()), serve_dir=root / "serve-state" / "serve",
                  env=env, runner_env=runner_env, config=root / "runner.toml",
                  projects=projects)
    world.start_server()
    try:
        world.admin = admin_token(world.serve_dir)
        world.pat = create_user_and_pat(world.url, world.admin, "alice")
        world.bob_pat = create_user_and_pat(world.url, world.admin, "bob")
        world.runner_token = create_runner_token(world.url, world.admin, "alice", "laptop")
        world.bob_token = create_runner_token(world.url, world.admin, "bob", "bobbox")
        _write_config(world.config, url=world.url, token=world.runner_token, registry=registry,
                      roots=[root / "roots-link"],
                      policy=f'allow_raw_shell = false\nallowed_executables = ["/bin/echo"]\n'
                             f'python = "{SYSTEM_PYTHON}"\nmax_concurrent_jobs = 3\n')
        world.start_runner()
        world.wait_online()
        yield world
    finally:
        if world.runner is not None and world.runner.poll() is None:
            world.runner.send_signal(signal.SIGTERM)
            world.runner.wait(timeout=60)
        if world.server is not None:
            world.server.stop()


@pytest.fixture(autouse=True)
def _guard(mmo_process_guard, world: World) -> Iterator[None]:
    """Processes the module restarts on purpose (server, runner) outlive the test."""
    yield
    for proc in (world.runner, world.server.process if world.server else None):
        if proc is not None:
            mmo_process_guard.allow(proc.pid)


def _release(world: World, name: str) -> Path:
    return world.projects / "data" / f"{name}.release"


def _waiting_script(release: Path, marker: Path | None = None, code: int = 0) -> str:
    """A python job that (optionally) marks its start, then waits for ``release``."""
    lines = ["import os, time, sys"]
    if marker is not None:
        lines.append(f"open({str(marker)!r}, 'a').write('started\\n')")
    lines += [f"while not os.path.exists({str(release)!r}):", "    time.sleep(0.05)",
              f"sys.exit({code})"]
    return "\n".join(lines)


# ------------------------------------------------------------------ registry --


def test_registry_skips_each_bad_file_with_one_warning_and_never_sends_it(world):
    listed = world.ok("list_projects", {})
    assert [p["id"] for p in listed["projects"]] == ["runner:laptop:code", "runner:laptop:data"]
    assert listed["total_count"] == 2
    assert world.runners()["laptop"]["projects"] == ["runner:laptop:code", "runner:laptop:data"]
    saved = json.loads((world.serve_dir / "runners.json").read_text(encoding="utf-8"))
    assert "twin" not in json.dumps(saved) and "broken" not in json.dumps(saved)
    text = world.runner_text()
    warnings = [line for line in text.splitlines() if " WARNING " in line]
    for name in ("broken", "missing", "outside", "symlinked", "twin-a", "twin-b"):
        needle = f"skipping project file {world.root / 'projects.d' / name}.toml: "
        hits = [line for line in warnings if needle in line]
        assert len(hits) == 1, (name, warnings)
    # a rescan every 5 s does not repeat them
    assert sum("skipping project file" in line for line in warnings) == 6


def test_list_projects_fields(world):
    listed = world.ok("list_projects", {})
    code, data = listed["projects"]
    for project in (code, data):
        assert set(project) == {"id", "project_ref", "name", "description", "client_id",
                                "online", "vcs"}
        assert re.fullmatch(r"~p\d+", project["project_ref"])
        assert project["client_id"] == "laptop" and project["online"] is True
    assert (code["name"], code["description"], code["vcs"]) == ("Code", "a git repo", "git")
    assert (data["name"], data["description"], data["vcs"]) == ("data", "", "none")
    assert code["project_ref"] != data["project_ref"]
    assert str(world.root) not in json.dumps(listed)
    assert world.ok("list_projects", {}) == listed  # refs are stable


def test_a_project_file_added_while_running_is_listed_without_restart(world):
    fresh = _private(world.projects / "fresh")
    secret = world.root / "outside" / "secret.md"
    secret.write_text("not for hosts\n", encoding="utf-8")
    (fresh / "AGENTS.md").symlink_to(secret)  # never followed
    path = _project_file(world.root / "projects.d", "fresh",
                         f'id = "fresh"\npath = "{fresh}"\ndescription = "new"\n')
    try:
        listed = wait_until(lambda: next((p for p in world.ok("list_projects", {})["projects"]
                                          if p["id"] == "runner:laptop:fresh"), None),
                            timeout=WAIT, what="the rescanned project")
        assert listed["description"] == "new" and listed["vcs"] == "none"
        started = world.session("runner:laptop:fresh")
        assert "instructions" not in started and "instructions_truncated" not in started
        assert world.runner.poll() is None
    finally:
        path.unlink()  # gone again at the next rescan: later tests start from the usual list
        wait_until(lambda: "runner:laptop:fresh" not in _refs(world), timeout=WAIT,
                   what="the removed project to be dropped at the rescan")


# ---------------------------------------------------------- external session --


def test_a_project_session_is_an_external_mmo_session_without_codex(world):
    started = world.session()
    record = world.record(started["session_id"])
    assert record["session_kind"] == "external"
    assert Path(record["cwd"]) == (world.projects / "code").resolve()
    assert record["status"] == "running"
    assert record.get("profile_id") == "job-lab" or "job-lab" in json.dumps(
        {k: record.get(k) for k in ("profile", "profile_id", "profile_path")})
    # no worker homes, gateway or Codex until the first team_spawn
    assert not record.get("homes") and record.get("gateway_url") is None
    assert record.get("team_materialized_at") is None
    state = Path(world.runner_env["MMO_STATE_DIR"])
    homes = list((state / "sessions").glob(f"*{record['session_id']}*/homes/*"))
    assert homes == []
    listed = world.mmo("sessions", "--json")["sessions"]
    mine = next(s for s in listed if s["session_id"] == record["session_id"])
    assert (mine["status"], mine["session_kind"], mine["profile_id"]) == (
        "running", "external", "job-lab")
    assert Path(mine["cwd"]) == (world.projects / "code").resolve()
    # file and process tools work with no codex on PATH
    sid = started["session_id"]
    read = world.ok("read_files", {"project": "runner:laptop:code", "session_id": sid,
                                   "items": [{"path": "calc.py"}]})
    assert read["items"][0]["output"]["text"].startswith("def add")
    ran = world.ok("run_script", {"project": "runner:laptop:code", "session_id": sid,
                                  "language": "python", "script": "import calc; "
                                  "print(calc.add(2, 3))"})
    assert ran["status"] == "completed" and ran["stdout"].strip() == "5"
    assert world.stored(sid).get("team_materialized_at") is None


# ------------------------------------------------------------ work_on_project --


def _refs(world: World) -> dict[str, str]:
    return {p["id"]: p["project_ref"] for p in world.ok("list_projects", {})["projects"]}


def test_work_on_project_selects_by_id_ref_and_client_path(world):
    refs = _refs(world)
    by_id = world.ok("work_on_project", {"project": "runner:laptop:code", "instruction": "a"})
    assert set(by_id) == {"project_id", "project_ref", "session_id", "session_ref",
                          "continuation", "instructions", "instructions_truncated"}
    assert by_id["project_id"] == "runner:laptop:code"
    assert by_id["project_ref"] == refs["runner:laptop:code"]
    assert by_id["continuation"] == "started"
    assert re.fullmatch(r"mmo_sess_\S+", by_id["session_id"])
    assert re.fullmatch(r"~s\d+", by_id["session_ref"])
    by_ref = world.ok("work_on_project", {"project": refs["runner:laptop:data"],
                                          "instruction": "b"})
    assert by_ref["project_id"] == "runner:laptop:data" and by_ref["continuation"] == "started"
    inside = world.projects / "code" / "pkg" / "sub"
    by_path = world.ok("work_on_project", {"client_id": "laptop", "path": str(inside),
                                           "instruction": "c"})
    assert by_path["project_id"] == "runner:laptop:code"
    assert by_path["continuation"] == "started"
    # every call without session_id is a NEW session, never the most recent one
    ids = {by_id["session_id"], by_ref["session_id"], by_path["session_id"]}
    refs_issued = {by_id["session_ref"], by_ref["session_ref"], by_path["session_ref"]}
    assert len(ids) == 3 and len(refs_issued) == 3
    again = world.ok("work_on_project", {"project": "runner:laptop:code", "instruction": "a"},
                     mmo={"record": by_id["session_id"]})  # bookkeeping only
    assert again["session_id"] not in ids and again["continuation"] == "started"
    # nor by a client's window/session hint
    reply = mcp_call(world.url, world.pat, "tools/call", {
        "name": "work_on_project", "_meta": {"openai/session": by_id["session_id"]},
        "arguments": {"project": "runner:laptop:code", "instruction": "a"}})
    hinted = reply.json()["result"]["structuredContent"]["output"]
    assert hinted["continuation"] == "started"
    assert hinted["session_id"] not in ids | {again["session_id"]}
    # a path outside every project of that runner: not found, path not echoed
    miss = world.fails("work_on_project", {"client_id": "laptop", "path": str(world.root),
                                           "instruction": "d"}, "project_not_found")
    assert str(world.root) not in json.dumps(miss)


def test_a_raw_path_without_client_id_is_refused_without_echo(world):
    secret_path = str(world.projects / "code" / "pkg" / "very-private-dir")
    envelope = world.fails("work_on_project", {"path": secret_path, "instruction": "x"},
                           "invalid_project_selector")
    assert envelope["error"] == SELECTOR_ERROR
    assert envelope["output"]["state_changed"] is False
    call = envelope["output"]["suggested_call"]
    assert call["tool"] == "list_projects" and call["arguments"] == {}
    assert call["follow_up_kind"] == "mechanically_followable"
    assert "very-private-dir" not in json.dumps(envelope)
    assert str(world.root) not in json.dumps(envelope)
    # following it as given works
    assert world.tool(call["tool"], call["arguments"])["success"] is True


def test_resume_with_session_id_is_exactly_that_session(world):
    first = world.ok("work_on_project", {"project": "runner:laptop:code", "instruction": "one"})
    newer = world.ok("work_on_project", {"project": "runner:laptop:code", "instruction": "two"})
    for handle in (first["session_id"], first["session_ref"]):
        resumed = world.ok("work_on_project", {"project": "runner:laptop:code",
                                               "session_id": handle, "instruction": "more"})
        assert resumed["continuation"] == "resumed_explicitly"
        assert resumed["session_id"] == first["session_id"] != newer["session_id"]
        assert resumed["session_ref"] == first["session_ref"]
        assert resumed["project_ref"] == first["project_ref"]
    # a session of another project or an unknown one: session_not_found
    world.fails("work_on_project", {"project": "runner:laptop:data",
                                    "session_id": first["session_id"], "instruction": "x"},
                "session_not_found")
    world.fails("work_on_project", {"project": "runner:laptop:code",
                                    "session_id": "mmo_sess_nope", "instruction": "x"},
                "session_not_found")
    assert world.stored_status(first["session_id"]) == "running"


def test_agents_md_is_returned_up_to_4_kib(world):
    code = world.session("runner:laptop:code")
    assert code["instructions_truncated"] is True
    cut = code["instructions"].encode("utf-8")
    assert 4096 - 4 < len(cut) <= 4096 and AGENTS_TEXT.startswith(code["instructions"])
    data = world.session("runner:laptop:data")
    assert data["instructions"] == "Data only.\n" and data["instructions_truncated"] is False


def test_refs_and_sessions_are_per_user(world):
    """bob's runner (a raw link here) has its own project; bob's refs are his own and
    alice's ids and refs do not exist for him."""
    alice = world.session()
    project = {"id": "b1", "name": "b1", "description": "", "vcs": "none"}
    with RunnerLink(world.url.replace("http", "ws", 1) + "/api/runners/ws", world.bob_token,
                    "bobbox", "bob", projects=[project]) as link:
        listed = world.ok("list_projects", {}, pat=world.bob_pat)
        assert [p["id"] for p in listed["projects"]] == ["runner:bobbox:b1"]
        bob_ref = listed["projects"][0]["project_ref"]
        assert "runner:bobbox:b1" not in _refs(world)
        world.fails("work_on_project", {"project": "runner:laptop:code", "instruction": "x"},
                    "project_not_found", pat=world.bob_pat)
        world.fails("read_session_handoff", {"project": bob_ref,
                                             "session_id": alice["session_ref"],
                                             "include_workspace": False},
                    "session_not_found", pat=world.bob_pat)
        world.fails("work_on_project", {"project": bob_ref, "session_id": alice["session_id"],
                                        "instruction": "x"}, "session_not_found",
                    pat=world.bob_pat)
        # bob's ref reaches bob's runner with its local id
        result: dict[str, Any] = {}
        thread = threading.Thread(target=lambda: result.update(world.tool(
            "work_on_project", {"project": bob_ref, "instruction": "hi"}, pat=world.bob_pat)))
        thread.start()
        call = link.receive("call")
        assert call["tool"] == "work_on_project" and call["arguments"]["project"] == "b1"
        assert call["user"] == "bob"
        link.reply(call, {"success": True, "output": {"session_id": "bob-session-1"}})
        thread.join(WAIT)
        assert result["output"]["session_id"] == "mmo_sess_bob-session-1"
        assert result["output"]["project_ref"] == bob_ref
    wait_until(lambda: not world.runners()["bobbox"]["online"], timeout=WAIT,
               what="bob's link to close")


# --------------------------------------------------------------------- handoff --


def test_read_session_handoff_reports_every_field(world):
    started = world.ok("work_on_project", {
        "project": "runner:laptop:code",
        "instruction": "Fix calc.py\npassword: hunter2-not-for-the-brief\nthen review"})
    sid, ref = started["session_id"], started["session_ref"]
    args = {"project": "runner:laptop:code", "session_id": ref, "include_workspace": False}
    bare = world.ok("read_session_handoff", args)
    assert set(bare) == {"session_id", "session_ref", "project_ref", "status", "instruction",
                         "handoff_brief", "recent_activity", "goal_context"}
    assert (bare["session_id"], bare["session_ref"]) == (sid, ref)
    assert bare["project_ref"] == started["project_ref"]
    assert bare["status"] == "running"
    assert bare["goal_context"] is None and bare["recent_activity"] == []
    assert "hunter2" not in json.dumps(bare)
    assert bare["instruction"].startswith("Fix calc.py\n")
    assert sid in bare["handoff_brief"] and len(bare["handoff_brief"].encode()) <= 8192

    # recent_activity: the last 20 recorded calls
    for _ in range(21):
        world.ok("list_projects", {}, mmo={"record": ref})
    world.ok("read_files", {"project": "runner:laptop:code", "session_id": sid,
                            "items": [{"path": "calc.py"}]}, mmo={"record": sid})
    recent = world.ok("read_session_handoff", args)["recent_activity"]
    assert len(recent) == 20
    assert [e["tool"] for e in recent] == ["list_projects"] * 19 + ["read_files"]
    last = recent[-1]
    assert (last["success"], last["business_session"]) == (True, sid)
    assert isinstance(last["time_unix_ms"], int) and recent[0]["business_session"] is None

    goal = world.ok("prepare_goal_workflow", {
        "session_id": ref, "title": "Repair", "objective": "calc works",
        "completion_conditions": ["tests pass"], "idempotency_key": "k1",
        "steps": [{"id": "s1", "title": "read"}, {"id": "s2", "title": "fix"}]})["goal"]
    (world.projects / "code" / "scratch.txt").write_text("dirty\n", encoding="utf-8")
    try:
        full = world.ok("read_session_handoff", {**args, "include_workspace": True})
    finally:
        (world.projects / "code" / "scratch.txt").unlink()
    brief = full["goal_context"]["goal"]
    assert set(brief) == {"goal_id", "title", "revision", "lifecycle", "plan"}
    assert (brief["goal_id"], brief["title"], brief["revision"], brief["lifecycle"]) == (
        goal["summary"]["goal_id"], "Repair", 1, "active")
    assert brief["plan"] == {"current_step_id": None, "steps": {
        "items": [{"id": "s1", "title": "read", "status": "pending"},
                  {"id": "s2", "title": "fix", "status": "pending"}],
        "total_count": 2, "returned_count": 2}}
    assert full["workspace"]["branch"] == "main"
    assert full["workspace"]["dirty_paths"] == ["scratch.txt"]
    assert str(world.root) not in json.dumps(full)


# ----------------------------------------------------------------- runner.toml --


def _config_variant(world: World, name: str, **kwargs: Any) -> Path:
    options: dict[str, Any] = {"url": world.url, "token": world.runner_token,
                               "registry": world.root / "projects.d",
                               "roots": [world.projects]}
    options.update(kwargs)
    return _write_config(world.root / f"{name}.toml", **options)


def _exits(world: World, configs: dict[str, Path]) -> dict[str, tuple[int, str]]:
    """Start one runner per config at once; each one's (exit code, log) once it exited."""
    started = {name: (world.start_runner(path), world.logs[-1])
               for name, path in configs.items()}
    return {name: (proc.wait(timeout=WAIT),
                   log.read_text(encoding="utf-8", errors="replace"))
            for name, (proc, log) in started.items()}


def test_runner_toml_refusals_exit_1_with_one_line(world):
    mode = _config_variant(world, "open")
    os.chmod(mode, 0o644)
    grpc = _config_variant(world, "grpc")
    grpc.write_text(grpc.read_text().replace('"websocket"', '"grpc"'), encoding="utf-8")
    results = _exits(world, {
        "mode": mode, "grpc": grpc,
        "insecure": _config_variant(world, "insecure", url="http://mmo-test-host.invalid:9"),
        "client_id": _config_variant(world, "wrong-client", client_id="someone-else"),
        "owner": _config_variant(world, "wrong-owner", owner="bob"),
        "token": _config_variant(world, "bad-token", token="mmo_rt_" + "x" * 40)})
    for name, (code, text) in results.items():
        assert code == 1, (name, text)
        assert world.runner_token not in text, name
    for name in ("mode", "grpc", "insecure"):  # refused before anything starts: one line
        assert len(results[name][1].strip().splitlines()) == 1, results[name]
    assert results["mode"][1].strip().endswith("runner config must not be readable by others")
    assert "invalid value for 'transport'" in results["grpc"][1]
    assert "allow_insecure_transport" in results["insecure"][1]
    # the server refused the link: client_id/owner not the token's (4403), bad token (401)
    for name in ("client_id", "owner"):
        assert "client_id or owner does not match the runner token" in results[name][1]
    assert "refused the runner token (HTTP 401)" in results["token"][1]
    # none of the refused links displaced the real runner
    assert world.runners()["laptop"]["online"] and world.runner.poll() is None
    assert "someone-else" not in world.runners()


def test_allow_insecure_transport_lets_it_dial_and_it_redials_forever(world):
    proc = world.start_runner(_config_variant(world, "insecure-ok",
                                              url="http://mmo-test-host.invalid:9",
                                              extra="allow_insecure_transport = true\n"))
    log = world.logs[-1]
    try:
        wait_until(lambda: log.read_text().count("reconnecting in") >= 3, timeout=WAIT,
                   what="the runner to re-dial")
        assert proc.poll() is None
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=WAIT) == 0
    assert world.runner_token not in log.read_text()


def test_policy_keys_hold_for_scripts_and_processes(world):
    sid = world.session("runner:laptop:data")["session_id"]
    base = {"project": "runner:laptop:data", "session_id": sid}
    denied = world.fails("run_script", {**base, "language": "shell", "script": "echo hi"},
                         "policy_denied")
    assert denied["output"]["state_changed"] is False
    world.fails("run_process", {**base, "executable": "/bin/cat", "args": [],
                                "timeout_secs": 10}, "policy_denied")
    echoed = world.ok("run_process", {**base, "executable": "/bin/echo", "args": ["hello"],
                                      "timeout_secs": 10})
    assert echoed["stdout"] == "hello\n"
    # policy.python is the interpreter of python scripts (here: not the runner's venv)
    which = world.ok("run_script", {**base, "language": "python", "script":
                                    "import sys; print(sys.prefix == sys.base_prefix)"})
    assert which["stdout"].strip() == "True"  # /usr/bin/python3, not this venv's python
    # max_concurrent_jobs = 3
    release = _release(world, "limit")
    jobs = [world.ok("run_script", {**base, "language": "python", "wait_secs": 0,
                                    "script": _waiting_script(release)})["job_id"]
            for _ in range(3)]
    try:
        over = world.fails("run_script", {**base, "language": "python", "wait_secs": 0,
                                          "script": "print(1)"}, "job_limit_reached")
        assert over["output"]["state_changed"] is False
    finally:
        release.write_text("", encoding="utf-8")
    ready = world.ok("wait_for_job_readiness", {"job_ids": jobs, "mode": "all",
                                                "wait_secs": 25})
    assert sorted(ready["ready_job_ids"]) == sorted(jobs)


def test_offline_binds_the_team_to_local_scripted(world):
    sid = world.session()["session_id"]
    agents = world.ok("team_agents", {"session_id": sid})["agents"]
    assert agents and all(a["route"].startswith("local_scripted") for a in agents), agents
    assert world.stored(sid)["profile_id"] == "job-lab"  # team_profile


# ------------------------------------------------------------------ runner link --


def _job_record(world: World, job_id: str) -> dict[str, Any]:
    state = Path(world.runner_env["MMO_STATE_DIR"]) / "runner" / "laptop"
    path = next(state.glob(f"*/{job_id}/job.json"))
    return json.loads(path.read_text(encoding="utf-8"))


def _observe(world: World, job_id: str) -> dict[str, Any]:
    items = world.ok("observe_jobs", {"items": [{"job_id": job_id}]})["items"]
    assert [i["job_id"] for i in items] == [job_id]
    return items[0]


def _ws_url(world: World) -> str:
    return world.url.replace("http://", "ws://", 1) + "/api/runners/ws"


def test_a_job_survives_a_killed_server_and_is_observed_after_reconnect(world):
    refs = _refs(world)
    started = world.session("runner:laptop:data")
    sid = started["session_id"]
    release = _release(world, "midjob")
    job = world.ok("run_script", {"project": "runner:laptop:data", "session_id": sid,
                                  "language": "python", "wait_secs": 0,
                                  "script": _waiting_script(release, code=3)})
    assert job["execution_state"] == "pending" and job["status"] == "running"
    job_id = job["job_id"]
    early_release = _release(world, "early")
    early = world.ok("run_script", {"project": "runner:laptop:data", "session_id": sid,
                                    "language": "python", "wait_secs": 0,
                                    "script": _waiting_script(early_release, code=0)})["job_id"]

    world.server.process.kill()  # SIGKILL: no goodbye on the link
    world.server.process.wait()
    world.wait_status(sid, "suspended")  # while unlinked
    early_release.write_text("", encoding="utf-8")  # this one ends while nobody listens
    wait_until(lambda: _job_record(world, early)["status"] == "completed", timeout=WAIT,
               what="the early job to end on the runner")
    world.start_server()  # same port, same state dir
    world.wait_online()
    saved = json.loads((world.serve_dir / "runners.json").read_text(encoding="utf-8"))
    assert job_id in saved["runners"]["laptop"]["live_job_ids"]  # re-announced in hello
    assert world.runner.poll() is None
    world.wait_status(sid, "running")

    # refs are stable across the restart
    assert _refs(world) == refs
    resumed = world.ok("work_on_project", {"project": started["project_ref"],
                                           "session_id": started["session_ref"],
                                           "instruction": "again"})
    assert (resumed["session_id"], resumed["session_ref"]) == (sid, started["session_ref"])

    seen = _observe(world, job_id)
    assert seen["status"] == "running" and seen["terminal"] is False
    ended = _observe(world, early)
    assert (ended["status"], ended["exit_code"]) == ("completed", 0)
    release.write_text("", encoding="utf-8")
    ready = world.ok("wait_for_job_readiness", {"job_ids": [job_id], "mode": "all",
                                                "wait_secs": 25})
    assert ready == {"ready_job_ids": [job_id], "pending_job_ids": [], "timed_out": False}
    done = _observe(world, job_id)
    assert (done["status"], done["exit_code"], done["terminal"]) == ("failed", 3, True)


def test_a_call_in_flight_when_its_link_drops_fails_unknown_and_is_never_resent(world):
    sid = world.session("runner:laptop:data")["session_id"]
    marker = world.root / "inflight.marker"
    release = _release(world, "inflight")
    result: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: result.update(world.tool("run_script", {
        "project": "runner:laptop:data", "session_id": sid, "language": "python",
        "wait_secs": 20, "script": _waiting_script(release, marker)})))
    thread.start()
    wait_until(marker.exists, timeout=WAIT, what="the script to start")
    projects = world.runners()["laptop"]
    assert projects["online"]
    # a second link for the same client_id replaces the first (close 4409)
    first = world.runner
    with RunnerLink(_ws_url(world), world.runner_token, "laptop", "alice",
                    projects=[{"id": "data", "name": "data", "description": "",
                               "vcs": "none"}]) as link:
        assert link.welcome == {"type": "welcome", "heartbeat_secs": 15}
        thread.join(WAIT)
        envelope = result
        assert envelope["success"] is False, envelope
        assert envelope["output"]["error_kind"] == "runner_disconnected"
        assert envelope["output"]["state_changed"] == "unknown"
        assert first.wait(timeout=WAIT) == 1  # the replaced runner stops
        assert "another runner link took over this client_id" in world.runner_text()
        # the next call on the new link is the next call: nothing was re-sent
        reader: dict[str, Any] = {}
        reading = threading.Thread(target=lambda: reader.update(world.tool("read_files", {
            "project": "runner:laptop:data", "items": [{"path": "AGENTS.md"}]})))
        reading.start()
        call = link.receive("call")
        assert call["tool"] == "read_files"
        link.reply(call, {"success": False, "output": {"error_kind": "file_not_found",
                                                       "state_changed": False},
                          "error": "file not found: AGENTS.md"})
        reading.join(WAIT)
        assert reader["output"]["error_kind"] == "file_not_found"
        # a real runner dials in again and replaces the raw link in turn
        world.start_runner()
        from websockets.exceptions import ConnectionClosed

        with pytest.raises(ConnectionClosed) as closed:
            while True:
                link.receive("never")
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 4409
    world.wait_online()
    assert marker.read_text() == "started\n"  # run once, never re-sent
    release.write_text("", encoding="utf-8")


def test_a_second_real_runner_takes_over_the_sessions_and_jobs_of_the_first(world):
    """Started with the same runner.toml while the first still runs, it replaces the
    first (4409: the first stops its jobs and exits 1) and keeps hosting the sessions:
    the first's shutdown must not suspend them, and it reports the first's job as asked
    for (``cancelled``), never ``job_not_found``."""
    sid = world.session("runner:laptop:data")["session_id"]
    ready = world.root / "slow-term.ready"
    script = "\n".join([  # takes its time to stop: the first runner's shutdown lasts
        "import signal, sys, time",
        "def bye(*_):", "    time.sleep(2)", "    sys.exit(0)",
        "signal.signal(signal.SIGTERM, bye)",
        f"open({str(ready)!r}, 'w').write('ok')",
        "while True: time.sleep(0.05)"])
    job_id = world.ok("run_script", {"project": "runner:laptop:data", "session_id": sid,
                                     "language": "python", "wait_secs": 0,
                                     "script": script})["job_id"]
    wait_until(ready.exists, timeout=WAIT, what="the job to set its SIGTERM handler")
    first = world.runner
    world.start_runner()
    assert first.wait(timeout=WAIT) == 1
    assert _job_record(world, job_id)["status"] == "cancelled"
    assert world.runner.poll() is None and world.runners()["laptop"]["online"]
    assert world.record(sid)["status"] == "running"  # hosted by the second runner
    seen = _observe(world, job_id)
    assert (seen["status"], seen["terminal"]) == ("cancelled", True), seen


def test_an_offline_runner_is_unavailable_and_a_restarted_one_reports_lost(world):
    sid = world.session("runner:laptop:data")["session_id"]
    job_id = world.ok("run_script", {"project": "runner:laptop:data", "session_id": sid,
                                     "language": "python", "wait_secs": 0,
                                     "script": _waiting_script(_release(world, "never"))}
                      )["job_id"]
    pid = _job_record(world, job_id)["pid"]
    world.runner.kill()
    world.runner.wait()
    world.wait_online(online=False)
    assert world.record(sid)["status"] == "suspended"  # its host is gone
    for name, args in (("observe_jobs", {"items": [{"job_id": job_id}]}),
                       ("run_script", {"project": "runner:laptop:data", "session_id": sid,
                                       "language": "python", "script": "print(1)"})):
        gone = world.fails(name, args, "runner_unavailable")
        assert gone["output"]["state_changed"] is False
    offline = [p for p in world.ok("list_projects", {})["projects"]
               if p["id"] in ("runner:laptop:code", "runner:laptop:data")]
    assert len(offline) == 2 and not any(p["online"] for p in offline)
    handoff = world.ok("read_session_handoff", {"project": "runner:laptop:data",
                                                "session_id": sid, "include_workspace": True})
    assert handoff["status"] == "suspended"
    assert os.path.exists(f"/proc/{pid}")  # the orphan still runs ...
    world.start_runner()
    world.wait_online()
    lost = _observe(world, job_id)
    assert (lost["status"], lost["terminal"]) == ("lost", True)
    from mmo_kernel.state.processes import process_matches

    saved = _job_record(world, job_id)
    assert not process_matches(saved["pid"], saved.get("start_token"))  # ... not any more
    world.wait_status(sid, "running")  # hosted by the new runner


def test_sigterm_stops_process_jobs_by_group_and_exits_0(world):
    sid = world.session("runner:laptop:data")["session_id"]
    pids = world.root / "term.pids"
    marker = world.root / "term.marker"
    script = "\n".join([
        "import os, signal, subprocess, sys, time",
        "child = subprocess.Popen(['sleep', '600'])",
        f"open({str(pids)!r}, 'w').write(str(child.pid))",
        "def bye(*_):",
        f"    open({str(marker)!r}, 'w').write('term')",
        "    sys.exit(0)",
        "signal.signal(signal.SIGTERM, bye)",
        "while True: time.sleep(0.05)"])
    job_id = world.ok("run_script", {"project": "runner:laptop:data", "session_id": sid,
                                     "language": "python", "wait_secs": 0,
                                     "script": script})["job_id"]
    wait_until(lambda: pids.exists() and pids.read_text(), timeout=WAIT,
               what="the job's child to start")
    child = int(pids.read_text())
    world.runner.send_signal(signal.SIGTERM)
    assert world.runner.wait(timeout=WAIT) == 0
    text = world.runner_text()
    assert "runner stopped" in text and world.runner_token not in text
    assert world.runner_log.with_suffix(".stdout").read_bytes() == b""  # logs go to stderr
    assert marker.read_text() == "term"  # the job got SIGTERM ...
    wait_until(lambda: not os.path.exists(f"/proc/{child}")
               or "Z" in Path(f"/proc/{child}/stat").read_text().split()[2], timeout=WAIT,
               what="the job's child (same group) to end")
    assert _job_record(world, job_id)["status"] == "cancelled"
    assert world.record(sid)["status"] == "suspended"

"""A real ``mmo serve`` subprocess with real ``mmo runner`` subprocesses for one user, for
end-to-end checks of the project tools through ``POST /mcp`` (spec 12).

    stack = Stack.start(tmp_root, runners={"laptop": {...}})
    out = stack.ok("read_files", {"project": stack.project("laptop", "data"), ...})

Each runner gets its own ``MMO_STATE_DIR``/``MMO_CONFIG_DIR`` (another machine), its own
``runner.toml`` and ``projects.d``. ``stop()`` stops the runners (SIGTERM: they stop their
process jobs), their gateways and the server.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mmo_kernel.testing import DUMMY_AUTH
from support.mcp_http import UI_CAPABILITIES, mcp_call
from support.runner_core import JOB_LAB, register_project, write_runner_config
from support.serve import (
    ServeProcess,
    admin_token,
    api,
    create_runner_token,
    create_user_and_pat,
    start_serve_process,
)
from support.waiting import wait_until

MMO = Path(sys.executable).with_name("mmo")
STANDIN = Path(sys.executable).with_name("mmo-codex-standin")


def private(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o700)
    return path


@dataclass
class RunnerProc:
    client_id: str
    config: Path
    env: dict[str, str]
    process: subprocess.Popen[bytes]
    log: Path
    projects: dict[str, Path] = field(default_factory=dict)

    def stderr(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")


@dataclass
class Stack:
    root: Path
    server: ServeProcess
    admin: str
    pat: str
    runners: dict[str, RunnerProc] = field(default_factory=dict)

    @classmethod
    def start(cls, root: Path, user: str = "alice") -> Stack:
        server = start_serve_process(root / "serve", env=base_env(root / "serve-env"))
        admin = admin_token(root / "serve")
        pat = create_user_and_pat(server.url, admin, user)
        return cls(root=root, server=server, admin=admin, pat=pat)

    @property
    def url(self) -> str:
        return self.server.url

    def add_runner(self, client_id: str, projects: dict[str, dict[str, Any]], *,
                   user: str = "alice", extra: str = "", policy: str = "",
                   team_profile: Path = JOB_LAB,
                   env_extra: dict[str, str] | None = None) -> RunnerProc:
        """Start ``mmo runner`` for ``client_id`` with projects ``{id: {"git": bool}}``
        under ``root/<client_id>/projects``; waits until the server lists them online."""
        home = private(self.root / client_id)
        env = {**base_env(home / "env"), **(env_extra or {})}
        token = create_runner_token(self.url, self.admin, user, client_id)
        projects_dir = home / "projects"
        config = write_runner_config(home / "runner", server_url=self.url, token=token,
                                     client_id=client_id, owner=user,
                                     allowed_roots=[projects_dir], team_profile=str(team_profile),
                                     extra=extra)
        if policy:
            config.write_text(config.read_text() + policy)
        roots: dict[str, Path] = {}
        for pid, spec in projects.items():
            root = projects_dir / pid
            register_project(config, pid, root, name=pid.title(), description=f"{pid} project")
            if spec.get("git"):
                git_init(root)
            roots[pid] = root.resolve()
        log = home / "runner.log"
        with open(log, "wb") as stderr:
            process = subprocess.Popen([str(MMO), "runner", "--config", str(config)],
                                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                       stderr=stderr, env=env)
        runner = RunnerProc(client_id, config, env, process, log, roots)
        self.runners[client_id] = runner
        expected = sorted(f"runner:{client_id}:{p}" for p in projects)
        wait_until(lambda: self._online(client_id, expected), timeout=60,
                   what=f"runner {client_id} to link up")
        return runner

    def _online(self, client_id: str, expected: list[str]) -> bool:
        reply = api(self.url, self.admin, "/api/runners", method="GET")
        for r in reply.json()["runners"]:
            if r["client_id"] == client_id and r["online"] and sorted(r["projects"]) == expected:
                return True
        return False

    def project(self, client_id: str, pid: str) -> str:
        return f"runner:{client_id}:{pid}"

    def root_of(self, client_id: str, pid: str) -> Path:
        return self.runners[client_id].projects[pid]

    # -- MCP calls ---------------------------------------------------------------------
    def call(self, tool: str, arguments: dict[str, Any], *, direct: bool = False,
             token: str | None = None, mmo: dict[str, Any] | None = None,
             ui: bool = False) -> dict[str, Any]:
        """The envelope of one ``tools/call`` (dispatched unless ``direct``)."""
        if direct:
            params = {"name": tool, "arguments": {**arguments, **({"_mmo": mmo} if mmo else {})}}
        else:
            inner: dict[str, Any] = {"tool": tool, "arguments": arguments}
            if mmo:
                inner["_mmo"] = mmo
            params = {"name": "call_project_tool", "arguments": inner}
        reply = mcp_call(self.url, token or self.pat, "tools/call", params,
                         capabilities=UI_CAPABILITIES if ui else None)
        assert reply.status_code == 200, reply.text
        result = reply.json()["result"]
        assert result["isError"] is (not result["structuredContent"]["success"])
        return result["structuredContent"]

    def ok(self, tool: str, arguments: dict[str, Any], **kw: Any) -> dict[str, Any]:
        envelope = self.call(tool, arguments, **kw)
        assert envelope["success"] is True, envelope
        return envelope["output"]

    def fails(self, tool: str, arguments: dict[str, Any], kind: str, **kw: Any) -> dict[str, Any]:
        envelope = self.call(tool, arguments, **kw)
        assert envelope["success"] is False, envelope
        assert envelope["output"]["error_kind"] == kind, envelope
        assert "\n" not in envelope["error"], envelope
        return envelope

    def session(self, project: str, instruction: str = "work") -> str:
        return self.ok("work_on_project", {"project": project,
                                           "instruction": instruction})["session_id"]

    def stop(self) -> None:
        for runner in self.runners.values():
            if runner.process.poll() is None:
                runner.process.send_signal(signal.SIGTERM)
        for runner in self.runners.values():
            try:
                runner.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                runner.process.kill()
                runner.process.wait()
            subprocess.run([str(MMO), "gateway", "stop"], env=runner.env,
                           stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
        self.server.stop()


def base_env(root: Path) -> dict[str, str]:
    """The caller's environment with private MMO dirs and the Codex stand-in."""
    env = dict(os.environ)
    for key in ("MMO_STATE_DIR", "MMO_CONFIG_DIR", "CODEX_HOME", "HOME", "XDG_STATE_HOME",
                "XDG_CONFIG_HOME"):
        env[key] = str(private(root / key.lower()))
    auth = Path(env["CODEX_HOME"]) / "auth.json"
    auth.write_text(DUMMY_AUTH, encoding="utf-8")
    os.chmod(auth, 0o600)
    env["MMO_CODEX_BIN"] = str(STANDIN)
    env.pop("MMO_TEST_PROCESS_GUARD", None)
    return env


def git(root: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@x"}
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True,
                          text=True, env=env).stdout


def git_init(root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    (root / "README.md").write_text("# code\n", encoding="utf-8")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "init")

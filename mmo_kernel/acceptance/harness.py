"""The disposable server + runner pair an acceptance run drives.

Everything lives in one temp folder with private ``MMO_STATE_DIR``/``MMO_CONFIG_DIR``:
`mmo serve --port 0` (loopback) is started as a subprocess and found through its
``server.json``; a user, a PAT and a runner token are created over the admin HTTP API with
the bootstrap admin token; ``runner.toml`` (0600) and two project files are written and
`mmo runner` is started. ``stop()`` ends both processes (SIGTERM, then SIGKILL of the
process group) and is safe to call at any point.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import tomlkit

from mmo_kernel.acceptance import fixtures
from mmo_kernel.acceptance.mcp_client import CallRecord, CaseFailure, McpClient, one_line

USERNAME = "lead"
CLIENT_ID = "acceptance"
SCOPES = ["read", "write", "execute", "goals", "delegate", "admin"]
START_DEADLINE = 60.0
STOP_GRACE = 20.0
KEPT_ENV = ("MMO_TEST_PROCESS_GUARD", "MMO_CODEX_BIN")
"""The caller's MMO variables are dropped (an agent's caller token among them) but these:
the test suite's process-guard marker and the chosen Codex binary."""
MMO_ENTRY = "import sys; from mmo_kernel.cli import main; sys.exit(main())"


@dataclass
class Stack:
    """Paths, processes and credentials of one acceptance run (credentials stay in memory
    and in the files the spec names: admin-token and runner.toml)."""

    root: Path
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)
    logs: dict[str, Path] = field(default_factory=dict)
    server: dict[str, Any] = field(default_factory=dict)
    admin_token: str = ""
    pat: str = ""
    runner_token: str = ""
    client: McpClient | None = None
    recorded: list[CallRecord] = field(default_factory=list)
    project_ids: dict[str, str] = field(default_factory=dict)
    project_refs: dict[str, str] = field(default_factory=dict)

    @classmethod
    def create(cls) -> Stack:
        root = Path(os.path.realpath(tempfile.mkdtemp(prefix="mmo-accept-")))
        stack = cls(root=root)
        for name in ("state", "config", "codex-home", "home", "logs", "projects"):
            (root / name).mkdir(mode=0o700)
        return stack

    # -- paths -----------------------------------------------------------------------------
    @property
    def serve_dir(self) -> Path:
        return self.root / "state" / "serve"

    @property
    def projects_dir(self) -> Path:
        return self.root / "projects"

    @property
    def registry_dir(self) -> Path:
        return self.root / "config" / "projects.d"

    @property
    def runner_config(self) -> Path:
        return self.root / "config" / "runner.toml"

    def project_path(self, name: str) -> Path:
        return self.projects_dir / name

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("MMO_") or k in KEPT_ENV}
        env.update(MMO_STATE_DIR=str(self.root / "state"),
                   MMO_CONFIG_DIR=str(self.root / "config"),
                   CODEX_HOME=str(self.root / "codex-home"), PYTHONDONTWRITEBYTECODE="1")
        # the whole stack is loopback: a proxy from the caller's environment must not see it
        bypass = ",".join(filter(None, (env.get("NO_PROXY") or env.get("no_proxy"),
                                        "127.0.0.1", "localhost", "::1")))
        env["NO_PROXY"] = env["no_proxy"] = bypass
        return env

    # -- processes -------------------------------------------------------------------------
    def _start(self, name: str, *args: str) -> subprocess.Popen:
        log = self.root / "logs" / f"{name}.log"
        self.logs[name] = log
        with _interrupts_deferred():  # a started process is always known to stop()
            with open(log, "ab") as sink:
                proc = subprocess.Popen([sys.executable, "-c", MMO_ENTRY, *args],
                                        cwd=self.root, env=self.env(), stdin=subprocess.DEVNULL,
                                        stdout=sink, stderr=sink, start_new_session=True)
            self.processes[name] = proc
        return proc

    def _alive(self, name: str) -> None:
        proc = self.processes[name]
        if proc.poll() is not None:
            raise CaseFailure(one_line(f"mmo {name} exited with code {proc.returncode}: "
                                       f"{self.last_log_line(name)}"))

    def last_log_line(self, name: str) -> str:
        try:
            lines = self.logs[name].read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return lines[-1] if lines else ""

    def start_server(self) -> None:
        proc = self._start("serve", "serve", "--port", "0", "--state-dir", str(self.serve_dir))
        info = self.serve_dir / "server.json"
        deadline = time.monotonic() + START_DEADLINE
        while time.monotonic() < deadline:
            self._alive("serve")
            try:
                server = json.loads(info.read_text())
                if server.get("pid") == proc.pid and server.get("mcp_url"):
                    self.server = server
                    break
            except (OSError, ValueError):
                pass
            time.sleep(0.05)
        else:
            raise CaseFailure("mmo serve wrote no server.json within 60 s")
        for key in ("url", "mcp_url", "runner_url"):
            if not str(self.server.get(key, "")).startswith(("http://", "ws://")):
                raise CaseFailure(f"server.json lacks a loopback {key}")
        self.admin_token = (self.serve_dir / "admin-token").read_text().strip()
        if not self.admin_token.startswith("mmo_adm_"):
            raise CaseFailure("admin-token does not hold an mmo_adm_ token")

    def admin(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        with httpx2.Client(trust_env=False, timeout=30.0) as http:
            response = http.post(self.server["url"] + path, json=body,
                                 headers={"Authorization": f"Bearer {self.admin_token}"})
        try:
            reply = response.json()
        except ValueError:
            reply = {}
        if response.status_code != 200 or not reply.get("success"):
            raise CaseFailure(one_line(f"admin API {path}: HTTP {response.status_code} "
                                       f"{reply.get('error', '')}"))
        return reply

    def enrol(self) -> None:
        self.admin("/api/users/create", {"username": USERNAME})
        pat = self.admin("/api/tokens/create",
                         {"username": USERNAME, "name": "acceptance", "scopes": SCOPES})
        runner = self.admin("/api/runner-tokens/create",
                            {"username": USERNAME, "client_id": CLIENT_ID,
                             "name": "acceptance runner"})
        self.pat, self.runner_token = pat["token"], runner["token"]
        if not self.pat.startswith("mmo_pat_") or not self.runner_token.startswith("mmo_rt_"):
            raise CaseFailure("the admin API issued tokens without the mmo_pat_/mmo_rt_ prefix")

    def write_projects(self) -> None:
        fixtures.write_data_project(self.project_path("data"))
        fixtures.write_code_project(self.project_path("code"))
        self.registry_dir.mkdir(mode=0o700)
        for name, description in (("data", "plain folder with the acceptance inputs"),
                                  ("code", "git repository with a broken calculator")):
            doc = {"id": name, "path": str(self.project_path(name)), "name": name,
                   "description": description}
            (self.registry_dir / f"{name}.toml").write_text(tomlkit.dumps(doc))

    def write_runner_config(self) -> None:
        doc = {"server_url": self.server["url"], "token": self.runner_token,
               "client_id": CLIENT_ID, "owner": USERNAME, "transport": "websocket",
               "project_registry_dir": str(self.registry_dir), "offline": True,
               "policy": {"allowed_roots": [str(self.projects_dir)],
                          "allowed_executables": [sys.executable]}}
        fd = os.open(self.runner_config, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(tomlkit.dumps(doc))

    def start_runner(self) -> None:
        self._start("runner", "runner", "--config", str(self.runner_config))

    def connect_client(self, version: str) -> McpClient:
        self.client = McpClient(self.server["mcp_url"], self.pat,
                                forbidden=(self.pat, self.runner_token, self.admin_token,
                                           str(self.root)), client_version=version)
        self.recorded = self.client.records
        return self.client

    def wait_online(self) -> None:
        """Poll list_projects (recorded as setup calls) until both projects are online."""
        assert self.client is not None
        deadline = time.monotonic() + START_DEADLINE
        wanted = {f"runner:{CLIENT_ID}:{name}": name for name in ("data", "code")}
        while time.monotonic() < deadline:
            self._alive("runner")
            envelope = self.client.call("list_projects", {})
            projects = envelope["output"].get("projects") or [] if envelope["success"] else []
            online = {p.get("id"): p for p in projects if p.get("online")}
            if set(wanted) <= set(online):
                for pid, name in wanted.items():
                    self.project_ids[name] = pid
                    self.project_refs[name] = str(online[pid].get("project_ref"))
                return
            time.sleep(0.25)
        raise CaseFailure("list_projects did not show both projects online within 60 s "
                          f"(runner log: {self.last_log_line('runner')})")

    def stop(self) -> dict[str, int | None]:
        """SIGTERM the runner (it stops its jobs) then the server; SIGKILL what outlives
        the grace. Returns each process's exit code."""
        codes: dict[str, int | None] = {}
        for name in ("runner", "serve"):
            proc = self.processes.pop(name, None)
            if proc is None:
                continue
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(STOP_GRACE)
                except subprocess.TimeoutExpired:
                    _kill_group(proc)
            _kill_group(proc)  # children left in the process group (never the jobs' groups)
            codes[name] = proc.returncode
        if self.client is not None:
            self.client.close()
            self.client = None
        return codes

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


@contextmanager
def _interrupts_deferred() -> Iterator[None]:
    """Ctrl-C or SIGTERM arriving while a process starts takes effect once it is recorded.

    A Python handler (not ``SIG_IGN``, which a child would inherit) notes the signal; the
    previous handler then runs for it when the block ends.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []
    signals = (signal.SIGINT, signal.SIGTERM)
    previous = {sig: signal.signal(sig, lambda signum, frame: pending.append(signum))
                for sig in signals}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for sig in pending[:1]:
            handler = previous[sig]
            if callable(handler):
                handler(sig, None)
            elif handler == signal.SIG_DFL:
                signal.raise_signal(sig)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        pass

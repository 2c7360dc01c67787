"""A real ``mmo ui`` server for the tests: the command itself, in a subprocess, on a free
port of 127.0.0.1, with the URL it printed; plus offline teams to look at (the job-lab
profile on the deterministic Codex stand-in), as the other live-view tests make them."""

from __future__ import annotations

import json
import os
import queue
import re
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import httpx2
from support.waiting import wait_until

MMO = str(Path(sys.executable).with_name("mmo"))
JOB_LAB = Path(__file__).resolve().parents[2] / "fixtures" / "profiles" / "job-lab"
OFFLINE = {"*": "local_scripted"}
WRITER_TASK = "Add the plan. FAKE_WRITE notes/plan.md::step one"
URL = re.compile(r"mmo ui: (http://127\.0\.0\.1:(\d+)/\?token=(\S+))")
CSRF = re.compile(r'<meta name="csrf-token" content="([^"]+)">')


@dataclass
class UIServer:
    proc: subprocess.Popen
    url: str
    port: int
    token: str
    stderr: list[str]

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def client(self, login: bool = True) -> httpx2.Client:
        """A client holding the cookie the token is traded for (``login``), else nothing."""
        client = httpx2.Client(base_url=self.origin, timeout=30)
        if login:
            answer = client.get(f"/?token={self.token}")
            assert answer.status_code == 303, answer.text
        return client

    def csrf(self, client: httpx2.Client, path: str = "/") -> str:
        page = client.get(path)
        assert page.status_code == 200, page.text
        return CSRF.search(page.text).group(1)

    def post(self, client: httpx2.Client, path: str, data: dict, **headers: str) -> httpx2.Response:
        """A form post as the page's script sends it: same origin, CSRF header, JSON back."""
        sent = {"origin": self.origin, "x-csrf-token": self.csrf(client),
                "accept": "application/json", **headers}
        return client.post(path, data=data, headers={k: v for k, v in sent.items() if v})

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(15)


def start_ui(*extra: str, env: dict | None = None) -> UIServer:
    """``mmo ui --no-browser --port 0`` (keep-alives every second), once it printed its URL."""
    proc = subprocess.Popen([MMO, "ui", "--no-browser", "--port", "0", "--keepalive", "1",
                             *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, text=True,
                            env=env if env is not None else dict(os.environ))
    lines: queue.Queue[str] = queue.Queue()
    stderr: list[str] = []
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True).start()
    threading.Thread(target=lambda: [stderr.append(line) for line in proc.stderr],
                     daemon=True).start()
    try:
        first = lines.get(timeout=60)
    except queue.Empty:
        proc.kill()
        raise AssertionError("mmo ui printed no URL: " + "".join(stderr)) from None
    found = URL.search(first)
    assert found, first + "".join(stderr)
    server = UIServer(proc, found.group(1), int(found.group(2)), found.group(3), stderr)
    wait_until(lambda: _answers(server), timeout=30, what="mmo ui to answer")
    return server


def _answers(server: UIServer) -> bool:
    try:
        return httpx2.get(server.origin + "/", timeout=2).status_code == 403
    except httpx2.HTTPError:
        return False


def offline_session(workspace: Path) -> dict:
    from mmo_kernel.api import create_session

    return create_session(JOB_LAB, cwd=workspace, bindings=OFFLINE)


def spawn(session: dict, agent: str, task: str, **options) -> str:
    from mmo_kernel.api import spawn_job

    return spawn_job(session["session_id"], "lead", None, agent, task=task, **options)["job_id"]


def finished(job_id: str, timeout: float = 90) -> dict:
    from mmo_kernel.api import peek_job

    return wait_until(lambda: (r := peek_job(job_id))["status"] in (
        "completed", "failed", "cancelled") and r, timeout=timeout, what=f"job {job_id} to end")


def writer_job(session: dict) -> str:
    """A writer whose scripted patch adds ``notes/plan.md``, finished and with its host gone
    (the host's exit is itself a change the live view shows)."""
    from mmo_kernel.jobs.listing import host_alive
    from mmo_kernel.jobs.records import read_job_record

    job_id = spawn(session, "writer", WRITER_TASK, mode="workspace-write",
                   write_scope_values=["notes"])
    assert finished(job_id)["status"] == "completed"
    wait_until(lambda: not host_alive(read_job_record(job_id)), 30, f"the host of {job_id}")
    return job_id


def audit(session: dict) -> list[dict]:
    from mmo_kernel.api import session_dir

    path = session_dir(session["session_id"]) / "audit.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def sse_events(lines, wanted: int) -> list[dict]:
    """The next ``wanted`` events (comments counted as ``{"comment": ...}``) of a stream's
    ``iter_lines()``."""
    events, current = [], {}
    for line in lines:
        if line.startswith(":"):
            events.append({"comment": line[1:].strip()})
        elif line == "":
            if current:
                events.append(current)
                current = {}
        else:
            key, _, value = line.partition(":")
            current[key] = value[1:] if value.startswith(" ") else value
        if len(events) >= wanted:
            break
    return events

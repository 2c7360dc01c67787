"""Fixtures for results, traces, controls and workspace tests.

Sessions are real records over a real compiled snapshot of the built-in
``adaptive-engineering`` profile (its real routes and efforts), written directly so no
gateway starts; jobs are hand-written records, which spec 04 allows for
results and waiting. Controls talk to a real host process (``fake_host.py``)
serving a real ``ControlServer``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from support.compiled import compile_once

from mmo_kernel.jobs.records import job_dir, new_job_id, write_job_record
from mmo_kernel.sessions.records import (
    new_record_id,
    utc_now,
    write_run_record,
    write_session_record,
)
from mmo_kernel.state.processes import process_start_token

HERE = Path(__file__).parent
PROFILE = "adaptive-engineering"
ROOT, WRITER, REVIEWER = "orchestrator", "implementation_specialist", "adversarial_reviewer"


@pytest.fixture(autouse=True)
def _no_leftover_processes(mmo_process_guard):
    yield


@pytest.fixture(scope="session")
def snapshot_template(tmp_path_factory) -> Path:
    """One offline compile of the profile for the whole run, copied into each test's state."""
    return compile_once(tmp_path_factory.mktemp("snapshot-template"), PROFILE)


def make_session(cwd: Path, tmp: Path, template: Path, **fields: Any) -> dict[str, Any]:
    from mmo_kernel.profiles.snapshots import load_snapshot
    from mmo_kernel.state.paths import ensure_private_dir, state_dir

    target = ensure_private_dir(state_dir() / "snapshots") / template.name
    if not target.exists():
        shutil.copytree(template, target, symlinks=True)
    snapshot = load_snapshot(template.name)
    session_id = new_record_id(PROFILE)
    run_id = new_record_id("run")
    homes = {}
    for agent in (ROOT, WRITER, REVIEWER, "repo_scout"):
        home = tmp / "homes" / session_id / agent
        home.mkdir(parents=True)
        homes[agent] = {"home": str(home)}
    now = utc_now()
    write_run_record({"run_id": run_id, "session_id": session_id, "sequence": 1,
                      "kind": "initial", "status": "running", "created_at": now,
                      "root_mcp_token_hash": "0" * 64})
    record = {"session_id": session_id, "status": "running", "profile_id": PROFILE,
              "snapshot_hash": snapshot["manifest"]["snapshot_hash"], "cwd": str(cwd),
              "session_kind": "noninteractive", "root_agent": ROOT, "homes": homes,
              "current_run_id": run_id, "tainted": False, "created_at": now, **fields}
    return write_session_record(record)


@pytest.fixture
def session(mmo_env, mmo_git_workspace, tmp_path, snapshot_template) -> dict[str, Any]:
    return make_session(mmo_git_workspace, tmp_path, snapshot_template)


def make_job(session: dict[str, Any], agent: str = REVIEWER, *, result: str | None = None,
             structured: Any = ..., partial: str | None = None, **fields: Any) -> dict[str, Any]:
    """A hand-written job record (the seven required fields plus ``fields``) and its files."""
    job_id = new_job_id(agent)
    record = {"job_id": job_id, "session_id": session["session_id"], "agent": agent,
              "status": "completed", "created_at": utc_now(), **fields}
    write_job_record(record)
    directory = job_dir(job_id)
    if result is not None:
        (directory / "result.md").write_text(result, encoding="utf-8")
        record.setdefault("result_path", str(directory / "result.md"))
        record.setdefault("result_kind", "final")
        record.setdefault("result_state", "unread")
    if structured is not ...:
        import json

        (directory / "result.json").write_text(json.dumps(structured), encoding="utf-8")
        record.setdefault("structured_result_path", str(directory / "result.json"))
    if partial is not None:
        (directory / "partial-result.md").write_text(partial, encoding="utf-8")
        record.setdefault("partial_result_path", "partial-result.md")
        record.setdefault("result_kind", "partial")
        record.setdefault("result_state", "unread")
    return write_job_record(record)


def audit_events(session: dict[str, Any]) -> list[dict[str, Any]]:
    from mmo_kernel.sessions.records import session_file
    from mmo_kernel.state.audit import read_jsonl

    return read_jsonl(session_file(session["session_id"], "audit.jsonl"))


class FakeHost:
    """A real host process serving the job's control socket (see ``fake_host.py``)."""

    def __init__(self, job_id: str, mode: str) -> None:
        from mmo_kernel.hosts.control_socket import app_server_socket_path

        self.job_id = job_id
        self.socket = app_server_socket_path(f"control:job:{job_id}")
        self.ready = self.socket.with_name(self.socket.name + ".ready")
        self.ready.unlink(missing_ok=True)
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "fake_host.py"), job_id, str(self.socket), mode],
            env=dict(os.environ), stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 10
        while not self.ready.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("fake host did not start")
            time.sleep(0.01)
        self.token = process_start_token(self.proc.pid)

    def publish(self, **fields: Any) -> dict[str, Any]:
        from mmo_kernel.jobs.records import update_job

        return update_job(self.job_id, runner_pid=self.proc.pid, runner_pgid=self.proc.pid,
                          runner_start_token=self.token, control_socket_path=str(self.socket),
                          control_socket_ready=True, **fields)

    def release(self) -> None:
        """Let a ``hold`` host finish the control it is handling."""
        self.socket.with_name(self.socket.name + ".go").write_text("go")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
        self.ready.unlink(missing_ok=True)
        self.socket.with_name(self.socket.name + ".go").unlink(missing_ok=True)


@pytest.fixture
def fake_host():
    hosts: list[FakeHost] = []

    def start(job_id: str, mode: str = "ok") -> FakeHost:
        host = FakeHost(job_id, mode)
        hosts.append(host)
        host.publish()
        return host

    yield start
    for host in hosts:
        host.stop()

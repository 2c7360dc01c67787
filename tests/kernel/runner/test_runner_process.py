"""The real ``mmo runner --config FILE`` process against a real server (spec 12 "Processes").

It registers its projects over the link, announces a rescan, serves calls (a project
session is ``running`` while it is connected), and on SIGTERM stops its process jobs and
exits 0 — its sessions ``suspended`` — without ever logging its token.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from support.runner_core import register_project, write_runner_config
from support.serve import (
    admin_token,
    api,
    create_runner_token,
    create_user_and_pat,
    running_server,
    start_serve_process,
)
from support.waiting import wait_until

from mmo_kernel.api import load_session
from mmo_kernel.state.processes import process_matches

MMO = Path(sys.executable).with_name("mmo")


@pytest.fixture(autouse=True)
def _env(mmo_env, mmo_process_guard):
    yield mmo_env


def runners(base_url: str, admin: str) -> dict[str, dict]:
    reply = api(base_url, admin, "/api/runners", method="GET")
    assert reply.status_code == 200, reply.text
    return {r["client_id"]: r for r in reply.json()["runners"]}


def tool(base_url: str, pat: str, name: str, params: dict) -> dict:
    reply = api(base_url, pat, "/api/tools/call", {"tool": name, "params": params})
    assert reply.status_code == 200, reply.text
    return reply.json()


def test_mmo_runner_serves_projects_and_exits_0_on_sigterm(tmp_path):
    with running_server(tmp_path / "serve") as (base_url, app):
        admin = admin_token(tmp_path / "serve")
        pat = create_user_and_pat(base_url, admin, "alice")
        token = create_runner_token(base_url, admin, "alice", "laptop")
        config = write_runner_config(tmp_path / "runner", server_url=base_url, token=token,
                                     allowed_roots=[tmp_path / "projects"])
        register_project(config, "data", tmp_path / "projects" / "data")
        log = tmp_path / "runner.log"
        with open(log, "wb") as stderr:
            proc = subprocess.Popen([str(MMO), "runner", "--config", str(config)],
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=stderr, env=dict(os.environ))
        try:
            wait_until(lambda: runners(base_url, admin).get("laptop", {}).get("online"),
                       timeout=60, what="the runner to link up")
            assert runners(base_url, admin)["laptop"]["projects"] == ["runner:laptop:data"]

            register_project(config, "code", tmp_path / "projects" / "code")  # a rescan
            wait_until(lambda: runners(base_url, admin)["laptop"]["projects"] == [
                "runner:laptop:code", "runner:laptop:data"],
                       timeout=60, what="the projects frame after a rescan")

            started = tool(base_url, pat, "work_on_project",
                           {"project": "runner:laptop:data", "instruction": "look around"})
            assert started["success"] is True, started
            sid = started["output"]["session_id"].removeprefix("mmo_sess_")
            assert load_session(sid)["status"] == "running"

            job = tool(base_url, pat, "run_script", {
                "project": "runner:laptop:data", "session_id": started["output"]["session_id"],
                "language": "python", "script": "import time; time.sleep(600)",
                "timeout_secs": 900, "wait_secs": 0})
            assert job["success"] is True and job["output"]["status"] == "running", job
            job_id = job["output"]["job_id"]
        finally:
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(timeout=60)
        text = log.read_text(encoding="utf-8", errors="replace")
        assert code == 0, text
        assert token not in text
        assert "runner stopped" in text
        # its process job was stopped with it, and its session waits for a runner
        jobs_dir = next(Path(os.environ["MMO_STATE_DIR"]).glob(f"runner/laptop/*/{job_id}"))
        saved = json.loads((jobs_dir / "job.json").read_text())
        assert saved["status"] == "cancelled"
        assert not process_matches(saved.get("pid"), saved.get("start_token"))
        assert load_session(sid)["status"] == "suspended"
        wait_until(lambda: not runners(base_url, admin)["laptop"]["online"], timeout=60,
                   what="the server to see the runner offline")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_sessions_are_suspended_while_the_link_is_down_and_running_after_reconnect(tmp_path):
    """The runner outlives a server restart: it re-dials, says hello again, and its
    project session is ``suspended`` while unlinked and ``running`` once linked again."""
    port = str(free_port())
    state = tmp_path / "serve"
    server = start_serve_process(state, "--port", port)
    runner_proc = None
    try:
        admin = admin_token(state)
        pat = create_user_and_pat(server.url, admin, "alice")
        token = create_runner_token(server.url, admin, "alice", "laptop")
        config = write_runner_config(tmp_path / "runner", server_url=server.url, token=token,
                                     allowed_roots=[tmp_path / "projects"])
        register_project(config, "data", tmp_path / "projects" / "data")
        with open(tmp_path / "runner.log", "wb") as stderr:
            runner_proc = subprocess.Popen([str(MMO), "runner", "--config", str(config)],
                                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                           stderr=stderr, env=dict(os.environ))
        wait_until(lambda: runners(server.url, admin).get("laptop", {}).get("online"),
                   timeout=60, what="the runner to link up")
        started = tool(server.url, pat, "work_on_project",
                       {"project": "runner:laptop:data", "instruction": "x"})
        assert started["success"] is True, started
        sid = started["output"]["session_id"].removeprefix("mmo_sess_")
        assert load_session(sid)["status"] == "running"

        assert server.stop() == 0
        wait_until(lambda: load_session(sid)["status"] == "suspended", timeout=60,
                   what="the session to be suspended while the link is down")
        assert runner_proc.poll() is None  # the runner keeps re-dialling

        server = start_serve_process(state, "--port", port)
        wait_until(lambda: runners(server.url, admin).get("laptop", {}).get("online"),
                   timeout=120, what="the runner to reconnect")
        wait_until(lambda: load_session(sid)["status"] == "running", timeout=60,
                   what="the session to run again")
        again = tool(server.url, pat, "work_on_project", {
            "project": "runner:laptop:data", "session_id": started["output"]["session_id"],
            "instruction": "continue"})
        assert again["success"] is True and again["output"]["session_id"] == started[
            "output"]["session_id"], again
    finally:
        if runner_proc is not None:
            runner_proc.send_signal(signal.SIGTERM)
            assert runner_proc.wait(timeout=60) == 0
        server.stop()
    assert token not in (tmp_path / "runner.log").read_text(errors="replace")

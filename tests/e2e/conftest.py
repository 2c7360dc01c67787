"""End-to-end runs on the REAL pinned Codex app-server, the real gateway and `mmo mcp`.

Every test gets private state/config dirs and a git workspace, selects the
native Codex binary through ``MMO_CODEX_BIN`` (failing with install
instructions when it is missing), stops the shared gateway at the end and
must leave no process behind.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.waiting import Background, wait_until  # noqa: F401 - re-exported to the tests

from mmo_kernel.hosts.codex_cli import PINNED_CODEX_VERSION, project_codex

PROJECT_ROOT = Path(__file__).resolve().parents[2]
OFFLINE = {"*": "local_scripted"}
FIXTURE_PROFILES = PROJECT_ROOT / "tests" / "fixtures" / "profiles"
JOB_LAB = FIXTURE_PROFILES / "job-lab"
TOOL_LAB = FIXTURE_PROFILES / "tool-lab"
INSTALL_HINT = (
    f"the pinned real Codex CLI {PINNED_CODEX_VERSION} is not installed under "
    f"{PROJECT_ROOT / '.codex-cli'}; install it from the project root with `make codex` "
    f"(or `npm install --prefix .codex-cli @openai/codex@{PINNED_CODEX_VERSION}`)"
)


@pytest.fixture
def real_codex(monkeypatch) -> Path:
    """The native pinned Codex selected for every session this test creates."""
    binary = project_codex(PROJECT_ROOT)
    if binary is None:
        pytest.fail(INSTALL_HINT, pytrace=False)
    monkeypatch.setenv("MMO_CODEX_BIN", str(binary))
    return binary


@pytest.fixture(autouse=True)
def _e2e_env(mmo_env, real_codex, mmo_process_guard):
    yield mmo_env
    from mmo_kernel.gateway.process import stop_gateway

    stop_gateway()


@pytest.fixture
def workspace(mmo_git_workspace) -> Path:
    return mmo_git_workspace


def script(*steps: str, intro: str = "Do the task.") -> str:
    """A prompt holding one ```mmo-script block (see docs/scripted-model.md)."""
    return "\n".join([intro, "```mmo-script", *steps, "```"])


def mesh_step(name: str, tool: str, arguments: dict) -> str:
    """``<name>: mcp mmo_mesh.<tool> {json}`` — a worker's script travels escaped in JSON."""
    return f"{name}: mcp mmo_mesh.{tool} {json.dumps(arguments)}"


def events(path: str | Path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def sent(path: str | Path, method: str) -> list[dict]:
    return [r["message"] for r in events(path)
            if r["direction"] == "sent" and r["message"].get("method") == method]


def completed_items(path: str | Path, kind: str) -> list[dict]:
    return [r["message"]["params"]["item"] for r in events(path)
            if r["direction"] == "received"
            and r["message"].get("method") == "item/completed"
            and r["message"]["params"].get("item", {}).get("type") == kind]


def spawn(session: dict, agent: str, task: str, **kwargs) -> str:
    """Spawn a job as the session's root (job-lab's root is ``lead``)."""
    from mmo_kernel.jobs.spawn import spawn_job

    return spawn_job(session["session_id"], "lead", None, agent, task=task, **kwargs)["job_id"]


def finish(session: dict, job_id: str, timeout: float = 60) -> dict:
    """Wait for the job to end and its host to exit; returns the final record."""
    from mmo_kernel.jobs.records import read_job_record
    from mmo_kernel.jobs.waiting import wait_for_jobs

    waited = wait_for_jobs([job_id], session["session_id"], timeout)
    assert not waited["timed_out_waiting"], read_job_record(job_id)
    wait_host_gone(read_job_record(job_id))
    return read_job_record(job_id)


def wait_host_gone(record: dict, pid_key: str = "runner_pid",
                   token_key: str = "runner_start_token") -> None:
    from mmo_kernel.state.processes import process_matches

    wait_until(lambda: not process_matches(record.get(pid_key), record.get(token_key)),
               timeout=20, what="the host to exit")

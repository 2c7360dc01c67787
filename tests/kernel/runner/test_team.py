"""Team tools (spec 12): the external lead in the root seat of an ``external`` session.

The runner is offline (every agent on ``local_scripted``) and the worker runs on the
Codex stand-in, for real: spawned through ``mmo_kernel.api``, waited for, read, accepted.
"""

from __future__ import annotations

import json
import time

import pytest
from support.runner_core import LocalRunner, register_project, write_runner_config
from support.waiting import wait_until

from mmo_kernel.api import load_session
from mmo_kernel.sessions.records import session_file
from mmo_kernel.state.audit import read_jsonl


@pytest.fixture(autouse=True)
def _env(mmo_env, mmo_process_guard, mmo_standin):
    yield mmo_env
    from mmo_kernel.gateway.process import stop_gateway

    stop_gateway()


@pytest.fixture
def runner(tmp_path, mmo_git_workspace) -> LocalRunner:
    config = write_runner_config(tmp_path / "runner", allowed_roots=[mmo_git_workspace])
    register_project(config, "code", mmo_git_workspace)
    return LocalRunner(config)


def no_machine_paths(value, *paths) -> None:
    text = json.dumps(value)
    for path in paths:
        assert str(path) not in text, f"{path} leaked: {text[:400]}"


def wait_done(runner: LocalRunner, sid: str, job_ids: list[str]) -> dict:
    def finished():
        out = runner.ok("team_wait", {"session_id": sid, "job_ids": job_ids,
                                      "timeout_seconds": 20},
                        deadline_unix_ms=int((time.time() + 40) * 1000))
        return out if not out["unfinished"] else None

    done = wait_until(finished, timeout=180, what="the worker to finish", poll=0)
    for job_id in job_ids:  # a finished job's host still retires its app-server, then exits
        wait_until(lambda j=job_id: not _host_alive(j), timeout=30, what="the job host to exit")
    return done


def _host_alive(job_id: str) -> bool:
    from mmo_kernel.jobs.records import read_job_record
    from mmo_kernel.state.processes import process_matches

    record = read_job_record(job_id)
    return process_matches(record.get("runner_pid"), record.get("runner_start_token"))


def test_a_spawned_worker_runs_to_completion_and_is_accepted(runner, mmo_env,
                                                            mmo_git_workspace):
    sid = runner.ok("work_on_project", {"project": "code", "instruction": "x"})["session_id"]
    assert load_session(sid).get("homes", {}) == {}  # nothing materialized before the team

    agents = runner.ok("team_agents", {"session_id": sid})
    assert agents["root_agent"] == "lead"
    plain = next(a for a in agents["agents"] if a["agent"] == "plain")
    assert plain["model"] == "local_scripted__scripted" and plain["permissions"] == "read-only"

    spawn = {"session_id": sid, "agents": [{"agent": "plain", "task": "Say hello"}],
             "idempotency_key": "greet-1"}
    first = runner.ok("team_spawn", spawn)
    assert (first["atomic"], first["replayed"], first["state_changed"]) == (True, False, True)
    [job_id] = first["job_ids"]
    record = load_session(sid)
    assert set(record["homes"]) >= {"lead", "plain"} and record["gateway_url"]
    assert record["team_materialized_at"]

    replay = runner.ok("team_spawn", spawn)  # the same key: the same job, nothing new
    assert (replay["job_ids"], replay["replayed"], replay["state_changed"]) == (
        [job_id], True, False)
    assert [p.name for p in (mmo_env.state_dir / "jobs").iterdir()] == [job_id]
    conflict = runner.fails("team_spawn", {**spawn, "agents": [{"agent": "plain",
                                                               "task": "Other"}]},
                            "invalid_arguments")
    assert "greet-1" in conflict["error"]

    waited = wait_done(runner, sid, [job_id])
    status = runner.ok("team_status", {"session_id": sid, "job_ids": [job_id]})
    [job] = status["jobs"]
    assert (job["job_id"], job["status"], job["agent"], job["caller_agent"]) == (
        job_id, "completed", "plain", "lead")
    for hidden in ("cwd", "events_path", "stderr_path", "runner_pid", "mcp_caller_token_hash"):
        assert hidden not in job
    no_machine_paths([first, replay, waited, status], mmo_env.state_dir, mmo_git_workspace,
                     mmo_env.root)

    result = runner.ok("team_result", {"session_id": sid, "job_id": job_id})
    assert result["content"] == "FAKE_CODEX_OK"
    accepted = runner.ok("team_accept", {"session_id": sid, "job_id": job_id,
                                         "reason": "it greeted"})
    assert accepted["state_changed"] is True and accepted["job"]["result_state"] == "accepted"
    no_machine_paths([result, accepted], mmo_env.state_dir, mmo_git_workspace)

    audit = read_jsonl(session_file(sid, "audit.jsonl"))
    started = [e for e in audit if e["event"] == "agent_started"]
    assert [(e["job_id"], e["caller_agent"], e["external_lead"]) for e in started] == [
        (job_id, "lead", "alice")]
    accepts = [e for e in audit if e["event"] == "agent_result_accepted"]
    assert [e["external_lead"] for e in accepts] == ["alice"]
    # the lead acts through the team tools, the mesh of an external session; it started it too
    opened = [e for e in audit if e["event"] == "run_started"]
    assert {(e["actor"], e["actor_name"]) for e in opened + started + accepts} == {
        ("mesh", "alice")}


def test_team_errors_map_to_the_spec_kinds(runner, mmo_git_workspace):
    sid = runner.ok("work_on_project", {"project": "code", "instruction": "x"})["session_id"]
    other = runner.ok("work_on_project", {"project": "code", "instruction": "y"})["session_id"]
    denied = runner.fails("team_spawn", {"session_id": sid, "idempotency_key": "k",
                                         "agents": [{"agent": "lead", "task": "me"}]},
                          "permission_denied")
    assert "plain" in denied["error"]
    runner.fails("team_status", {"session_id": sid, "job_ids": ["mmo-nope"]}, "job_not_found")
    runner.fails("team_result", {"session_id": sid, "job_id": "mmo-nope"}, "job_not_found")
    refused = runner.fails("team_spawn", {"session_id": sid, "idempotency_key": "w",
                                          "agents": [{"agent": "writer", "task": "edit",
                                                      "mode": "workspace-write",
                                                      "write_scopes": ["../outside"]}]},
                           "invalid_arguments")
    assert str(mmo_git_workspace) not in refused["error"]

    job_id = runner.ok("team_spawn", {"session_id": sid, "idempotency_key": "g",
                                      "agents": [{"agent": "plain", "task": "Say hello"}]}
                       )["job_ids"][0]
    # the job belongs to `sid` only: another session of the same lead does not see it
    runner.fails("team_status", {"session_id": other, "job_ids": [job_id]}, "job_not_found")
    runner.fails("team_accept", {"session_id": other, "job_id": job_id, "reason": "r"},
                 "job_not_found")
    wait_done(runner, sid, [job_id])
    # accepting before the result was read is refused by the API's own rule
    early = runner.fails("team_accept", {"session_id": sid, "job_id": job_id, "reason": "r"},
                         "invalid_arguments")
    assert "read" in early["error"]
    runner.fails("team_agents", {"session_id": "20990101-000000-x-abcdef"}, "session_not_found")


def test_team_unavailable_when_no_worker_can_start(runner, monkeypatch, tmp_path):
    """Without a Codex binary the session still works, but a team cannot start."""
    monkeypatch.setenv("MMO_CODEX_BIN", str(tmp_path / "missing-codex"))
    sid = runner.ok("work_on_project", {"project": "code", "instruction": "x"})["session_id"]
    out = runner.fails("team_spawn", {"session_id": sid, "idempotency_key": "k",
                                      "agents": [{"agent": "plain", "task": "hi"}]},
                       "team_unavailable")
    assert str(tmp_path) not in out["error"]
    assert load_session(sid).get("homes", {}) == {}


def test_a_writers_patch_is_integrated_into_the_project(runner, mmo_git_workspace):
    sid = runner.ok("work_on_project", {"project": "code", "instruction": "x"})["session_id"]
    spawned = runner.ok("team_spawn", {
        "session_id": sid, "idempotency_key": "write-1",
        "agents": [{"agent": "writer", "task": "Add it. FAKE_WRITE src/new.py::X = 1",
                    "mode": "workspace-write", "write_scopes": ["src"]}]})
    [job_id] = spawned["job_ids"]
    assert spawned["jobs"][0]["write_scope"] == ["src"]
    wait_done(runner, sid, [job_id])
    assert not (mmo_git_workspace / "src" / "new.py").exists()  # still in its worktree
    runner.ok("team_result", {"session_id": sid, "job_id": job_id})
    runner.ok("team_accept", {"session_id": sid, "job_id": job_id, "reason": "looks right"})
    integrated = runner.ok("team_integrate", {"session_id": sid, "job_id": job_id,
                                              "reason": "ship it"})
    assert integrated["state_changed"] is True
    assert (mmo_git_workspace / "src" / "new.py").read_text() == "X = 1\n"
    no_machine_paths(integrated, mmo_git_workspace)
    events = [e for e in read_jsonl(session_file(sid, "audit.jsonl"))
              if "integrat" in e["event"]]
    assert events and all(e["external_lead"] == "alice" for e in events)
    runner.fails("team_integrate", {"session_id": sid, "job_id": job_id, "reason": "again"},
                 "invalid_arguments")

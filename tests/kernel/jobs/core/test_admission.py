"""Admission refusals: exact error types and phrases, and nothing created on refusal."""

from __future__ import annotations

import pytest

from mmo_kernel.errors import AdmissionError
from mmo_kernel.jobs.cancel import cancel_job
from mmo_kernel.jobs.listing import list_jobs
from mmo_kernel.jobs.records import update_job
from mmo_kernel.jobs.spawn import spawn_job
from mmo_kernel.sessions.state import taint_session, transition

ROOT = "escalation_lead"


def _refused(error, phrase, *args, **kwargs):
    before = {r["job_id"] for r in list_jobs()}
    with pytest.raises(error, match=phrase) as info:
        spawn_job(*args, **kwargs)
    assert {r["job_id"] for r in list_jobs()} == before
    return info.value


BAD_REQUESTS = [
    (dict(agent_id="nobody", task="x"), ValueError, "unknown agent 'nobody'"),
    (dict(agent_id="flagship_escalation", task="x", mode="workspace-write"), PermissionError,
     "read-only and cannot take workspace-write"),
    (dict(agent_id="flagship_escalation", task="  "), ValueError, "a task is required"),
    (dict(agent_id="flagship_escalation", task="x", mode="sideways"), ValueError, "mode"),
    (dict(agent_id="literal_scout", task="x"), ValueError,
     "low-trust agents accept literal_task"),
    (dict(agent_id="literal_scout", literal_task={"operation": "rm_rf"}), ValueError,
     "unsupported literal_task operation"),
    (dict(agent_id="literal_scout", literal_task={"operation": "locate", "needle": "x",
                                                   "paths": ["../etc/passwd"]}),
     ValueError, "must be relative and inside the workspace"),
    (dict(agent_id="literal_scout", mode="workspace-write",
          literal_task={"operation": "summarize_supplied", "text": "t"}), PermissionError,
     "low-trust agent 'literal_scout' never writes"),
    (dict(agent_id="routine_engineer", task="x", mode="workspace-write"), ValueError,
     "requires an explicit write scope"),
    (dict(agent_id="routine_engineer", task="x", mode="workspace-write",
          write_scope_values=["../outside"]), ValueError, "escapes the workspace"),
    (dict(agent_id="flagship_escalation", task="x", write_scope_values=["src"]), ValueError,
     "write_scopes only apply to mode workspace-write"),
    (dict(agent_id="flagship_escalation", task="x", attachments=["shot.png"]), ValueError,
     "does not accept image attachments"),
]


def test_bad_requests_are_refused_with_their_own_error(make_session):
    session = make_session()
    for kwargs, error, phrase in BAD_REQUESTS:
        _refused(error, phrase, session["session_id"], ROOT, None, **kwargs)


def test_authority_depth_and_worker_identity(make_session, live_job):
    session = make_session()
    sid = session["session_id"]
    _refused(PermissionError, "may not spawn 'literal_scout'", sid, "routine_engineer",
             live_job(sid, "routine_engineer")["job_id"], "literal_scout",
             literal_task={"operation": "summarize_supplied", "text": "t"})
    _refused(PermissionError, "must act with its own caller_job_id", sid, "routine_engineer",
             None, "flagship_escalation", task="x")
    other = live_job(sid, "flagship_escalation")
    _refused(PermissionError, "is not a job of agent 'routine_engineer'", sid,
             "routine_engineer", other["job_id"], "flagship_escalation", task="x")
    finished = live_job(sid, "routine_engineer", runner=False, status="completed")
    _refused(PermissionError, "is not live", sid, "routine_engineer", finished["job_id"],
             "flagship_escalation", task="x")


def test_a_worker_within_depth_spawns_and_deeper_is_refused(make_session, tmp_path, live_job):
    import shutil

    from mmo_kernel.profiles.loading import locate_profile

    folder = tmp_path / "deep-team"
    shutil.copytree(locate_profile("access-efficient-escalation-lab").folder, folder)
    toml = (folder / "profile.toml").read_text()
    toml = toml.replace('id = "access-efficient-escalation-lab"', 'id = "deep-team"')
    toml = toml.replace("max_depth = 1", "max_depth = 2").replace(
        'controls = { routine_engineer', 'can_spawn = ["routine_engineer"]\n'
        'controls = { routine_engineer')
    (folder / "profile.toml").write_text(toml)
    session = make_session(str(folder))
    sid = session["session_id"]
    parent = live_job(sid, "flagship_escalation", depth=1)
    child = spawn_job(sid, "flagship_escalation", parent["job_id"], "routine_engineer",
                      task="x", mode="workspace-write", write_scope_values=["src"])
    assert child["depth"] == 2 and child["caller_job_id"] == parent["job_id"]
    deep = live_job(sid, "flagship_escalation", depth=2)
    _refused(PermissionError, "exceeds max_depth 2", sid, "flagship_escalation", deep["job_id"],
             "routine_engineer", task="x", mode="workspace-write", write_scope_values=["lib"])
    cancel_job(child["job_id"], sid)


def test_session_state_gates_spawns(make_session):
    session = make_session()
    sid = session["session_id"]
    taint_session(sid, "out-of-scope mutation: x")
    _refused(RuntimeError, "--allow-tainted", sid, ROOT, None, "flagship_escalation", task="x")
    other = make_session()
    transition(other["session_id"], "cancelled")
    _refused(RuntimeError, "terminal immutable session", other["session_id"], ROOT, None,
             "flagship_escalation", task="x")
    with pytest.raises(FileNotFoundError):
        spawn_job("20990101-000000-missing-abcdef", ROOT, None, "flagship_escalation", task="x")


def test_an_unavailable_route_refuses_only_its_roles(make_session, monkeypatch):
    for name in ("OPENROUTER_API_KEY", "ZAI_CODING_API_KEY", "OPENCODE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    session = make_session(bindings={ROOT: "local_scripted", "flagship_escalation":
                                     "local_scripted"})
    error = _refused(AdmissionError, "unavailable", session["session_id"], ROOT, None,
                     "literal_scout",
                     literal_task={"operation": "summarize_supplied", "text": "t"})
    assert error.reason == "route_unavailable"
    job = spawn_job(session["session_id"], ROOT, None, "flagship_escalation", task="x")
    cancel_job(job["job_id"], session["session_id"])


def test_write_scopes_conflict_with_live_writers_of_any_session(make_session, live_job,
                                                                mmo_git_workspace):
    first, second = make_session(), make_session()
    src = str(mmo_git_workspace.resolve() / "src")
    writer = live_job(first["session_id"], "routine_engineer", mode="workspace-write",
                      write_scope=["src"], write_scope_resolved=[src])
    error = _refused(AdmissionError, "write scope conflicts", second["session_id"], ROOT, None,
                     "routine_engineer", task="x", mode="workspace-write",
                     write_scope_values=["src/deep/file.py"])
    assert writer["job_id"] in str(error)
    _refused(AdmissionError, "write scope conflicts", second["session_id"], ROOT, None,
             "routine_engineer", task="x", mode="workspace-write",
             write_scope_values=["."])  # the whole workspace contains src
    update_job(writer["job_id"], status="completed")  # terminal: releases at once
    job = spawn_job(second["session_id"], ROOT, None, "routine_engineer", task="x",
                    mode="workspace-write", write_scope_values=["src"])
    cancel_job(job["job_id"], second["session_id"])


def test_capacity_limits_and_release(make_session, live_job, sleeper):
    session = make_session()
    sid = session["session_id"]
    busy = live_job(sid, "routine_engineer", mode="workspace-write",
                    write_scope_resolved=["/nowhere/else"])
    _refused(AdmissionError, "active-agent limit.*max_active_writers", sid, ROOT, None,
             "routine_engineer", task="x", mode="workspace-write",
             write_scope_values=["src"])
    update_job(busy["job_id"], status="paused")  # a pause whose host is alive still holds
    _refused(AdmissionError, "active-agent limit", sid, ROOT, None, "routine_engineer",
             task="x", mode="workspace-write", write_scope_values=["src"])
    import os
    import signal
    os.killpg(busy["runner_pid"], signal.SIGKILL)
    os.waitpid(busy["runner_pid"], 0)
    job = spawn_job(sid, ROOT, None, "routine_engineer", task="x", mode="workspace-write",
                    write_scope_values=["src"])  # a paused job whose host is gone holds none
    cancel_job(job["job_id"], sid)

    live_job(sid, "literal_scout")
    live_job(sid, "literal_scout")
    _refused(AdmissionError, "active-agent limit.*agent literal_scout max_active", sid, ROOT,
             None, "literal_scout", literal_task={"operation": "summarize_supplied",
                                                  "text": "t"})
    live_job(sid, "flagship_escalation")
    _refused(AdmissionError, "active-agent limit.*max_active_agents", sid, ROOT, None,
             "flagship_escalation", task="x")


def test_resource_pools_are_shared_across_sessions(make_session, live_job):
    mine, other = make_session(), make_session()
    for _ in range(3):  # the pool holds max_active_agents (3) units
        live_job(other["session_id"], "routine_engineer", resource_lock_key="zai-coding",
                 resource_units=1)
    error = _refused(AdmissionError, "active-agent limit.*resource pool 'zai-coding'",
                     mine["session_id"], ROOT, None, "routine_engineer", task="x",
                     mode="workspace-write", write_scope_values=["src"])
    assert error.reason == "capacity"


def test_a_pool_sized_in_settings_holds_that_many_units(make_session, live_job):
    from mmo_kernel.config.settings import set_setting

    set_setting("resource_pools", {"zai-coding": 4})
    mine, other, third = make_session(), make_session(), make_session()
    for _ in range(3):  # the profile's max_active_agents (3) would refuse the next one
        live_job(other["session_id"], "routine_engineer", resource_lock_key="zai-coding",
                 resource_units=1)
    job = spawn_job(mine["session_id"], ROOT, None, "routine_engineer", task="x",
                    mode="workspace-write", write_scope_values=["src"])
    _refused(AdmissionError, "active-agent limit.*resource pool 'zai-coding'",
             third["session_id"], ROOT, None, "routine_engineer", task="x",
             mode="workspace-write", write_scope_values=["lib"])
    cancel_job(job["job_id"], mine["session_id"])

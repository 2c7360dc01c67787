"""Admission check by check, on a real compiled profile (spec 04 "Admission").

``test_admission.py`` drives refusals through ``spawn_job`` on real sessions and
matches phrases; these call each check of ``jobs.admission`` with a real
compiled ``access-efficient-escalation-lab`` snapshot and hand-written records,
and pin the exact refusal, its boundary (a limit reached exactly is still
admitted) and what an admitted item carries, so a changed comparison, default
or phrase fails a test (``make mutate``).
"""

from __future__ import annotations

import os

import pytest

from mmo_kernel.errors import AdmissionError
from mmo_kernel.jobs import admission
from mmo_kernel.jobs.admission import (
    Admitted,
    Caller,
    Context,
    admit,
    check_capacity,
    check_conflicts,
    check_item,
    check_route,
    check_session,
    parse_requests,
    pool_capacity,
    resolve_caller,
)
from mmo_kernel.jobs.literal import input_sha256, literal_task_text, parse_literal_task
from mmo_kernel.jobs.records import new_job_id, utc_now, write_job_record
from mmo_kernel.mesh.arguments import SpawnRequest
from mmo_kernel.state.processes import process_start_token

LAB = "access-efficient-escalation-lab"
ROOT, SCOUT, ENGINEER, FLAGSHIP = ("escalation_lead", "literal_scout", "routine_engineer",
                                   "flagship_escalation")
SID = "20260101-000000-lab-abc123"


@pytest.fixture
def profile(mmo_env):
    from mmo_kernel.profiles.snapshots import compile_profile, snapshot_profile

    compiled = compile_profile(LAB, bindings={"*": "local_scripted"})
    return snapshot_profile(compiled["manifest"]["snapshot_hash"])


@pytest.fixture
def cwd(tmp_path):
    root = tmp_path / "work"
    (root / "src").mkdir(parents=True)
    return root


def session(cwd, **fields):
    return {"session_id": SID, "status": "running", "cwd": str(cwd), "root_agent": ROOT,
            **fields}


def ctx(profile, cwd, caller=None, **fields):
    return Context(session(cwd, **fields), profile, caller or Caller(ROOT, None, 0))


def spec(agent, **fields):
    return SpawnRequest(agent=agent, **fields)


def message(error, call, *args):
    with pytest.raises(error) as info:
        call(*args)
    return str(info.value)


def job(agent, *, status="running", session_id=SID, **fields):
    record = {"job_id": new_job_id(agent), "session_id": session_id, "agent": agent,
              "status": status, "created_at": utc_now(), **fields}
    return write_job_record(record)


# -- requests and the session -----------------------------------------------------


def test_a_batch_must_be_a_non_empty_list_of_objects():
    for bad in ([], None, {"agent": "x"}, "x"):
        assert message(ValueError, parse_requests, bad) == (
            "spawn_jobs needs a non-empty list of job specs")
    assert message(ValueError, parse_requests, [{"agent": "a", "task": "t"}, 7]) == (
        "job spec 1 must be an object")
    assert message(ValueError, parse_requests, [{"agent": "a", "mode": "sideways"}]).startswith(
        "job spec 0: ")
    given = spec("a", task="t")
    parsed = parse_requests([given, {"agent": "b", "task": "u"}])
    assert parsed[0] is given and parsed[1] == spec("b", task="u")


def test_session_states_that_refuse_spawns(cwd):
    for status in ("completed", "failed", "cancelled", "stopped"):
        assert message(RuntimeError, check_session, session(cwd, status=status)) == (
            f"terminal immutable session {SID} ({status}) accepts no new jobs")
    for status in ("cancelling", "paused"):
        assert message(RuntimeError, check_session, session(cwd, status=status)) == (
            f"session {SID} is {status}; it accepts no new jobs until continued")
    assert message(RuntimeError, check_session, session(cwd, tainted=True)) == (
        f"session {SID} is tainted; new spawns are refused (a resume with --allow-tainted "
        "allows inspection, never agent_spawn)")
    for status in ("running", "starting", "detached", "suspended"):
        check_session(session(cwd, status=status, tainted=False))


# -- the caller ---------------------------------------------------------------------


def test_the_root_and_worker_callers(profile, cwd):
    sess = session(cwd)
    assert resolve_caller(sess, profile, ROOT, None) == Caller(ROOT, None, 0)
    assert message(PermissionError, resolve_caller, sess, profile, "ghost", None) == (
        f"unknown caller agent 'ghost' in session {SID}")
    assert message(PermissionError, resolve_caller, sess, profile, ENGINEER, None) == (
        f"worker agent {ENGINEER!r} must act with its own caller_job_id")
    assert message(PermissionError, resolve_caller, sess, profile, ENGINEER, "nope-0001") == (
        "caller job 'nope-0001' does not exist")
    mine = job(ENGINEER, depth=2)
    assert resolve_caller(sess, profile, ENGINEER, mine["job_id"]) == Caller(
        ENGINEER, mine["job_id"], 2)
    undepthed = job(ENGINEER)
    assert resolve_caller(sess, profile, ENGINEER, undepthed["job_id"]).depth == 1
    for status in ("queued", "waiting", "detached"):
        live = job(ENGINEER, status=status)
        assert resolve_caller(sess, profile, ENGINEER, live["job_id"]).job_id == live["job_id"]


def test_a_caller_job_must_be_the_callers_own_live_job(profile, cwd):
    sess = session(cwd)
    other_session = job(ENGINEER, session_id="20260101-000000-other-000000")
    assert message(PermissionError, resolve_caller, sess, profile, ENGINEER,
                   other_session["job_id"]) == (
        f"caller job {other_session['job_id']} is not a job of agent {ENGINEER!r} in session "
        f"{SID}")
    other_agent = job(FLAGSHIP)
    assert message(PermissionError, resolve_caller, sess, profile, ENGINEER,
                   other_agent["job_id"]).startswith(f"caller job {other_agent['job_id']} is not")
    for status in ("paused", "suspended", "completed"):
        stale = job(ENGINEER, status=status)
        assert message(PermissionError, resolve_caller, sess, profile, ENGINEER,
                       stale["job_id"]) == (
            f"caller job {stale['job_id']} is not live (status {status})")
    gone = job(ENGINEER, runner_pid=2**22 + 12345, runner_start_token="gone")
    assert "is not live (status running)" in message(
        PermissionError, resolve_caller, sess, profile, ENGINEER, gone["job_id"])
    me = job(ENGINEER, runner_pid=os.getpid(), runner_start_token=process_start_token(os.getpid()))
    assert resolve_caller(sess, profile, ENGINEER, me["job_id"]).job_id == me["job_id"]


# -- per-item checks ----------------------------------------------------------------


def test_authority_names_the_spawnable_agents_and_the_depth(profile, cwd):
    context = ctx(profile, cwd)
    assert message(ValueError, check_item, context, spec("ghost", task="t")) == (
        f"unknown agent 'ghost'; agents: {', '.join(profile.agents)}")
    worker = ctx(profile, cwd, Caller(SCOUT, "j", 0))
    assert message(PermissionError, check_item, worker, spec(FLAGSHIP, task="t")) == (
        f"agent {SCOUT!r} may not spawn {FLAGSHIP!r} (can_spawn: none)")
    root_at_depth = ctx(profile, cwd, Caller(ROOT, None, 1))
    assert message(PermissionError, check_item, root_at_depth, spec(FLAGSHIP, task="t")) == (
        "delegation depth 2 exceeds max_depth 1")
    not_listed = ctx(profile, cwd, Caller(ROOT, None, 0))
    assert check_item(not_listed, spec(FLAGSHIP, task="t")).agent == FLAGSHIP


def test_an_unavailable_route_is_refused_with_its_reason(profile, cwd):
    route = profile.agents[FLAGSHIP].route
    for state, reason in (({"available": False, "reason": "no key"}, "no key"),
                          ({"available": False}, "unavailable"), ({}, "unavailable")):
        context = ctx(profile, cwd, route_availability={route: state})
        with pytest.raises(AdmissionError) as info:
            check_route(context, FLAGSHIP, profile.agents[FLAGSHIP])
        assert str(info.value) == f"route {route} of agent {FLAGSHIP} is unavailable: {reason}"
        assert info.value.reason == "route_unavailable"
    check_route(ctx(profile, cwd, route_availability={route: {"available": True}}), FLAGSHIP,
                profile.agents[FLAGSHIP])
    check_route(ctx(profile, cwd, route_availability={"other": {"available": False}}), FLAGSHIP,
                profile.agents[FLAGSHIP])
    check_route(ctx(profile, cwd, route_availability=None), FLAGSHIP, profile.agents[FLAGSHIP])


def test_task_rules_for_standard_and_low_trust_agents(profile, cwd):
    context = ctx(profile, cwd)
    for task in (None, "", "  \n"):
        assert message(ValueError, check_item, context, spec(FLAGSHIP, task=task)) == (
            f"a task is required to spawn {FLAGSHIP!r}")
    literal = {"operation": "summarize_supplied", "text": "some text"}
    assert message(ValueError, check_item, context, spec(FLAGSHIP, literal_task=literal)) == (
        f"literal_task is for low-trust agents; {FLAGSHIP!r} takes a task")
    expected = (f"low-trust agents accept literal_task only (agent {SCOUT!r}); operations: "
                "summarize_supplied, locate")
    assert message(ValueError, check_item, context, spec(SCOUT, task="t")) == expected
    assert message(ValueError, check_item, context,
                   spec(SCOUT, task="t", literal_task=literal)) == expected
    assert message(PermissionError, check_item, context,
                   spec(SCOUT, literal_task=literal, mode="workspace-write")) == (
        f"low-trust agent {SCOUT!r} never writes (read-only only)")
    item = check_item(context, spec(SCOUT, literal_task=literal, task_kind="summary"))
    parsed = parse_literal_task(literal, ["summarize_supplied", "locate"])
    assert (item.task_text, item.literal_input_sha256, item.task, item.literal_task,
            item.task_kind, item.mode) == (literal_task_text(parsed), input_sha256(parsed),
                                           None, literal, "summary", "read-only")


def test_an_admitted_item_carries_everything_the_record_needs(profile, cwd):
    context = ctx(profile, cwd)
    item = check_item(context, spec(ENGINEER, task="fix it", task_kind="bug",
                                     mode="workspace-write", write_scopes=["src/", "src/a"]))
    assert item == Admitted(agent=ENGINEER, spec=profile.agents[ENGINEER],
                            mode="workspace-write", task_text="fix it", task_kind="bug",
                            task="fix it", literal_task=None, write_scope=["src"],
                            write_scope_resolved=[str((cwd / "src").resolve())], attachments=[],
                            literal_input_sha256=None)
    reader = check_item(context, spec(FLAGSHIP, task="look"))
    assert (reader.write_scope, reader.write_scope_resolved, reader.attachments) == ([], [], [])
    assert message(ValueError, check_item, context,
                   spec(ENGINEER, task="t", mode="workspace-write")) == (
        "this agent requires an explicit write scope (write_scopes) for workspace-write")
    assert message(ValueError, check_item, context,
                   spec(ENGINEER, task="t", write_scopes=["src"])) == (
        "write_scopes only apply to mode workspace-write")
    assert message(PermissionError, check_item, context,
                   spec(FLAGSHIP, task="t", mode="workspace-write")) == (
        f"agent {FLAGSHIP!r} is read-only and cannot take workspace-write")
    assert check_item(context, spec(ENGINEER, task="t", write_scopes=[])).write_scope == []


def test_a_whole_workspace_scope_resolves_to_the_cwd(profile, cwd):
    writer = check_item(ctx(profile, cwd), spec(ENGINEER, task="t", mode="workspace-write",
                                                 write_scopes=["."]))
    assert writer.write_scope == ["."] and writer.write_scope_resolved == [str(cwd.resolve())]


def test_attachments_need_an_agent_that_accepts_images(profile, cwd):
    context = ctx(profile, cwd)
    (cwd / "shot.png").write_bytes(b"png")
    assert message(ValueError, check_item, context,
                   spec(FLAGSHIP, task="t", attachments=["shot.png"])) == (
        f"agent {FLAGSHIP!r} does not accept image attachments")
    assert check_item(context, spec(FLAGSHIP, task="t", attachments=[])).attachments == []


def test_attachments_are_existing_files_under_the_cwd(profile, cwd):
    seeing = profile.agents[FLAGSHIP].model_copy(update={"accepts_images": True})
    context = ctx(profile, cwd)
    (cwd / "shot.png").write_bytes(b"png")
    (cwd / "dir").mkdir()
    assert admission._attachments(context, FLAGSHIP, seeing, ["shot.png", "./shot.png"]) == [
        str((cwd / "shot.png").resolve())] * 2
    for bad in ("missing.png", "dir"):
        assert message(ValueError, admission._attachments, context, FLAGSHIP, seeing,
                       [bad]) == f"attachment {bad!r} is not a file"
    assert admission._attachments(context, FLAGSHIP, seeing, None) == []


# -- the batch: conflicts and capacity ----------------------------------------------


def _writer(profile, cwd, scope):
    return check_item(ctx(profile, cwd), spec(ENGINEER, task="t", mode="workspace-write",
                                              write_scopes=[scope]))


def _reader(profile, cwd, agent=FLAGSHIP):
    return check_item(ctx(profile, cwd), spec(agent, task="t") if agent != SCOUT else spec(
        SCOUT, literal_task={"operation": "summarize_supplied", "text": "x"}))


def test_conflicts_with_live_writers_and_within_the_batch(profile, cwd):
    src = str((cwd / "src").resolve())
    live = [{"job_id": "w1", "mode": "workspace-write", "write_scope_resolved": [src]},
            {"job_id": "r1", "mode": "read-only", "write_scope_resolved": [src]},
            {"job_id": "w2", "mode": "workspace-write"}]
    with pytest.raises(AdmissionError) as info:
        check_conflicts([_writer(profile, cwd, "src/x")], live)
    assert str(info.value) == (f"write scope conflicts: {src + '/x'!r} overlaps {src!r} of live "
                               "writer w1")
    check_conflicts([_writer(profile, cwd, "lib"), _reader(profile, cwd)], live)
    with pytest.raises(AdmissionError) as info:
        check_conflicts([_writer(profile, cwd, "lib"), _writer(profile, cwd, "lib/a")], [])
    assert "of live writer (batch item 0)" in str(info.value)
    check_conflicts([_writer(profile, cwd, "a"), _writer(profile, cwd, "b")], [])


def _capacity_error(call):
    with pytest.raises(AdmissionError) as info:
        call()
    assert info.value.reason == "capacity"
    return str(info.value)


def test_session_capacity_counts_this_sessions_live_jobs_and_the_batch(profile, cwd):
    context = ctx(profile, cwd)
    mine = [{"job_id": f"j{i}", "session_id": SID, "agent": SCOUT} for i in range(2)]
    others = [{"job_id": f"o{i}", "session_id": "other", "agent": SCOUT} for i in range(5)]
    check_capacity(context, [_reader(profile, cwd)], mine + others)  # 2 + 1 == 3 is admitted
    assert _capacity_error(lambda: check_capacity(
        context, [_reader(profile, cwd), _reader(profile, cwd, SCOUT)], mine + others)) == (
        f"active-agent limit reached: session {SID} max_active_agents allows 3, 2 live and "
        "2 requested")


def test_writer_and_agent_capacity(profile, cwd):
    context = ctx(profile, cwd)
    live_writer = [{"job_id": "w", "session_id": SID, "agent": ROOT, "mode": "workspace-write"}]
    check_capacity(context, [_writer(profile, cwd, "src")], [])
    assert _capacity_error(lambda: check_capacity(
        context, [_writer(profile, cwd, "src")], live_writer)) == (
        f"active-agent limit reached: session {SID} max_active_writers allows 1, 1 live and "
        "1 requested")
    check_capacity(context, [_reader(profile, cwd)], live_writer)  # readers ignore the writer cap
    flagship_live = [{"job_id": "f", "session_id": SID, "agent": FLAGSHIP}]
    assert _capacity_error(lambda: check_capacity(
        context, [_reader(profile, cwd)], flagship_live)) == (
        f"active-agent limit reached: agent {FLAGSHIP} max_active allows 1, 1 live and "
        "1 requested")
    scouts = [_reader(profile, cwd, SCOUT), _reader(profile, cwd, SCOUT)]
    check_capacity(context, scouts, [])  # max_active 2 reached exactly
    other_session = [{"job_id": "f", "session_id": "other", "agent": FLAGSHIP}]
    check_capacity(context, [_reader(profile, cwd)], other_session)
    assert profile.agents[ROOT].max_active is None


def test_resource_pools_count_units_across_sessions(profile, cwd):
    from mmo_kernel.config.settings import set_setting

    context = ctx(profile, cwd)
    assert pool_capacity(profile, "zai-coding") == 3  # the profile's max_active_agents
    set_setting("resource_pools", {"zai-coding": 2})
    assert pool_capacity(profile, "zai-coding") == 2
    assert pool_capacity(profile, "other-pool") == 3
    one_unit = [{"job_id": "z", "session_id": "other", "agent": ENGINEER,
                 "resource_lock_key": "zai-coding"}]
    check_capacity(context, [_writer(profile, cwd, "src")], one_unit)  # 1 + 1 == 2
    two_units = [{**one_unit[0], "resource_units": 2}]
    assert _capacity_error(lambda: check_capacity(
        context, [_writer(profile, cwd, "src")], two_units)) == (
        "active-agent limit reached: resource pool 'zai-coding' (across sessions) allows 2, "
        "2 live and 1 requested")
    unrelated = [{**one_unit[0], "resource_lock_key": "other", "resource_units": 9}]
    check_capacity(context, [_writer(profile, cwd, "src")], unrelated)


def test_admit_checks_the_whole_batch_against_live_jobs(profile, cwd):
    context = ctx(profile, cwd)
    items = admit(context, [spec(FLAGSHIP, task="a"), spec(ENGINEER, task="b",
                                                           mode="workspace-write",
                                                           write_scopes=["src"])])
    assert [i.agent for i in items] == [FLAGSHIP, ENGINEER]
    with pytest.raises(AdmissionError, match="max_active_agents allows 3, 0 live and 4"):
        admit(context, [spec(FLAGSHIP, task="a")] + [
            spec(SCOUT, literal_task={"operation": "summarize_supplied", "text": "x"})] * 3)

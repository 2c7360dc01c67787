"""Arguments and tool offers are checked before any API call (hand-laid session records).

A refused call answers ``-32602`` and changes nothing: no job record appears.
"""

from __future__ import annotations

from kernel.mesh.meshkit import call, make_session, session_call

INVALID_ARGUMENTS = [
    ("agent_spawn", {"agent": "builder", "surprise": 1}, "surprise"),
    ("agent_spawn", {"agent": "nobody"}, "must be one of builder, reviewer, scout"),
    ("agent_spawn", {"agent": "builder", "mode": "god-mode"}, "mode"),
    ("agents_spawn", {"agents": [{"agent": "builder"}, {"agent": "lead"}]}, "agents.1.agent"),
    ("agents_spawn", {"agents": []}, "agents"),
    ("agent_status", {"job_ids": "j1"}, "job_ids"),
    ("agent_result", {"job_id": "j1", "cursor": "0"}, "cursor"),
    ("agent_result", {"job_id": "j1", "cursor": -1}, "cursor"),
    ("agent_steer", {"job_id": "j1", "expected_revision": True, "input": "x"},
     "expected_revision"),
    ("agent_steer", {"job_id": "j1", "input": "x"}, "expected_revision"),
    ("agents_wait", {"job_ids": ["j1"], "include_results": "yes"}, "include_results"),
    ("agent_result_accept", {"job_id": "j1"}, "reason"),
    ("agent_cancel", {"job_id": "j1", "reason": "x" * 501}, "reason"),
    ("agent_status", [], "arguments must be an object"),
]


def _no_jobs(state_dir) -> bool:
    jobs = state_dir / "jobs"
    return not jobs.exists() or not any(jobs.iterdir())


def test_invalid_arguments_are_invalid_params_and_change_nothing(mmo_env):
    session = make_session(mmo_env.state_dir)
    calls = [call(i, tool, arguments) for i, (tool, arguments, _) in enumerate(INVALID_ARGUMENTS)]
    run = session_call(session.root_env(), *calls)
    for i, (tool, arguments, fragment) in enumerate(INVALID_ARGUMENTS):
        error = run.by_id(i)["error"]
        assert error["code"] == -32602, (tool, arguments)
        assert error["data"].startswith("invalid tool arguments"), error
        assert fragment in error["data"], (fragment, error["data"])
        # The MCP Inspector (and most clients) show only the message: it carries the reason too.
        assert error["message"] == f"invalid params: {error['data']}", error
    assert _no_jobs(mmo_env.state_dir)


def test_an_unknown_tools_message_names_it(mmo_env):
    session = make_session(mmo_env.state_dir)
    run = session_call(session.root_env(), call(2, "agent_teleport", {}))
    error = run.by_id(2)["error"]
    assert error["code"] == -32602 and "unknown tool" in error["data"]
    assert error["message"] == f"invalid params: {error['data']}", error
    assert "agent_teleport" in error["message"]


def test_agents_wait_timeout_is_clamped_to_the_documented_maximum_and_says_so(mmo_env):
    session = make_session(mmo_env.state_dir)
    done, _ = session.add_job("builder", status="completed")
    quick = {"job_ids": [done], "include_results": False}
    run = session_call(
        session.root_env(),
        call(2, "agents_wait", {**quick, "timeout_seconds": 1e9}),
        call(3, "agents_wait", {**quick, "timeout_seconds": 5}),
        call(4, "agents_wait", {**quick, "timeout_seconds": -1}),
    )
    clamped = run.by_id(2)["result"]["structuredContent"]
    assert clamped["unfinished"] == [] and clamped["timeout_seconds"] == 1200
    assert "maximum of 1200" in clamped["timeout_note"] and "1e+09" in clamped["timeout_note"]
    within = run.by_id(3)["result"]["structuredContent"]
    assert within["unfinished"] == [] and "timeout_note" not in within
    negative = run.by_id(4)["error"]
    assert negative["code"] == -32602 and "timeout_seconds" in negative["message"]


def test_tools_not_offered_to_a_worker_are_unknown_tools(mmo_env):
    session = make_session(mmo_env.state_dir)
    job_id, token = session.add_job("reviewer")
    tools = ["agent_teleport", "agent_progress", "agent_result_accept", "agent_patch_integrate",
             "agent_cancel", "agent_spawn"]
    run = session_call(
        session.worker_env("reviewer", job_id, token),
        *[call(i, tool, {"job_id": "j1", "reason": "r"}) for i, tool in enumerate(tools)],
    )
    for i, tool in enumerate(tools):
        error = run.by_id(i)["error"]
        assert error["code"] == -32602 and "unknown tool" in error["data"], (tool, error)


def test_tainted_root_cannot_call_spawn_or_integrate(mmo_env):
    session = make_session(mmo_env.state_dir, tainted=True)
    run = session_call(
        session.root_env(),
        call(2, "agent_spawn", {"agent": "builder"}),
        call(3, "agent_patch_integrate", {"job_id": "j1", "reason": "r"}),
    )
    assert "unknown tool" in run.by_id(2)["error"]["data"]
    assert "unknown tool" in run.by_id(3)["error"]["data"]
    assert _no_jobs(mmo_env.state_dir)


def test_a_forged_caller_cannot_call_anything(mmo_env):
    session = make_session(mmo_env.state_dir)
    run = session_call(
        session.root_env(MMO_CALLER_TOKEN="forged"), call(2, "agent_cancel", {"job_id": "j1"})
    )
    assert "invalid MCP caller capability" in run.by_id(2)["error"]["message"]

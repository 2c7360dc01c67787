"""tools/call dispatch to ``mmo_kernel.api`` — FAKE API LAYER TESTS.

LEAD: the jobs layer (spawn_job, wait_for_jobs, read_result, ...) does not
exist yet, so these tests run the real server with ``tests/mesh/fake_api.py``
installed as ``mmo_kernel.api`` (see fake_api_server.py). They pin how the
mesh calls the API (keyword names, caller identity), the redaction of
supervisor paths, and error mapping. Replace them with real-jobs tests when
the API lands. Argument validation and unknown-tool checks need no API and
are real.
"""

from __future__ import annotations

import json

import pytest
from mesh.meshkit import call, make_session, session_call


@pytest.fixture
def fake_log(tmp_path, monkeypatch):
    path = tmp_path / "api-calls.jsonl"
    monkeypatch.setenv("MESH_FAKE_API_LOG", str(path))
    return path


def _api_calls(path):
    return [json.loads(raw) for raw in path.read_text().splitlines()] if path.exists() else []


def _run(env, *calls):
    return session_call(env, *calls, fake_api=True)


def _paths_in(value):
    text = json.dumps(value)
    return [
        k
        for k in (
            "result_path",
            "events_path",
            "stderr_path",
            "socket_path",
            "full_result_path",
            "control_socket_path",
            "partial_result_path",
            "structured_result_path",
            '"home"',
            '"command"',
            "mcp_caller_token_hash",
        )
        if k in text
    ]


def test_root_spawn_calls_spawn_job_with_api_keywords_and_hides_supervisor_paths(mmo_env, fake_log):
    session = make_session(mmo_env.state_dir)
    run = _run(
        session.root_env(),
        call(
            2,
            "agent_spawn",
            {
                "agent": "builder",
                "task": "write it",
                "mode": "workspace-write",
                "write_scopes": ["src"],
            },
        ),
    )
    result = run.by_id(2)["result"]
    assert result["isError"] is False
    assert result["structuredContent"]["job"]["job_id"] == "job-new"
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]
    assert len(result["content"]) == 1 and result["content"][0]["type"] == "text"
    assert _paths_in(result) == []
    assert result["structuredContent"]["job"]["patch"] == {"changed_paths": ["src/a.py"]}
    [made] = _api_calls(fake_log)
    assert made == {
        "function": "spawn_job",
        "args": [],
        "kwargs": {
            "agent_id": "builder",
            "task_kind": None,
            "task": "write it",
            "mode": "workspace-write",
            "write_scope_values": ["src"],
            "literal_task": None,
            "attachments": None,
            "session_id": session.session_id,
            "caller_agent": "lead",
            "caller_job_id": None,
        },
    }


def test_worker_spawn_acts_with_its_own_job_id(mmo_env, fake_log):
    session = make_session(mmo_env.state_dir)
    job_id, token = session.add_job("builder")
    run = _run(
        session.worker_env("builder", job_id, token),
        call(2, "agents_spawn", {"agents": [{"agent": "scout", "task": "look"}]}),
    )
    assert run.by_id(2)["result"]["isError"] is False
    [made] = _api_calls(fake_log)
    assert made["function"] == "spawn_jobs"
    assert made["args"] == [
        [
            {
                "agent": "scout",
                "task_kind": None,
                "task": "look",
                "mode": "read-only",
                "write_scopes": None,
                "literal_task": None,
                "attachments": None,
            }
        ]
    ]
    assert made["kwargs"] == {
        "session_id": session.session_id,
        "caller_agent": "builder",
        "caller_job_id": job_id,
    }


def test_native_agent_calls_with_its_parents_authority(mmo_env, fake_log):
    session = make_session(mmo_env.state_dir)
    env = {
        **session.root_env(),
        "MMO_CALLER_NATIVE": "1",
        "MMO_NATIVE_CALLER_TOKEN": session.native_tokens["lead"]["helper"],
    }
    run = _run(env, call(2, "agent_cancel", {"job_id": "j1", "reason": "enough"}))
    assert run.by_id(2)["result"]["isError"] is False
    [made] = _api_calls(fake_log)
    assert made["kwargs"]["caller_agent"] == "lead" and made["kwargs"]["caller_job_id"] is None


def test_status_reads_jobs_of_the_session_only(mmo_env, fake_log):
    session = make_session(mmo_env.state_dir)
    mine, _ = session.add_job("builder")
    theirs, _ = session.add_job("builder", session_id="20260101-000000-other-000000")
    run = _run(
        session.root_env(),
        call(2, "agent_status", {"job_ids": [mine]}),
        call(3, "agent_status", {"job_ids": [theirs]}),
    )
    [job] = run.by_id(2)["result"]["structuredContent"]["jobs"]
    assert job["job_id"] == mine and job["status"] == "running" and job["runtime_current"] is True
    assert _paths_in(job) == []
    other = run.by_id(3)["result"]
    assert other["isError"] is True and other["content"][0]["text"].startswith(
        "FileNotFoundError: "
    )


def test_every_tool_reaches_its_api_function_with_the_callers_identity(mmo_env, fake_log):
    session = make_session(mmo_env.state_dir)
    calls = {
        "agents_wait": {"job_ids": ["j1"], "timeout_seconds": 5, "after_revision": {"j1": 2}},
        "agent_result": {"job_id": "j1", "cursor": 10, "max_chars": 50},
        "agent_result_accept": {"job_id": "j1", "reason": "good"},
        "agent_result_reject": {"job_id": "j1", "reason": "bad"},
        "agent_patch_integrate": {"job_id": "j1", "reason": "ship"},
        "agent_inspect": {"job_id": "j1"},
        "agent_trace": {"job_id": "j1", "cursor": 3},
        "agent_trace_record": {"agent_run_ref": "ref-1", "record_cursor": 4},
        "agent_steer": {"job_id": "j1", "expected_revision": 2, "input": "focus"},
        "agent_set_effort": {"job_id": "j1", "expected_revision": 3, "effort": "high"},
        "agent_respond": {
            "job_id": "j1",
            "expected_revision": 4,
            "request_id": 7,
            "response": {"decision": "accept"},
        },
        "agent_stop": {"job_id": "j1", "expected_revision": 5},
        "agent_fork": {"job_id": "j1", "expected_revision": 6, "task": "try again"},
    }
    run = _run(
        session.root_env(), *[call(i, name, args) for i, (name, args) in enumerate(calls.items())]
    )
    for i, name in enumerate(calls):
        result = run.by_id(i)["result"]
        assert result["isError"] is False, (name, result)
        assert _paths_in(result) == [], name
    made = {
        (c["function"], c["args"][1] if c["function"] == "control_job" else None): c
        for c in _api_calls(fake_log)
    }
    who = {"session_id": session.session_id, "caller_agent": "lead", "caller_job_id": None}
    assert made[("wait_for_jobs", None)]["kwargs"] == {
        "session_id": session.session_id,
        "timeout_seconds": 5.0,
        "include_results": True,
        "after_revision": {"j1": 2},
    }
    assert made[("read_result", None)]["kwargs"] == {"cursor": 10, "max_chars": 50, **who}
    assert made[("accept_result", None)]["kwargs"] == {"reason": "good", **who}
    assert made[("reject_result", None)]["kwargs"] == {"reason": "bad", **who}
    assert made[("integrate_patch", None)]["kwargs"] == {"reason": "ship", **who}
    assert made[("inspect_job", None)]["kwargs"] == who
    assert made[("read_trace", None)]["kwargs"] == {
        "session_id": session.session_id,
        "caller_agent": "lead",
        "cursor": 3,
        "limit": 50,
    }
    assert made[("read_agent_trace_record", None)]["args"] == ["ref-1"]
    assert made[("control_job", "steer")]["kwargs"] == {
        "expected_revision": 2,
        "input": "focus",
        **who,
    }
    assert made[("control_job", "set_effort")]["kwargs"]["effort"] == "high"
    assert made[("control_job", "respond")]["kwargs"]["response"] == {"decision": "accept"}
    assert made[("control_job", "stop")]["kwargs"] == {"expected_revision": 5, **who}
    assert made[("fork_job", None)]["kwargs"] == {
        "source_job_id": "j1",
        "expected_revision": 6,
        "task_kind": None,
        "task": "try again",
        **who,
    }


def test_a_raising_tool_is_a_normal_result_with_is_error(mmo_env, fake_log):
    session = make_session(mmo_env.state_dir)
    run = _run(
        session.root_env(),
        call(2, "agent_result", {"job_id": "missing"}),
        call(3, "agent_cancel", {"job_id": "foreign"}),
        call(4, "agent_spawn", {"agent": "builder", "task": "refuse"}),
    )
    missing = run.by_id(2)["result"]
    assert missing["isError"] is True
    assert missing["content"] == [
        {"type": "text", "text": "FileNotFoundError: unknown job missing"}
    ]
    assert run.by_id(3)["result"]["content"][0]["text"].startswith("PermissionError: ")
    refused = run.by_id(4)["result"]
    assert refused["content"][0]["text"].startswith("AdmissionError: active-agent limit")
    assert refused["structuredContent"]["error"]["reason"] == "capacity"


INVALID_ARGUMENTS = [
    ("agent_spawn", {"agent": "builder", "surprise": 1}, "surprise"),
    ("agent_spawn", {"agent": "nobody"}, "must be one of builder, reviewer, scout"),
    ("agent_spawn", {"agent": "builder", "mode": "god-mode"}, "mode"),
    ("agents_spawn", {"agents": [{"agent": "builder"}, {"agent": "lead"}]}, "agents.1.agent"),
    ("agents_spawn", {"agents": []}, "agents"),
    ("agent_status", {"job_ids": "j1"}, "job_ids"),
    ("agent_result", {"job_id": "j1", "cursor": "0"}, "cursor"),
    ("agent_result", {"job_id": "j1", "cursor": -1}, "cursor"),
    (
        "agent_steer",
        {"job_id": "j1", "expected_revision": True, "input": "x"},
        "expected_revision",
    ),
    ("agent_steer", {"job_id": "j1", "input": "x"}, "expected_revision"),
    ("agents_wait", {"job_ids": ["j1"], "include_results": "yes"}, "include_results"),
    ("agent_result_accept", {"job_id": "j1"}, "reason"),
    ("agent_status", [], "arguments must be an object"),
]


def test_invalid_arguments_are_invalid_params_and_call_nothing(mmo_env, fake_log):
    session = make_session(mmo_env.state_dir)
    calls = [call(i, tool, arguments) for i, (tool, arguments, _) in enumerate(INVALID_ARGUMENTS)]
    run = _run(session.root_env(), *calls)
    for i, (tool, arguments, fragment) in enumerate(INVALID_ARGUMENTS):
        error = run.by_id(i)["error"]
        assert error["code"] == -32602 and error["message"] == "invalid params", (tool, arguments)
        assert error["data"].startswith("invalid tool arguments"), error
        assert fragment in error["data"], (fragment, error["data"])
    assert _api_calls(fake_log) == []


def test_tools_not_offered_to_a_worker_are_unknown_tools(mmo_env, fake_log):
    session = make_session(mmo_env.state_dir)
    job_id, token = session.add_job("reviewer")
    tools = [
        "agent_teleport",
        "agent_progress",
        "agent_result_accept",
        "agent_patch_integrate",
        "agent_cancel",
        "agent_spawn",
    ]
    run = _run(
        session.worker_env("reviewer", job_id, token),
        *[call(i, tool, {"job_id": "j1", "reason": "r"}) for i, tool in enumerate(tools)],
    )
    for i, tool in enumerate(tools):
        error = run.by_id(i)["error"]
        assert error["code"] == -32602 and "unknown tool" in error["data"], (tool, error)
    assert _api_calls(fake_log) == []


def test_tainted_root_cannot_call_spawn_or_integrate(mmo_env, fake_log):
    session = make_session(mmo_env.state_dir, tainted=True)
    run = _run(
        session.root_env(),
        call(2, "agent_spawn", {"agent": "builder"}),
        call(3, "agent_patch_integrate", {"job_id": "j1", "reason": "r"}),
    )
    assert "unknown tool" in run.by_id(2)["error"]["data"]
    assert "unknown tool" in run.by_id(3)["error"]["data"]
    assert _api_calls(fake_log) == []


def test_a_forged_caller_cannot_call_anything(mmo_env, fake_log):
    session = make_session(mmo_env.state_dir)
    run = _run(
        session.root_env(MMO_CALLER_TOKEN="forged"), call(2, "agent_cancel", {"job_id": "j1"})
    )
    assert "invalid MCP caller capability" in run.by_id(2)["error"]["message"]
    assert _api_calls(fake_log) == []

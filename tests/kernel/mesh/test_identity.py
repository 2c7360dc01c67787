"""Caller identity: verified from env against the state dir before any tool is listed or called."""

from __future__ import annotations

import hashlib
import json
import os
from contextlib import contextmanager

import pytest
from kernel.mesh.meshkit import INIT, MeshProc, call, line, make_session, req, session_call

from mmo_kernel.mesh.capabilities import (
    CapabilityUnavailable,
    read_capabilities,
    write_capabilities,
)
from mmo_kernel.mesh.tokens import hash_matches, mint_token, token_hash


def _list_error(env):
    run = session_call(env, req(2, "tools/list"), call(3, "agent_status", {"job_ids": ["x"]}))
    listed, called = run.by_id(2), run.by_id(3)
    assert "result" not in listed and "result" not in called, (listed, called)
    assert listed["error"]["message"] == called["error"]["message"]
    return listed["error"]


def _tool_names(env):
    run = session_call(env, req(2, "tools/list"))
    return [t["name"] for t in run.by_id(2)["result"]["tools"]]


@contextmanager
def _live_server(env):
    """One initialized server; yields a function doing one ``tools/list`` round trip."""
    server = MeshProc(env)
    counter = iter(range(1, 10_000))
    try:
        server.send(line(INIT))
        assert json.loads(server.read_line())["id"] == "init"

        def list_tools():
            rid = next(counter)
            server.send(line(req(rid, "tools/list")))
            reply = json.loads(server.read_line())
            assert reply["id"] == rid
            return reply

        yield list_tools
    finally:
        assert server.close() == 0


def test_mint_token_returns_a_fresh_token_and_its_sha256():
    token, digest = mint_token()
    other, _ = mint_token()
    assert token != other and len(token) >= 32
    assert digest == hashlib.sha256(token.encode()).hexdigest() == token_hash(token)
    assert hash_matches(token, digest) and not hash_matches(other, digest)
    with pytest.raises(ValueError):
        token_hash("")


def test_root_with_its_token_is_verified(mmo_env):
    session = make_session(mmo_env.state_dir)
    assert "agent_spawn" in _tool_names(session.root_env())


@pytest.mark.parametrize("token", ["wrong-token", "x" * 43])
def test_wrong_root_token_is_an_invalid_capability(mmo_env, token):
    session = make_session(mmo_env.state_dir)
    error = _list_error(session.root_env(MMO_CALLER_TOKEN=token))
    assert "invalid MCP caller capability" in error["message"]
    assert session.root_token not in error["message"] and token not in error["message"]


def test_root_hash_presented_as_token_is_refused(mmo_env):
    session = make_session(mmo_env.state_dir)
    error = _list_error(session.root_env(MMO_CALLER_TOKEN=token_hash(session.root_token)))
    assert "invalid MCP caller capability" in error["message"]


def test_root_token_claiming_a_non_root_agent_is_refused(mmo_env):
    session = make_session(mmo_env.state_dir)
    error = _list_error(session.root_env(MMO_CALLER_AGENT="builder"))
    assert error["message"].startswith("only the root role")


@pytest.mark.parametrize(
    "missing", ["MMO_ROOT_SESSION_ID", "MMO_CALLER_AGENT", "MMO_CALLER_TOKEN", "MMO_RUN_ID"]
)
def test_missing_identity_variables_are_refused(mmo_env, missing):
    session = make_session(mmo_env.state_dir)
    error = _list_error(session.root_env(**{missing: None}))
    assert error["message"] == f"invalid MCP caller capability: {missing} is not set"


@pytest.mark.parametrize("session_id", ["no-such-session", "../../etc", "a/b"])
def test_unknown_or_malformed_session_is_refused(mmo_env, session_id):
    session = make_session(mmo_env.state_dir)
    error = _list_error(session.root_env(MMO_ROOT_SESSION_ID=session_id))
    assert "invalid MCP caller capability" in error["message"]


def test_wrong_run_id_is_refused(mmo_env):
    session = make_session(mmo_env.state_dir)
    error = _list_error(session.root_env(MMO_RUN_ID="20260101-000000-run-other"))
    assert "invalid MCP caller capability" in error["message"] and "run" in error["message"]


def test_terminated_session_without_capabilities_file_is_refused(mmo_env):
    session = make_session(mmo_env.state_dir)
    (session.dir / "capabilities.json").unlink()
    error = _list_error(session.root_env())
    assert "invalid MCP caller capability" in error["message"]
    assert "capability is unavailable" in error["message"]


def test_terminal_session_is_refused_even_with_the_right_token(mmo_env):
    session = make_session(mmo_env.state_dir)
    with _live_server(session.root_env()) as list_tools:
        assert "result" in list_tools()
        for status in ("completed", "failed", "cancelled", "stopped"):
            session.update(status=status)
            error = list_tools()["error"]
            assert "invalid MCP caller capability" in error["message"], status
            assert status in error["message"]


def test_capabilities_file_readable_by_others_is_refused(mmo_env):
    session = make_session(mmo_env.state_dir)
    os.chmod(session.dir / "capabilities.json", 0o644)
    assert "not private" in _list_error(session.root_env())["message"]


def test_capabilities_symlink_is_refused(mmo_env, tmp_path):
    session = make_session(mmo_env.state_dir)
    real = tmp_path / "elsewhere.json"
    (session.dir / "capabilities.json").rename(real)
    (session.dir / "capabilities.json").symlink_to(real)
    assert "capability is unavailable" in _list_error(session.root_env())["message"]


def test_session_hash_disagreeing_with_capabilities_file_is_refused(mmo_env):
    session = make_session(mmo_env.state_dir)
    session.update(root_mcp_token_hash=mint_token()[1])
    assert "disagree" in _list_error(session.root_env())["message"]


def test_capabilities_file_round_trip_is_private_and_strict(tmp_path):
    token, _ = mint_token()
    path = write_capabilities(
        tmp_path, root_mcp_token=token, native_agent_tokens={"lead": {"h": token}}
    )
    assert path.stat().st_mode & 0o777 == 0o600
    assert read_capabilities(tmp_path).root_mcp_token == token
    path.write_text(f'{{"schema_version": 1, "root_mcp_token": "{token}", "extra": 1}}')
    os.chmod(path, 0o600)
    with pytest.raises(CapabilityUnavailable, match="invalid capabilities file"):
        read_capabilities(tmp_path)
    path.write_text(f'{{"schema_version": true, "root_mcp_token": "{token}"}}')
    with pytest.raises(CapabilityUnavailable):
        read_capabilities(tmp_path)


# -- workers -------------------------------------------------------------------


def test_running_worker_with_its_token_is_verified(mmo_env):
    session = make_session(mmo_env.state_dir)
    job_id, token = session.add_job("builder")
    names = _tool_names(session.worker_env("builder", job_id, token))
    assert "agent_status" in names and "agent_result_accept" not in names


def _set_job_status(session, job_id, status):
    metadata = session.jobs_dir / job_id / "metadata.json"
    metadata.write_text(json.dumps({**json.loads(metadata.read_text()), "status": status}))


def test_worker_token_is_valid_only_while_the_job_runs(mmo_env):
    """Re-verified on every request: the same server follows the job's status."""
    session = make_session(mmo_env.state_dir)
    job_id, token = session.add_job("builder")
    with _live_server(session.worker_env("builder", job_id, token)) as list_tools:
        for status in ("running", "waiting", "detached"):
            _set_job_status(session, job_id, status)
            assert "result" in list_tools(), status
        for status in (
            "queued",
            "paused",
            "suspended",
            "completed",
            "failed",
            "cancelled",
            "stopped",
            "completed_with_warnings",
        ):
            _set_job_status(session, job_id, status)
            error = list_tools()["error"]
            assert "invalid MCP caller capability" in error["message"], status
            assert "not running" in error["message"], status


def test_worker_token_of_another_job_is_refused(mmo_env):
    session = make_session(mmo_env.state_dir)
    job_a, token_a = session.add_job("builder")
    job_b, _token_b = session.add_job("builder")
    error = _list_error(session.worker_env("builder", job_b, token_a))
    assert "invalid MCP caller capability" in error["message"]


def test_worker_token_for_another_agent_name_is_refused(mmo_env):
    session = make_session(mmo_env.state_dir)
    job_id, token = session.add_job("reviewer")
    error = _list_error(session.worker_env("builder", job_id, token))
    assert "invalid MCP caller capability" in error["message"]


def test_worker_job_of_another_session_is_refused(mmo_env):
    session = make_session(mmo_env.state_dir)
    job_id, token = session.add_job("builder", session_id="20260101-000000-other-000000")
    error = _list_error(session.worker_env("builder", job_id, token))
    assert "invalid MCP caller capability" in error["message"]


def test_worker_of_another_run_is_refused(mmo_env):
    session = make_session(mmo_env.state_dir)
    job_id, token = session.add_job("builder", run_id="20260101-000000-run-old")
    error = _list_error(session.worker_env("builder", job_id, token))
    assert "invalid MCP caller capability" in error["message"]


def test_root_token_presented_as_a_worker_is_refused(mmo_env):
    session = make_session(mmo_env.state_dir)
    job_id, _token = session.add_job("builder")
    error = _list_error(session.worker_env("builder", job_id, session.root_token))
    assert "invalid MCP caller capability" in error["message"]


@pytest.mark.parametrize("job_id", ["no-such-job", "../sessions", ".."])
def test_unknown_or_malformed_job_id_is_refused(mmo_env, job_id):
    session = make_session(mmo_env.state_dir)
    _real, token = session.add_job("builder")
    error = _list_error(session.worker_env("builder", job_id, token))
    assert "invalid MCP caller capability" in error["message"]


# -- native agents -------------------------------------------------------------


def _native_env(session, parent_env, token, name):
    """What a native agent's mesh entry presents: its own id, the parent's capability."""
    return {**parent_env, "MMO_CALLER_AGENT": name, "MMO_CALLER_NATIVE": "1",
            "MMO_NATIVE_CALLER_TOKEN": token}


def test_native_agent_of_the_root_gets_the_roots_tools(mmo_env):
    session = make_session(mmo_env.state_dir)
    native = _native_env(session, session.root_env(), session.native_tokens["lead"]["helper"],
                         "helper")
    assert _tool_names(native) == _tool_names(session.root_env())


@pytest.mark.parametrize("claimed", ["lead", "builder_helper", "scout"])
def test_a_native_token_is_valid_only_under_its_own_native_agents_id(mmo_env, claimed):
    session = make_session(mmo_env.state_dir)
    env = _native_env(session, session.root_env(), session.native_tokens["lead"]["helper"],
                      claimed)
    message = _list_error(env)["message"]
    assert message.startswith("invalid native-agent") and "'helper'" in message
    assert session.native_tokens["lead"]["helper"] not in message


def test_native_agent_of_a_worker_gets_the_workers_tools(mmo_env):
    session = make_session(mmo_env.state_dir)
    job_id, token = session.add_job("builder")
    parent = session.worker_env("builder", job_id, token)
    native = _native_env(session, parent, session.native_tokens["builder"]["builder_helper"],
                         "builder_helper")
    assert _tool_names(native) == _tool_names(parent)


def test_native_token_of_another_parent_is_refused(mmo_env):
    session = make_session(mmo_env.state_dir)
    native = _native_env(
        session, session.root_env(), session.native_tokens["builder"]["builder_helper"],
        "builder_helper",
    )
    assert _list_error(native)["message"].startswith("invalid native-agent")


@pytest.mark.parametrize("token", ["wrong", None])
def test_wrong_or_missing_native_token_is_refused(mmo_env, token):
    session = make_session(mmo_env.state_dir)
    env = session.root_env(MMO_CALLER_AGENT="helper", MMO_CALLER_NATIVE="1",
                           MMO_NATIVE_CALLER_TOKEN=token)
    assert _list_error(env)["message"].startswith("invalid native-agent")


def test_native_flag_with_a_bad_value_is_refused(mmo_env):
    session = make_session(mmo_env.state_dir)
    env = session.root_env(
        MMO_CALLER_AGENT="helper", MMO_CALLER_NATIVE="yes",
        MMO_NATIVE_CALLER_TOKEN=session.native_tokens["lead"]["helper"],
    )
    assert _list_error(env)["message"].startswith("invalid native-agent")


def test_native_agent_needs_a_valid_parent_capability_too(mmo_env):
    session = make_session(mmo_env.state_dir)
    env = _native_env(
        session,
        session.root_env(MMO_CALLER_TOKEN="forged"),
        session.native_tokens["lead"]["helper"],
        "helper",
    )
    assert "invalid MCP caller capability" in _list_error(env)["message"]


def test_native_agents_are_refused_in_a_tainted_session(mmo_env):
    session = make_session(mmo_env.state_dir, tainted=True)
    native = _native_env(session, session.root_env(), session.native_tokens["lead"]["helper"],
                         "helper")
    error = _list_error(native)
    assert error["message"].startswith("invalid native-agent") and "tainted" in error["message"]


# -- the caller's team (snapshot) ------------------------------------------------


def test_tampered_snapshot_profile_is_refused(mmo_env):
    """A profile edited after compilation (e.g. granting can_spawn) never widens a tool set."""
    session = make_session(mmo_env.state_dir)
    profile = session.snapshot_dir / "profile.json"
    os.chmod(profile, 0o644)
    doc = json.loads(profile.read_text())
    doc["agents"]["reviewer"]["can_spawn"] = ["builder"]
    profile.write_text(json.dumps(doc))
    job_id, token = session.add_job("reviewer")
    error = _list_error(session.worker_env("reviewer", job_id, token))
    assert error["code"] == -32603 and "failed integrity validation" in error["message"]


def test_snapshot_without_manifest_is_refused(mmo_env):
    session = make_session(mmo_env.state_dir)
    os.chmod(session.snapshot_dir, 0o755)
    (session.snapshot_dir / "manifest.json").unlink()
    assert "manifest.json" in _list_error(session.root_env())["message"]

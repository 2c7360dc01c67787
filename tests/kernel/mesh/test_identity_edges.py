"""Caller verification at its edges, in process (``verify_caller`` on real state-dir files).

``test_identity.py`` proves the refusals through the real ``mmo mcp`` server;
these pin each refusal's exact message and each accepted variant, so that a
changed comparison, default or phrase in ``mesh.identity`` / ``mesh.tokens`` /
``mesh.capabilities`` fails a test (``make mutate``).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
from kernel.mesh.meshkit import make_session

from mmo_kernel.mesh.capabilities import (
    CapabilityUnavailable,
    read_capabilities,
    write_capabilities,
)
from mmo_kernel.mesh.identity import Caller, IdentityError, verify_caller
from mmo_kernel.mesh.tokens import hash_matches, mint_token, token_hash

CAP = "invalid MCP caller capability"
NATIVE = "invalid native-agent capability"


@pytest.fixture
def session(mmo_env):
    return make_session(mmo_env.state_dir)


def root_env(session, **overrides):
    """Exactly the identity variables a root's mesh entry carries (no inherited environment)."""
    env = {"MMO_ROOT_SESSION_ID": session.session_id, "MMO_RUN_ID": session.run_id,
           "MMO_CALLER_AGENT": "lead", "MMO_CALLER_TOKEN": session.root_token}
    env.update(overrides)
    return {k: v for k, v in env.items() if v is not None}


def worker_env(session, agent, job_id, token, **overrides):
    return root_env(session, MMO_CALLER_AGENT=agent, MMO_CALLER_TOKEN=token,
                    MMO_CALLER_JOB_ID=job_id, **overrides)


def native_env(parent_env, name, token):
    return {**parent_env, "MMO_CALLER_AGENT": name, "MMO_CALLER_NATIVE": "1",
            "MMO_NATIVE_CALLER_TOKEN": token}


def refused(env, state_dir):
    with pytest.raises(IdentityError) as info:
        verify_caller(env, state_dir)
    return str(info.value)


def set_job(session, job_id, **fields):
    path = session.jobs_dir / job_id / "metadata.json"
    record = {**json.loads(path.read_text()), **fields}
    path.write_text(json.dumps({k: v for k, v in record.items() if v is not None}))


# -- accepted callers -------------------------------------------------------------


def test_the_root_is_verified_as_exactly_itself(session):
    expected = Caller(kind="root", session_id=session.session_id, run_id=session.run_id,
                      agent="lead", job_id=None, depth=0, tainted=False,
                      snapshot_hash=session.snapshot_hash, state_dir=session.state_dir)
    assert verify_caller(root_env(session), session.state_dir) == expected
    # an empty job id or native flag (and "0") mean "not set"
    for extra in ({"MMO_CALLER_JOB_ID": ""}, {"MMO_CALLER_NATIVE": ""},
                  {"MMO_CALLER_NATIVE": "0"}):
        assert verify_caller(root_env(session, **extra), session.state_dir) == expected
    # the state dir may be given as a string
    assert verify_caller(root_env(session), str(session.state_dir)) == expected


def test_recorded_hash_and_run_are_optional_for_the_root(session):
    record = session.record()
    del record["root_mcp_token_hash"], record["current_run_id"]
    (session.dir / "session.json").write_text(json.dumps(record))
    caller = verify_caller(root_env(session, MMO_RUN_ID="any-run"), session.state_dir)
    assert (caller.kind, caller.run_id) == ("root", "any-run")


def test_tainted_is_only_a_literal_true(session):
    session.update(tainted=True)
    assert verify_caller(root_env(session), session.state_dir).tainted is True
    session.update(tainted=1)
    assert verify_caller(root_env(session), session.state_dir).tainted is False


def test_a_worker_is_verified_with_its_jobs_depth(session):
    job_id, token = session.add_job("builder", depth=3)
    caller = verify_caller(worker_env(session, "builder", job_id, token), session.state_dir)
    assert caller == Caller(kind="worker", session_id=session.session_id, run_id=session.run_id,
                            agent="builder", job_id=job_id, depth=3, tainted=False,
                            snapshot_hash=session.snapshot_hash, state_dir=session.state_dir)


@pytest.mark.parametrize("depth", [None, "2", False, 2.0])
def test_a_worker_without_an_integer_depth_is_at_depth_one(session, depth):
    job_id, token = session.add_job("builder")
    set_job(session, job_id, depth=depth)
    caller = verify_caller(worker_env(session, "builder", job_id, token), session.state_dir)
    assert type(caller.depth) is int and caller.depth == 1


@pytest.mark.parametrize("status", ["running", "waiting", "detached"])
def test_a_worker_of_an_active_job_without_a_run_id_is_verified(session, status):
    job_id, token = session.add_job("builder")
    set_job(session, job_id, status=status, run_id=None)
    assert verify_caller(worker_env(session, "builder", job_id, token),
                         session.state_dir).job_id == job_id


def test_native_agents_take_their_parents_authority(session):
    helper = native_env(root_env(session), "helper", session.native_tokens["lead"]["helper"])
    caller = verify_caller(helper, session.state_dir)
    assert (caller.kind, caller.agent, caller.native_agent, caller.job_id) == (
        "root", "lead", "helper", None)
    job_id, token = session.add_job("builder", depth=2)
    nested = native_env(worker_env(session, "builder", job_id, token), "builder_helper",
                        session.native_tokens["builder"]["builder_helper"])
    caller = verify_caller(nested, session.state_dir)
    assert (caller.kind, caller.agent, caller.native_agent, caller.job_id, caller.depth) == (
        "worker", "builder", "builder_helper", job_id, 2)


def test_a_native_token_is_matched_among_several_of_one_parent(session):
    extra = mint_token()[0]
    natives = {"lead": {"alpha": extra, "helper": session.native_tokens["lead"]["helper"],
                        "zulu": mint_token()[0]}}
    write_capabilities(session.dir, root_mcp_token=session.root_token,
                       native_agent_tokens=natives)
    for name in ("alpha", "helper"):
        env = native_env(root_env(session), name, natives["lead"][name])
        assert verify_caller(env, session.state_dir).native_agent == name


# -- refusals, each with its own message ------------------------------------------


@pytest.mark.parametrize("name", ["MMO_ROOT_SESSION_ID", "MMO_CALLER_AGENT", "MMO_CALLER_TOKEN",
                                  "MMO_RUN_ID"])
@pytest.mark.parametrize("value", [None, ""])
def test_each_missing_variable_is_named(session, name, value):
    env = root_env(session, **{name: value})
    assert refused(env, session.state_dir) == f"{CAP}: {name} is not set"


@pytest.mark.parametrize("session_id", ["a..b", "-lead", "a/b", "x" * 201, "é"])
def test_a_malformed_session_id_is_refused_before_any_file_is_read(session, session_id):
    env = root_env(session, MMO_ROOT_SESSION_ID=session_id)
    assert refused(env, session.state_dir) == f"{CAP}: malformed MMO_ROOT_SESSION_ID"


def test_an_unknown_session_is_named(session):
    env = root_env(session, MMO_ROOT_SESSION_ID="20260101-000000-none-000000")
    assert refused(env, session.state_dir) == (
        f"{CAP}: unknown session 20260101-000000-none-000000")


def test_unreadable_session_records_are_refused(session, tmp_path):
    path = session.dir / "session.json"
    real = tmp_path / "session.json"
    path.rename(real)
    path.symlink_to(real)
    assert refused(root_env(session), session.state_dir).startswith(
        f"{CAP}: cannot read session.json (")
    path.unlink()
    path.write_text("{not json")
    assert refused(root_env(session), session.state_dir) == (
        f"{CAP}: session.json is not valid JSON")
    path.write_text("[1, 2]")
    assert refused(root_env(session), session.state_dir) == f"{CAP}: session.json is not a record"


@pytest.mark.parametrize("status", ["completed", "failed", "cancelled", "stopped"])
def test_a_terminal_session_is_refused(session, status):
    session.update(status=status)
    assert refused(root_env(session), session.state_dir) == (
        f"{CAP}: session {session.session_id} is {status}")


def test_root_refusals(session):
    state = session.state_dir
    assert refused(root_env(session, MMO_CALLER_TOKEN="forged-token-1234"), state) == (
        f"{CAP}: token does not match the session's root capability")
    assert refused(root_env(session, MMO_CALLER_AGENT="builder"), state) == (
        "only the root role may use the root MCP capability ('lead'); the caller claims "
        "'builder'")
    assert refused(root_env(session, MMO_RUN_ID="other-run"), state) == (
        f"{CAP}: MMO_RUN_ID is not the session's active run")
    session.update(root_mcp_token_hash=mint_token()[1])
    assert refused(root_env(session), state) == f"{CAP}: session capability records disagree"


def test_a_root_without_capabilities_is_refused_with_the_reason(session):
    (session.dir / "capabilities.json").unlink()
    assert refused(root_env(session), session.state_dir) == (
        f"{CAP}: capability is unavailable (no capabilities file)")


def test_a_session_without_a_snapshot_is_refused(session):
    record = session.record()
    del record["snapshot_hash"]
    (session.dir / "session.json").write_text(json.dumps(record))
    assert refused(root_env(session), session.state_dir) == (
        f"{CAP}: session {session.session_id} has no snapshot")


@pytest.mark.parametrize("job_id", ["a..b", "../jobs", ".hidden"])
def test_a_malformed_job_id_is_refused(session, job_id):
    _, token = session.add_job("builder")
    assert refused(worker_env(session, "builder", job_id, token), session.state_dir) == (
        f"{CAP}: malformed MMO_CALLER_JOB_ID")


def test_worker_refusals(session):
    state = session.state_dir
    job_id, token = session.add_job("builder")
    env = worker_env(session, "builder", job_id, token)
    assert refused(worker_env(session, "builder", "no-such-job", token), state) == (
        f"{CAP}: unknown job no-such-job")
    assert refused(worker_env(session, "builder", job_id, "forged-token-1234"), state) == (
        f"{CAP}: token does not match job {job_id}")
    assert refused(worker_env(session, "reviewer", job_id, token), state) == (
        f"{CAP}: job {job_id} does not run agent 'reviewer'")
    set_job(session, job_id, run_id="another-run")
    assert refused(env, state) == f"{CAP}: MMO_RUN_ID does not match job {job_id}"
    set_job(session, job_id, run_id=session.run_id, status="suspended")
    assert refused(env, state) == f"{CAP}: job {job_id} is not running (status 'suspended')"
    set_job(session, job_id, status="running", session_id="another-session")
    assert refused(env, state) == f"{CAP}: job {job_id} has no capability in this session"
    set_job(session, job_id, session_id=session.session_id, mcp_caller_token_hash=None)
    assert refused(env, state) == f"{CAP}: job {job_id} has no capability in this session"


def test_a_jobs_symlinked_record_is_not_read(session, tmp_path):
    job_id, token = session.add_job("builder")
    path = session.jobs_dir / job_id / "metadata.json"
    real = tmp_path / "metadata.json"
    path.rename(real)
    path.symlink_to(real)
    assert refused(worker_env(session, "builder", job_id, token), session.state_dir).startswith(
        f"{CAP}: cannot read metadata.json (")


def test_native_refusals(session):
    state = session.state_dir
    token = session.native_tokens["lead"]["helper"]
    parent = root_env(session)
    assert refused({**native_env(parent, "helper", token), "MMO_CALLER_NATIVE": "yes"},
                   state) == f"{NATIVE}: MMO_CALLER_NATIVE must be 1"
    missing = native_env(parent, "helper", token)
    for value in (None, ""):
        env = {**missing, "MMO_NATIVE_CALLER_TOKEN": value}
        assert refused({k: v for k, v in env.items() if v is not None}, state) == (
            f"{NATIVE}: MMO_NATIVE_CALLER_TOKEN is not set")
    assert refused(native_env(parent, "helper", "forged-token-1234"), state) == (
        f"{NATIVE}: token does not match a native agent of 'lead'")
    assert refused(native_env(parent, "scout", token), state) == (
        f"{NATIVE}: the token is minted for native agent 'helper' of 'lead', but the caller "
        "claims 'scout'")
    session.update(tainted=True)
    assert refused(native_env(parent, "helper", token), state) == (
        f"{NATIVE}: native delegation is disabled in a tainted session")


def test_a_native_of_a_parent_without_natives_is_refused(session):
    job_id, token = session.add_job("reviewer")
    env = native_env(worker_env(session, "reviewer", job_id, token), "helper",
                     session.native_tokens["lead"]["helper"])
    assert refused(env, session.state_dir) == (
        f"{NATIVE}: token does not match a native agent of 'reviewer'")


def test_a_workers_native_without_capabilities_is_refused_as_native(session):
    job_id, token = session.add_job("builder")
    (session.dir / "capabilities.json").unlink()
    env = native_env(worker_env(session, "builder", job_id, token), "builder_helper",
                     session.native_tokens["builder"]["builder_helper"])
    assert refused(env, session.state_dir) == (
        f"{NATIVE}: capability is unavailable (no capabilities file)")


def test_a_native_needs_a_named_root_and_a_named_parent_agent(session):
    job_id, token = session.add_job("builder")
    set_job(session, job_id, agent=None)
    env = native_env(worker_env(session, "builder", job_id, token), "builder_helper",
                     session.native_tokens["builder"]["builder_helper"])
    assert refused(env, session.state_dir) == f"{CAP}: job {job_id} names no agent"
    for root in (None, ""):
        record = {**session.record(), "root_agent": root}
        (session.dir / "session.json").write_text(
            json.dumps({k: v for k, v in record.items() if v is not None}))
        env = native_env(root_env(session), "helper", session.native_tokens["lead"]["helper"])
        assert refused(env, session.state_dir) == (
            f"{CAP}: session {session.session_id} names no root agent")


# -- tokens and the capabilities file ---------------------------------------------


def test_token_hash_and_matching_edges():
    for bad in ("", None, 7):
        with pytest.raises(ValueError, match="^an MCP caller token must be a non-empty string$"):
            token_hash(bad)
    assert token_hash("tok") == hashlib.sha256(b"tok").hexdigest()
    assert not hash_matches("", token_hash("x"))
    assert not hash_matches("tok", None)
    assert not hash_matches("tok", "é" * 64)  # a non-ASCII record is a mismatch, not an error
    lone = "tok\udcff"  # a lone surrogate (from a byte-smuggling environment) still compares
    assert hash_matches(lone, hashlib.sha256(lone.encode("utf-8", "surrogatepass")).hexdigest())
    token, digest = mint_token()
    assert len(token) == 43 and digest == token_hash(token)


def test_capabilities_file_is_written_private_and_read_back(tmp_path):
    token = mint_token()[0]
    path = write_capabilities(tmp_path, root_mcp_token=token)
    assert path == tmp_path / "capabilities.json"
    assert os.stat(path).st_mode & 0o777 == 0o600
    document = read_capabilities(tmp_path)
    assert (document.schema_version, document.root_mcp_token, document.native_agent_tokens) == (
        1, token, {})
    write_capabilities(tmp_path, root_mcp_token=token, native_agent_tokens={"a": {"b": token}})
    assert read_capabilities(tmp_path).native_agent_tokens == {"a": {"b": token}}
    assert json.loads(path.read_text())["schema_version"] == 1


def _unavailable(directory: Path) -> str:
    with pytest.raises(CapabilityUnavailable) as info:
        read_capabilities(directory)
    return str(info.value)


def test_capabilities_file_refusals(tmp_path):
    token = mint_token()[0]
    assert _unavailable(tmp_path) == "capability is unavailable (no capabilities file)"
    path = write_capabilities(tmp_path, root_mcp_token=token)
    for mode in (0o640, 0o604, 0o610):
        os.chmod(path, mode)
        assert _unavailable(tmp_path) == (
            "capability is unavailable (capabilities file is not private)")
    os.chmod(path, 0o600)
    path.write_text(json.dumps({"schema_version": 2, "root_mcp_token": token}))
    assert _unavailable(tmp_path) == "capability is unavailable (unsupported capabilities schema)"
    path.write_text("{broken")
    assert _unavailable(tmp_path) == "capability is unavailable (invalid capabilities file)"
    path.unlink()
    real = tmp_path / "real.json"
    write_capabilities(tmp_path, root_mcp_token=token).rename(real)
    (tmp_path / "capabilities.json").symlink_to(real)
    assert _unavailable(tmp_path) == (
        f"capability is unavailable ({os.strerror(40)})")  # ELOOP: the link is not followed

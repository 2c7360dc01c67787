"""Every gateway request row says which session, job and agent sent it.

An agent's home carries ``X-MMO-Session`` / ``X-MMO-Agent`` (and, for a
worker, ``X-MMO-Job`` from the job's own ``MMO_CALLER_JOB_ID``) in its
gateway provider block; the gateway records them in ``requests.jsonl`` and
never forwards an ``X-MMO-*`` header upstream.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from support.fake_upstream import chat_text_reply
from support.gateway_harness import make_model, make_route

from mmo_kernel.config.catalog import Route
from mmo_kernel.errors import DriverConfigError
from mmo_kernel.gateway.request_log import read_log, read_rows
from mmo_kernel.hosts.codex_cli import project_codex
from mmo_kernel.plugin.manager import get_driver

PROJECT_ROOT = Path(__file__).resolve().parents[3]
OFFLINE = {"*": "local_scripted"}
SID = "20260101-120000-adaptive-engineering-a1b2c3"
JOB = "20260101-120001-adversarial_reviewer-d4e5f6"
KEY = "sk-attribution-0123456789"


def _body(model_id: str) -> dict:
    return {"model": model_id, "stream": True,
            "input": [{"type": "message", "role": "user",
                       "content": [{"type": "input_text", "text": "hi"}]}]}


def _config(home: dict) -> dict:
    return tomllib.loads(Path(home["config_toml"]).read_text())


# ------------------------------------------------------------- the gateway --


def test_mmo_headers_are_recorded_and_never_reach_the_upstream(serve, upstream, monkeypatch):
    monkeypatch.setenv("CHAT_KEY", KEY)
    route = make_route("chat_r", "openai_chat", upstream.url, credential_env="CHAT_KEY")
    upstream.queue(chat_text_reply("ok"))
    with serve([route], [make_model("chat_r")]) as gw:
        answer = gw.responses("chat_r", _body("chat_r__m1"), **{
            "X-MMO-Session": SID, "X-MMO-Job": JOB, "X-MMO-Agent": "adversarial_reviewer"})
        [row] = gw.log()
    assert answer.status == 200
    assert (row["session_id"], row["job_id"], row["agent"]) == (SID, JOB, "adversarial_reviewer")
    [seen] = upstream.seen
    assert not [h for h in seen.headers if h.startswith("x-mmo-")], seen.headers
    assert SID not in json.dumps(seen.body) and JOB not in json.dumps(seen.body)


def test_a_request_without_headers_records_nulls_and_bad_values_are_not_echoed(serve, upstream,
                                                                              monkeypatch):
    monkeypatch.setenv("CHAT_KEY", KEY)
    route = make_route("chat_r", "openai_chat", upstream.url, credential_env="CHAT_KEY")
    upstream.queue(chat_text_reply("one"), chat_text_reply("two"))
    bad = {"X-MMO-Session": "../../etc/passwd", "X-MMO-Job": "job id with spaces",
           "X-MMO-Agent": "Not-An-Agent"}
    with serve([route], [make_model("chat_r")]) as gw:
        assert gw.responses("chat_r", _body("chat_r__m1")).status == 200
        assert gw.responses("chat_r", _body("chat_r__m1"), **bad).status == 200
        refused = gw.responses("no_such_route", _body("chat_r__m1"), **{"X-MMO-Session": SID})
        rows = gw.log()
        text = gw.log_path.read_text()
    assert refused.status == 404
    bare, malformed, refusal = rows
    for row in (bare, malformed):
        assert (row["session_id"], row["job_id"], row["agent"]) == (None, None, None)
    assert all(value not in text for value in bad.values())
    # a request refused before any driver runs is attributed too
    assert refusal["session_id"] == SID and refusal["job_id"] is None
    assert [json.loads(line)["session_id"] for line in text.splitlines()] == [None, None, SID]


def test_rows_written_before_attribution_stay_readable_and_rows_filter_by_job(tmp_path):
    log = tmp_path / "requests.jsonl"
    old = {"at": "2026-01-01T00:00:00.000Z", "route": "r", "model": "r__m", "status": 200,
           "latency_ms": 3.5, "usage": None, "provider_metadata": None}
    lines = [old, {**old, "session": SID}, {**old, "session": "not an id!"},
             {**old, "session_id": SID, "job_id": JOB, "agent": "adversarial_reviewer"}]
    log.write_text("".join(json.dumps(line) + "\n" for line in lines) + '{"torn": ')
    rows = read_log(log)
    assert [(r["session_id"], r["job_id"]) for r in rows] == [
        (None, None), (SID, None), (None, None), (SID, JOB)]
    assert all("session" not in r and r["status"] == 200 for r in rows)
    assert [r.job_id for r in read_rows(log, session_id=SID)] == [None, JOB]
    assert [r.agent for r in read_rows(log, job_id=JOB)] == ["adversarial_reviewer"]


@pytest.mark.parametrize("options", [
    {"env_http_headers": {"X-MMO-Session": "SOME_ENV"}},
    {"options": {"static_headers": {"x-mmo-job": "j"}}},
])
def test_a_route_may_not_send_mmo_headers_upstream(options):
    route = Route(id="bad_route", name="Bad", driver="codex_custom", api_operator="x",
                  access_product="x", wire_protocol="openai_chat",
                  base_url="https://example.invalid/v1", **options)
    with pytest.raises(DriverConfigError, match="not a header a route may set"):
        get_driver("route_drivers", "codex_custom").validate_route(route, "routes.bad_route")


# ----------------------------------------------------------------- homes --


def test_homes_carry_the_session_agent_and_job_headers(mmo_env, mmo_standin, mmo_workspace,
                                                       mmo_process_guard):
    from mmo_kernel.api import create_session
    from mmo_kernel.gateway import stop_gateway

    try:
        record = create_session("adaptive-engineering", cwd=mmo_workspace, bindings=OFFLINE,
                                route_faults={"local_scripted": "rate_limit"})
    finally:
        stop_gateway()
    sid = record["session_id"]
    root = _config(record["homes"]["orchestrator"])["model_providers"]["local_scripted"]
    assert root["http_headers"] == {"X-MMO-Route-Fault": "rate_limit", "X-MMO-Session": sid,
                                    "X-MMO-Agent": "orchestrator"}
    assert "env_http_headers" not in root  # the root runs no job
    worker = _config(record["homes"]["adversarial_reviewer"])["model_providers"]["local_scripted"]
    assert worker["http_headers"]["X-MMO-Session"] == sid
    assert worker["env_http_headers"] == {"X-MMO-Job": "MMO_CALLER_JOB_ID"}
    assert "MMO_CALLER_JOB_ID" not in record["homes"]["adversarial_reviewer"]["direct_header_envs"]


# ----------------------------------------- a real offline session, end to end --


def _script(*steps: str, intro: str) -> str:
    return "\n".join([intro, "```mmo-script", *steps, "```"])


@pytest.mark.real_codex
def test_a_real_sessions_root_and_job_requests_are_attributed(mmo_env, mmo_git_workspace,
                                                               mmo_process_guard, monkeypatch):
    """Real Codex sends the home's headers: the root's rows name the session and no job,
    the worker's rows name the session and its job."""
    from mmo_kernel.api import run_root_exec
    from mmo_kernel.gateway import stop_gateway

    binary = project_codex(PROJECT_ROOT)
    assert binary is not None, "install the pinned Codex CLI with `make codex`"
    monkeypatch.setenv("MMO_CODEX_BIN", str(binary))
    worker = _script("say reviewed", intro="Review the change.")
    spawn = json.dumps({"agent": "adversarial_reviewer", "task_kind": "review", "task": worker})
    prompt = _script(
        f"spawn: mcp mmo_mesh.agent_spawn {spawn}",
        'mcp mmo_mesh.agents_wait {"job_ids": ["{{spawn.job_id}}"], "timeout_seconds": 60}',
        "goal_complete", "say {{spawn.job_id}}", intro="Get the change reviewed.")
    try:
        out = run_root_exec("adaptive-engineering", mmo_git_workspace, prompt, 120,
                            bindings=OFFLINE)
    finally:
        stop_gateway()
    assert out["status"] == "completed", out["result"]
    sid, job_id = out["session"]["session_id"], out["result"].strip()
    rows = read_rows(mmo_env.state_dir / "gateway" / "requests.jsonl")
    assert rows and {row.session_id for row in rows} == {sid}
    root_rows = [row for row in rows if row.job_id is None]
    job_rows = read_rows(mmo_env.state_dir / "gateway" / "requests.jsonl", job_id=job_id)
    assert root_rows and {row.agent for row in root_rows} == {"orchestrator"}
    assert job_rows and {row.agent for row in job_rows} == {"adversarial_reviewer"}
    assert len(root_rows) + len(job_rows) == len(rows)

"""Spec 12 "Delegating to MMO worker teams", checked from outside: the team tools through
``POST /mcp`` (dispatcher) against a real offline ``mmo runner`` whose workers run on the
Codex stand-in, the patch reviewed, integrated into the project repository, audited."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from support.mcp_http import mcp_call
from support.serve import create_user_and_pat
from support.tools_stack import MMO, Stack, git
from support.waiting import wait_until

# one server (and runner) per module: its tests stay on one xdist worker
pytestmark = pytest.mark.xdist_group("test_team_tools")


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    root = tmp_path_factory.mktemp("team")
    stack = Stack.start(root)
    try:
        laptop = stack.add_runner("laptop", {"code": {"git": True}})
        # the runner's gateway outlives a test: start it here, before any test's guard
        started = subprocess.run([str(MMO), "gateway", "start"], env=laptop.env,
                                 capture_output=True, text=True, timeout=120)
        assert started.returncode == 0, started.stderr
        # no worker can start on this machine (no Codex binary): sessions still work
        stack.add_runner("desk", {"other": {"git": True}},
                         env_extra={"MMO_CODEX_BIN": str(root / "no-codex")})
        yield stack
    finally:
        stack.stop()


@pytest.fixture(scope="module")
def code(stack):
    return stack.project("laptop", "code")


def no_machine_paths(stack: Stack, value) -> None:
    text = json.dumps(value)
    assert str(stack.root) not in text, text[:600]
    for hidden in ('"cwd"', '"events_path"', '"stderr_path"', '"runner_pid"',
                   '"mcp_caller_token_hash"', '"runner_start_token"'):
        assert hidden not in text, hidden


def wait_done(stack: Stack, sid: str, job_ids: list[str]) -> dict:
    def finished():
        out = stack.ok("team_wait", {"session_id": sid, "job_ids": job_ids,
                                     "timeout_seconds": 20})
        return out if not out["unfinished"] else None
    return wait_until(finished, timeout=180, what="the workers to finish", poll=0)


def audit(stack: Stack, client_id: str, sid: str) -> list[dict]:
    state = Path(stack.runners[client_id].env["MMO_STATE_DIR"])
    path = state / "sessions" / sid.removeprefix("mmo_sess_") / "audit.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_spawn_replay_status_wait_result_paging_accept_reject(stack, code):
    sid = stack.session(code)
    agents = stack.ok("team_agents", {"session_id": sid})
    plain = next(a for a in agents["agents"] if a["agent"] == "plain")
    assert plain["model"] and plain["permissions"] == "read-only"
    assert "lead" not in {a["agent"] for a in agents["agents"]}
    spawn = {"session_id": sid, "idempotency_key": "two",
             "agents": [{"agent": "plain", "task": "Say hello"},
                        {"agent": "plain", "task": "Say hello again"}]}
    first = stack.ok("team_spawn", spawn)
    assert (first["replayed"], first["state_changed"]) == (False, True)
    assert len(first["job_ids"]) == 2
    replay = stack.ok("team_spawn", spawn)
    assert (replay["job_ids"], replay["replayed"], replay["state_changed"]) == (
        first["job_ids"], True, False)
    other = stack.fails("team_spawn", {**spawn, "agents": spawn["agents"][:1]},
                        "invalid_arguments")
    assert other["output"]["state_changed"] is False
    keep, drop = first["job_ids"]
    waited = wait_done(stack, sid, [keep, drop])
    status = stack.ok("team_status", {"session_id": sid, "job_ids": [keep, drop]})
    assert [(j["job_id"], j["status"]) for j in status["jobs"]] == [
        (keep, "completed"), (drop, "completed")]
    pages, cursor = [], None
    while True:
        page = stack.ok("team_result", {"session_id": sid, "job_id": keep, "max_chars": 4,
                                        **({"cursor": cursor} if cursor else {})})
        pages.append(page["content"])
        cursor = page.get("next_cursor")
        if not cursor:
            break
    assert "".join(pages) == "FAKE_CODEX_OK" and len(pages) > 1
    accepted = stack.ok("team_accept", {"session_id": sid, "job_id": keep, "reason": "good"})
    assert accepted["state_changed"] is True and accepted["job"]["result_state"] == "accepted"
    stack.ok("team_result", {"session_id": sid, "job_id": drop})
    rejected = stack.ok("team_reject", {"session_id": sid, "job_id": drop, "reason": "dup"})
    assert rejected["job"]["result_state"] == "rejected"
    no_machine_paths(stack, [agents, first, replay, waited, status, pages, accepted, rejected])
    events = audit(stack, "laptop", sid)
    started = [e for e in events if e["event"] == "agent_started"]
    assert sorted(e["job_id"] for e in started) == sorted([keep, drop])
    assert all(e["external_lead"] == "alice" for e in started)
    assert [e["external_lead"] for e in events if e["event"] == "agent_result_accepted"] == [
        "alice"]


def test_writer_patch_is_reviewed_and_integrated_into_the_repository(stack, code):
    root = stack.root_of("laptop", "code")
    sid = stack.session(code)
    spawned = stack.ok("team_spawn", {
        "session_id": sid, "idempotency_key": "w1",
        "agents": [{"agent": "writer", "task": "Add it. FAKE_WRITE src/new.py::X = 1",
                    "mode": "workspace-write", "write_scopes": ["src"]}]})
    [job] = spawned["job_ids"]
    wait_done(stack, sid, [job])
    assert not (root / "src" / "new.py").exists()
    review = stack.ok("review_changes", {"project": code, "session_id": sid,
                                         "scope": {"kind": "job", "job_id": job}})
    assert review["scope"] == {"kind": "job", "job_id": job}
    assert [(f["path"], f["additions"]) for f in review["files"]] == [("src/new.py", 1)]
    assert "+X = 1" in review["diff"] and review["diff_truncated"] is False
    stack.fails("review_changes", {"project": code, "session_id": stack.session(code),
                                   "scope": {"kind": "job", "job_id": job}}, "job_not_found")
    stack.ok("team_result", {"session_id": sid, "job_id": job})
    stack.ok("team_accept", {"session_id": sid, "job_id": job, "reason": "right"})
    integrated = stack.ok("team_integrate", {"session_id": sid, "job_id": job,
                                             "reason": "ship"})
    assert integrated["state_changed"] is True
    assert (root / "src" / "new.py").read_text() == "X = 1\n"
    assert "src/new.py" in git(root, "status", "--porcelain", "--untracked-files=all") + \
        git(root, "log", "--name-only", "-3")
    workspace = stack.ok("review_changes", {"project": code, "session_id": sid,
                                            "scope": {"kind": "workspace"}})
    no_machine_paths(stack, [spawned, review, integrated, workspace])
    assert any(e["external_lead"] == "alice" for e in audit(stack, "laptop", sid)
               if "integrat" in e["event"])


def test_cancel_a_running_worker(stack, code, tmp_path):
    sid = stack.session(code)
    hold = tmp_path / "never"
    job = stack.ok("team_spawn", {"session_id": sid, "idempotency_key": "hold",
                                  "agents": [{"agent": "plain",
                                              "task": f"Wait. FAKE_HOLD_UNTIL={hold}"}]}
                   )["job_ids"][0]
    wait_until(lambda: stack.ok("team_status", {"session_id": sid, "job_ids": [job]}
                                )["jobs"][0]["status"] == "running", timeout=120,
               what="the worker to run")
    cancelled = stack.ok("team_cancel", {"session_id": sid, "job_id": job, "reason": "stop"})
    assert cancelled["state_changed"] is True
    wait_done(stack, sid, [job])
    [record] = stack.ok("team_status", {"session_id": sid, "job_ids": [job]})["jobs"]
    assert record["status"] == "cancelled"
    no_machine_paths(stack, [cancelled, record])


def test_error_mapping(stack, code):
    sid, other = stack.session(code), stack.session(code)
    denied = stack.fails("team_spawn", {"session_id": sid, "idempotency_key": "me",
                                        "agents": [{"agent": "lead", "task": "x"}]},
                         "permission_denied")
    assert denied["output"]["state_changed"] is False
    writers = [{"agent": "writer", "task": f"w{i}", "mode": "workspace-write",
                "write_scopes": [f"dir{i}"]} for i in range(3)]  # max_active_writers = 2
    refused = stack.fails("team_spawn", {"session_id": sid, "idempotency_key": "many",
                                         "agents": writers}, "admission_refused")
    assert refused["output"]["reason"] and refused["output"]["state_changed"] is False
    stack.fails("team_spawn", {"session_id": sid, "idempotency_key": "bad",
                               "agents": [{"agent": "writer", "task": "x",
                                           "mode": "workspace-write",
                                           "write_scopes": ["../outside"]}]},
                "invalid_arguments")
    stack.fails("team_spawn", {"session_id": sid, "idempotency_key": "u",
                               "agents": [{"agent": "plain", "task": "x", "extra": 1}]},
                "invalid_arguments")
    stack.fails("team_status", {"session_id": sid, "job_ids": ["mmo-nope"]}, "job_not_found")
    job = stack.ok("team_spawn", {"session_id": sid, "idempotency_key": "g",
                                  "agents": [{"agent": "plain", "task": "hi"}]})["job_ids"][0]
    for tool in ("team_result", "team_accept", "team_reject", "team_integrate", "team_cancel"):
        stack.fails(tool, {"session_id": other, "job_id": job, "reason": "r"}
                    if tool != "team_result" else {"session_id": other, "job_id": job},
                    "job_not_found")
    stack.fails("team_status", {"session_id": other, "job_ids": [job]}, "job_not_found")
    wait_done(stack, sid, [job])
    # the refused spawn started nobody: only the one plain job exists in the session
    events = [e for e in audit(stack, "laptop", sid) if e["event"] == "agent_started"]
    assert [e["job_id"] for e in events] == [job]
    too_long = stack.fails("team_wait", {"session_id": sid, "job_ids": [job],
                                         "timeout_seconds": 61}, "invalid_arguments")
    assert "timeout_seconds" in too_long["error"]
    ref = stack.ok("work_on_project", {"project": code, "session_id": sid,
                                       "instruction": "again"})["session_ref"]
    by_ref = stack.ok("team_status", {"session_id": ref, "job_ids": [job]})
    assert [j["job_id"] for j in by_ref["jobs"]] == [job]
    stack.fails("team_agents", {"session_id": "mmo_sess_20990101-000000-x-abcdef"},
                "session_not_found")
    desk = stack.session(stack.project("desk", "other"))
    stack.fails("team_spawn", {"session_id": desk, "idempotency_key": "k",
                               "agents": [{"agent": "plain", "task": "x"}]},
                "team_unavailable")
    reader = create_user_and_pat(stack.url, stack.admin, "alice", ["read"])
    assert stack.call("team_agents", {"session_id": sid}, token=reader)["success"] is True
    scoped = stack.fails("team_spawn", {"session_id": sid, "idempotency_key": "s",
                                        "agents": [{"agent": "plain", "task": "x"}]},
                         "insufficient_scope", token=reader)
    assert scoped["error"] == "missing required scope: delegate"
    # a team tool is reached through the dispatcher only
    direct = mcp_call(stack.url, stack.pat, "tools/call",
                      {"name": "team_status", "arguments": {"session_id": sid,
                                                            "job_ids": [job]}})
    assert direct.json()["error"]["code"] == -32602

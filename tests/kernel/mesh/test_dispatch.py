"""Every mesh tool against the real ``mmo_kernel.api``: real sessions, jobs and hosts.

Each caller talks to its own real ``mmo mcp`` process started from its agent
home's ``config.toml`` entry; workers run on the Codex stand-in.
"""

from __future__ import annotations

import pytest
from kernel.mesh.realkit import audit_events, ok, refused, wait_live, wait_until

from mmo_kernel.tools.mcp_client import McpRpcError


def _events(team, name):
    return [e for e in audit_events(team.session_id) if e.get("event") == name]


def test_root_spawns_waits_pages_results_and_disposes_them(team):
    from mmo_kernel.api import list_jobs

    root = team.root()
    missing = refused(root, "agent_result", {"job_id": "20260101-000000-plain-000000"})
    assert missing.startswith("FileNotFoundError: ")
    no_scope = refused(root, "agent_spawn", {"agent": "writer", "task": "x",
                                             "mode": "workspace-write"})
    assert "write scope" in no_scope.lower()
    read_only = refused(root, "agents_spawn", {"agents": [
        {"agent": "plain", "task": "fine"}, {"agent": "plain", "task": "x",
                                             "mode": "workspace-write"}]})
    assert read_only.startswith("PermissionError: ")
    assert list_jobs(team.session_id) == [], "a refused spawn creates nothing"
    one = ok(root, "agent_spawn", {"agent": "plain", "task": "say hello"})
    assert one["status"] == "running" and one["caller_agent"] == "lead" and one["depth"] == 1
    batch = ok(root, "agents_spawn", {"agents": [
        {"agent": "plain", "task": "second"}, {"agent": "strict_turn", "task": "report"}]})
    assert batch["atomic"] is True and len(batch["accepted"]) == 2
    assert len({job["batch_id"] for job in batch["accepted"]}) == 1
    ids = [one["job_id"], *(job["job_id"] for job in batch["accepted"])]

    status = ok(root, "agent_status", {"job_ids": ids})
    assert [job["job_id"] for job in status["jobs"]] == ids
    waited = ok(root, "agents_wait", {"job_ids": ids, "timeout_seconds": 40})
    assert waited["unfinished"] == [] and waited["timed_out_waiting"] is False
    assert waited["results"][ids[0]]["preview"] == "FAKE_CODEX_OK"
    assert "agent_result" in waited["result_reading_note"]

    pages, cursor = [], 0
    while cursor is not None:
        page = ok(root, "agent_result", {"job_id": ids[0], "cursor": cursor, "max_chars": 5})
        pages.append(page["content"])
        cursor = page["next_cursor"]
    assert "".join(pages) == "FAKE_CODEX_OK" and page["result_state"] == "read"
    structured = ok(root, "agent_result", {"job_id": ids[2]})
    assert structured["content_format"] == "json" and isinstance(structured["content"], dict)

    assert "result must be read" in refused(
        root, "agent_result_reject", {"job_id": ids[1], "reason": "unread"})
    accepted = ok(root, "agent_result_accept", {"job_id": ids[0], "reason": "looks right"})
    assert accepted["result_state"] == "accepted"
    ok(root, "agent_result", {"job_id": ids[1]})
    assert ok(root, "agent_result_reject",
              {"job_id": ids[1], "reason": "off topic"})["result_state"] == "rejected"
    assert {e["job_id"] for e in _events(team, "agent_started")} == set(ids)
    assert [e["job_id"] for e in _events(team, "agent_result_accepted")] == [ids[0]]
    assert [e["job_id"] for e in _events(team, "agent_result_rejected")] == [ids[1]]
    assert {e["job_id"] for e in _events(team, "agent_result_read")} == set(ids)


def test_a_writers_patch_is_accepted_and_integrated_into_the_workspace(team):
    root = team.root()
    cwd = team.session["cwd"]
    job = ok(root, "agent_spawn", {"agent": "writer", "mode": "workspace-write",
                                   "write_scopes": ["notes"],
                                   "task": "FAKE_WRITE notes/plan.md::step one"})
    assert ok(root, "agents_wait", {"job_ids": [job["job_id"]], "timeout_seconds": 40})[
        "unfinished"] == []
    assert "must be accepted" in refused(
        root, "agent_patch_integrate", {"job_id": job["job_id"], "reason": "early"})
    ok(root, "agent_result", {"job_id": job["job_id"]})
    ok(root, "agent_result_accept", {"job_id": job["job_id"], "reason": "good plan"})
    from pathlib import Path

    assert not (Path(cwd) / "notes" / "plan.md").exists()
    integrated = ok(root, "agent_patch_integrate", {"job_id": job["job_id"], "reason": "ship"})
    assert (Path(cwd) / "notes" / "plan.md").read_text() == "step one\n"
    after = ok(root, "agent_status", {"job_ids": [job["job_id"]]})["jobs"][0]
    assert after["result_state"] == "integrated"
    assert integrated["result_state"] == "integrated"
    assert integrated["patch"]["changed_paths"] == ["notes/plan.md"]


def test_controls_interrupt_continue_finalize_steer_cancel_and_traces(team):
    root = team.root()
    spawned = ok(root, "agents_spawn", {"agents": [
        {"agent": "plain", "task": f"job {n} FAKE_SLEEP=10"} for n in range(3)]})
    paused, steered, cancelled = (job["job_id"] for job in spawned["accepted"])

    view = wait_live(root, paused)
    assert view["live"]["control_revision"] == 0 and view["job"]["status"] == "running"
    result = ok(root, "agent_interrupt", {"job_id": paused, "expected_revision": 0})
    assert result["control_revision"] == 1
    wait_until(lambda: ok(root, "agent_status", {"job_ids": [paused]})["jobs"][0]["status"]
               == "paused", what="interrupted job to be paused")
    assert "stale control revision" in refused(
        root, "agent_continue", {"job_id": paused, "expected_revision": 0})
    ok(root, "agent_continue", {"job_id": paused, "expected_revision": 1,
                                "input": "carry on"})
    wait_live(root, paused)
    ok(root, "agent_finalize", {"job_id": paused, "expected_revision": 2})

    wait_live(root, steered)
    ok(root, "agent_steer", {"job_id": steered, "expected_revision": 0, "input": "wrap up"})
    wait_live(root, cancelled)
    gone = ok(root, "agent_cancel", {"job_id": cancelled, "reason": "not needed"})
    assert [j["status"] for j in gone["jobs"] if j["job_id"] == cancelled] == ["cancelled"]

    waited = ok(root, "agents_wait", {"job_ids": [paused, steered, cancelled],
                                      "timeout_seconds": 8})
    assert waited["unfinished"] == [], "finalize and steer must cut the 10 s sleeps short"
    jobs = {j["job_id"]: j for j in ok(root, "agent_status", {
        "job_ids": [paused, steered, cancelled]})["jobs"]}
    assert jobs[paused]["status"] == "completed" and jobs[paused]["control_revision"] == 3
    assert jobs[steered]["status"] == "completed"
    assert jobs[cancelled]["cancel_reason"] == "not needed"

    trace = ok(root, "agent_trace", {"job_id": paused, "limit": 3})
    assert [r["record_cursor"] for r in trace["records"]] == [0, 1, 2]
    assert trace["next_cursor"] == 3 and trace["private_reasoning_included"] is False
    record = ok(root, "agent_trace_record", {"agent_run_ref": trace["agent_run_ref"],
                                             "record_cursor": 0, "max_chars": 50})
    assert record["total_chars"] > 0 and "filtered_sha256" in record


def test_a_worker_reads_and_waits_with_its_own_job_identity_but_never_disposes(team):
    from mmo_kernel.api import cancel_job, load_job, spawn_job

    sid = team.session_id
    sibling = spawn_job(sid, "lead", None, "plain", task="quick answer")
    worker_job = spawn_job(sid, "lead", None, "plain", task="think FAKE_SLEEP=30")
    worker = team.worker(worker_job)
    offered = {tool.name for tool in worker.list_tools()}
    assert {"agent_status", "agents_wait", "agent_result", "agent_inspect"} <= offered
    assert offered.isdisjoint({"agent_spawn", "agents_spawn", "agent_cancel",
                               "agent_result_accept", "agent_result_reject",
                               "agent_patch_integrate"})

    waited = ok(worker, "agents_wait", {"job_ids": [sibling["job_id"]], "timeout_seconds": 40})
    assert waited["unfinished"] == []
    statuses = ok(worker, "agent_status", {"job_ids": [sibling["job_id"], worker_job["job_id"]]})
    assert [j["status"] for j in statuses["jobs"]] == ["completed", "running"]
    assert ok(worker, "agent_result", {"job_id": sibling["job_id"]})["content"] == "FAKE_CODEX_OK"
    for tool in ("agent_result_accept", "agent_patch_integrate", "agent_cancel"):
        with pytest.raises(McpRpcError) as caught:
            worker.call_tool(tool, {"job_id": sibling["job_id"], "reason": "mine now"})
        assert caught.value.code == -32602 and "unknown tool" in str(caught.value.data)
    assert "not a descendant" in refused(worker, "agent_trace", {"job_id": sibling["job_id"]})
    assert "not a descendant" in refused(
        worker, "agent_interrupt", {"job_id": sibling["job_id"], "expected_revision": 0})
    assert load_job(sibling["job_id"])["result_state"] == "read"

    cancel_job(worker_job["job_id"], sid, reason="done with it")
    with pytest.raises(McpRpcError) as caught:
        worker.call_tool("agent_status", {"job_ids": [sibling["job_id"]]})
    assert "invalid MCP caller capability" in caught.value.rpc_message
    assert "not running" in caught.value.rpc_message


def _status(root, job_id):
    return ok(root, "agent_status", {"job_ids": [job_id]})["jobs"][0]


def test_detach_compact_pause_stop_respond_fork_and_effort_reach_the_real_jobs(team):
    root = team.root()
    spawned = ok(root, "agents_spawn", {"agents": [
        {"agent": "plain", "task": "long FAKE_SLEEP=30"},
        {"agent": "plain", "task": "cold FAKE_SLEEP=30"},
        {"agent": "plain", "task": "ask FAKE_REQUEST_USER_INPUT"},
        {"agent": "plain", "task": "quick"}]})
    long, cold, asking, quick = (job["job_id"] for job in spawned["accepted"])

    wait_live(root, cold)
    ok(root, "agent_pause", {"job_id": cold, "expected_revision": 0})
    wait_until(lambda: _status(root, cold)["status"] == "paused", what="cold pause")
    assert "effort must be one of" in refused(
        root, "agent_set_effort", {"job_id": cold, "expected_revision": 1, "effort": "high"})

    wait_live(root, long)
    assert ok(root, "agent_detach", {"job_id": long, "expected_revision": 0})[
        "control_revision"] == 1
    ok(root, "agent_interrupt", {"job_id": long, "expected_revision": 1})
    wait_until(lambda: _status(root, long)["status"] == "paused", what="long job paused")
    ok(root, "agent_compact", {"job_id": long, "expected_revision": 2})
    ok(root, "agent_continue", {"job_id": long, "expected_revision": 3, "input": "resume"})
    wait_live(root, long)
    stopped = ok(root, "agent_stop", {"job_id": long, "expected_revision": 4})
    assert stopped["control_revision"] == 5
    wait_until(lambda: _status(root, long)["status"] == "stopped", what="long job stopped")

    pending = wait_until(lambda: ok(root, "agent_inspect", {"job_id": asking})["live"] and ok(
        root, "agent_inspect", {"job_id": asking})["live"]["pending_requests"],
        what="the user-input request")
    [request] = pending
    assert request["method"] == "item/tool/requestUserInput"
    ok(root, "agent_respond", {
        "job_id": asking, "expected_revision": 0, "request_id": request["id"],
        "response": {"answers": {"fake_question": {"answers": ["go on"]}}}})

    ok(root, "agents_wait", {"job_ids": [asking, quick], "timeout_seconds": 30})
    assert "go on" in ok(root, "agent_result", {"job_id": asking})["content"]
    fork = ok(root, "agent_fork", {"job_id": quick, "expected_revision": 0,
                                   "task": "try it differently"})
    forked = fork
    assert forked["job_id"] != quick and forked["fork_source_job_id"] == quick
    assert _status(root, quick)["control_revision"] == 1
    done = ok(root, "agents_wait", {"job_ids": [forked["job_id"]], "timeout_seconds": 30})
    assert done["unfinished"] == []


def test_a_delegating_worker_spawns_controls_and_cancels_with_its_own_job_id(depth_team):
    from mmo_kernel.api import load_job

    root = depth_team.root()
    manager_id = ok(root, "agent_spawn", {"agent": "manager", "task": "plan FAKE_SLEEP=30"})[
        "job_id"]
    manager = depth_team.worker(load_job(manager_id))
    tools = {tool.name: tool for tool in manager.list_tools()}
    assert {"agent_spawn", "agents_spawn", "agent_cancel"} <= set(tools)
    assert set(tools).isdisjoint({"agent_result_accept", "agent_result_reject",
                                  "agent_patch_integrate"})
    assert tools["agent_spawn"].inputSchema["properties"]["agent"]["enum"] == ["plain"]
    with pytest.raises(McpRpcError) as caught:
        manager.call_tool("agent_spawn", {"agent": "manager", "task": "recurse"})
    assert caught.value.code == -32602 and "must be one of plain" in str(caught.value.data)

    child = ok(manager, "agent_spawn", {"agent": "plain", "task": "dig FAKE_SLEEP=30"})
    assert child["depth"] == 2 and child["caller_agent"] == "manager"
    assert child["caller_job_id"] == manager_id
    [started] = [e for e in _events(depth_team, "agent_started")
                 if e["job_id"] == child["job_id"]]
    assert started["caller_job_id"] == manager_id
    assert wait_live(manager, child["job_id"])["job"]["job_id"] == child["job_id"]
    assert ok(manager, "agent_trace", {"job_id": child["job_id"], "limit": 1})["records"]
    assert "not a descendant" in refused(manager, "agent_trace", {"job_id": manager_id})

    gone = ok(manager, "agent_cancel", {"job_id": child["job_id"], "reason": "enough digging"})
    assert [j["status"] for j in gone["jobs"]] == ["cancelled"]
    ok(root, "agent_cancel", {"job_id": manager_id, "reason": "plan dropped"})
    assert load_job(manager_id)["status"] == "cancelled"

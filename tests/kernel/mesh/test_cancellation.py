"""``notifications/cancelled`` (MCP): a cancelled call stops and is never answered.

Driven through the real ``mmo mcp`` process; the waited-on job is a running
record nobody finishes, so only the cancellation can end the wait.
"""

from __future__ import annotations

import json

from kernel.mesh.meshkit import INIT, INITIALIZED, MeshProc, call, line, make_session, req


def _cancel(request_id, reason="user pressed stop"):
    params = {"requestId": request_id, "reason": reason}
    return {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params}


def _start(env) -> MeshProc:
    server = MeshProc(env)
    server.send(line(INIT) + line(INITIALIZED))
    assert json.loads(server.read_line())["id"] == "init"
    return server


def test_a_cancelled_agents_wait_stops_and_is_not_answered(mmo_env):
    session = make_session(mmo_env.state_dir)
    job_id, _ = session.add_job("builder", status="running")
    server = _start(session.root_env())
    try:
        wait = {"job_ids": [job_id], "timeout_seconds": 900, "include_results": False}
        server.send(line(call(5, "agents_wait", wait)) + line(req(6, "ping")))
        assert json.loads(server.read_line()) == {"jsonrpc": "2.0", "id": 6, "result": {}}, (
            "the wait is still in flight, so the ping is answered first"
        )
        # Cancelling what is not in flight (or a bool, which Python equates with 1) does nothing.
        server.send(line(_cancel(42)) + line(_cancel(True)) + line(_cancel(5)))
        server.send(line(call(7, "agent_status", {"job_ids": [job_id]})))
        status = json.loads(server.read_line())
        assert status["id"] == 7 and status["result"]["isError"] is False, status
        code, rest = server.finish(timeout=30)
    except BaseException:
        server.proc.kill()
        server.proc.wait(timeout=10)
        raise
    assert code == 0
    assert [r["id"] for r in rest] == [], f"a cancelled call must not be answered: {rest}"


def test_cancelling_one_wait_leaves_the_others_running(mmo_env):
    session = make_session(mmo_env.state_dir)
    running, _ = session.add_job("builder", status="running")
    server = _start(session.root_env())
    try:
        long_wait = {"job_ids": [running], "timeout_seconds": 900, "include_results": False}
        short_wait = {"job_ids": [running], "timeout_seconds": 1, "include_results": False}
        server.send(line(call("a", "agents_wait", long_wait)))
        server.send(line(call("b", "agents_wait", short_wait)))
        server.send(line(_cancel("a")))
        reply = json.loads(server.read_line())
        assert reply["id"] == "b", reply
        assert reply["result"]["structuredContent"]["timed_out_waiting"] is True
        code, rest = server.finish(timeout=30)
    except BaseException:
        server.proc.kill()
        server.proc.wait(timeout=10)
        raise
    assert code == 0 and rest == []

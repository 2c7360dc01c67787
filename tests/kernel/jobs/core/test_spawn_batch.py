"""Launching a batch: tokens minted at creation, shared reads, hosts on record at once."""

from __future__ import annotations

import threading

import psutil
import pytest
from support.environ import agent_environ
from support.waiting import wait_until

from mmo_kernel.jobs import spawn
from mmo_kernel.jobs.cancel import cancel_job
from mmo_kernel.jobs.listing import host_alive, list_jobs
from mmo_kernel.jobs.records import read_job_record
from mmo_kernel.mesh.arguments import SpawnRequest
from mmo_kernel.mesh.tokens import token_hash
from mmo_kernel.sessions.records import session_file
from mmo_kernel.state.audit import read_jsonl
from mmo_kernel.state.files import LockBusy, runtime_lock

ROOT = "escalation_lead"
SLOW = "Think slowly. FAKE_SLEEP_SECONDS=30"
LITERAL = {"operation": "locate", "needle": "TODO", "paths": ["README.md"]}


def _lock_free_elsewhere() -> bool:
    """Whether another thread could take the runtime lock right now."""
    answer: list[bool] = []

    def probe() -> None:
        try:
            with runtime_lock(timeout=0.05):
                answer.append(True)
        except LockBusy:
            answer.append(False)

    thread = threading.Thread(target=probe)
    thread.start()
    thread.join()
    return answer[0]


def _cancel_all(session_id: str, guard=None) -> None:
    """Cancel every job of the session and wait for each host to be gone (and, with the
    process guard, for an app-server whose host was cancelled while starting it: it exits
    when its stdin closes)."""
    records = [read_job_record(job["job_id"]) for job in list_jobs(session_id)]
    for record in records:  # a cancel forgets the host's identity: keep it to wait on
        cancel_job(record["job_id"], session_id)
    for record in records:
        wait_until(lambda r=record: not host_alive(r), 30, f"the host of {record['job_id']}")
    if guard is not None:  # the session's gateway stays: the conftest stops it
        wait_until(lambda: not [p for p in guard.leftovers() if not _is_gateway(p)], 30,
                   "the cancelled jobs' processes to exit")


def _is_gateway(proc) -> bool:
    """Whether ``proc`` is the session's gateway; one that ended meanwhile is no leftover."""
    try:
        return "mmo_kernel.gateway" in proc.cmdline()
    except psutil.Error:
        return True


def test_each_host_is_on_record_before_anything_else_can_write(make_session, monkeypatch,
                                                              mmo_process_guard):
    session = make_session()
    sid = session["session_id"]
    seen: list[dict] = []
    real = spawn._start_host

    def watching(record, session_record, shared):
        job_id = record["job_id"]
        current = read_job_record(job_id)
        earlier = [read_job_record(s["job_id"]) for s in seen]
        seen.append({"job_id": job_id, "status": current["status"],
                     "hash": current.get("mcp_caller_token_hash"),
                     "earlier": [(e["status"], e.get("runner_pid")) for e in earlier],
                     "lock_free": _lock_free_elsewhere()})
        return real(record, session_record, shared)

    monkeypatch.setattr(spawn, "_start_host", watching)
    specs = [{"agent": "flagship_escalation", "task": SLOW},
             {"agent": "literal_scout", "literal_task": LITERAL},
             {"agent": "literal_scout", "literal_task": LITERAL}]
    result = spawn.spawn_jobs(specs, sid, ROOT)
    try:
        accepted = result["accepted"]
        assert [s["job_id"] for s in seen] == [a["job_id"] for a in accepted]
        for index, step in enumerate(seen):
            assert step["status"] == "queued" and step["hash"]  # the hash is on disk first
            assert not step["lock_free"]  # no other writer between the starts and the records
            assert len(step["earlier"]) == index
            assert all(status == "running" and pid for status, pid in step["earlier"])
        for job in accepted:
            record = read_job_record(job["job_id"])
            assert record["runner_pgid"] == record["runner_pid"] and record["started_at"]
        # the batch let go of the lock (a fast job's own host may hold it for a moment)
        wait_until(_lock_free_elsewhere, 10, "the runtime lock to be free")
        started = [e["job_id"] for e in read_jsonl(session_file(sid, "audit.jsonl"))
                   if e["event"] == "agent_started"]
        assert started == [a["job_id"] for a in accepted]
    finally:
        _cancel_all(sid, mmo_process_guard)


def test_a_batch_reads_its_session_once_and_builds_each_agents_environment_once(
        make_session, monkeypatch, mmo_process_guard):
    session = make_session()
    sid = session["session_id"]
    reads: list[str] = []
    builds: list[str] = []
    real_read, real_env = spawn.read_session_record, spawn.session_environment

    def read(session_id):
        reads.append(session_id)
        return real_read(session_id)

    def build(session_record, agent, **kwargs):
        builds.append(agent)
        return real_env(session_record, agent, **kwargs)

    monkeypatch.setattr(spawn, "read_session_record", read)
    monkeypatch.setattr(spawn, "session_environment", build)
    specs = [{"agent": "literal_scout", "literal_task": LITERAL},
             {"agent": "flagship_escalation", "task": SLOW},
             {"agent": "literal_scout", "literal_task": LITERAL}]
    accepted = spawn.spawn_jobs(specs, sid, ROOT)["accepted"]
    try:
        assert reads == [sid]
        assert sorted(builds) == ["flagship_escalation", "literal_scout"]
        assert len({a["mcp_caller_token_hash"] for a in accepted}) == 3
        job = accepted[1]
        env = agent_environ(job["job_id"])  # the job's own identity on the shared environment
        assert env["MMO_CALLER_JOB_ID"] == job["job_id"]
        assert env["MMO_CALLER_AGENT"] == "flagship_escalation"
        assert env["MMO_ROOT_SESSION_ID"] == sid
        assert token_hash(env["MMO_CALLER_TOKEN"]) == job["mcp_caller_token_hash"]
        assert not set(spawn._minted) & {a["job_id"] for a in accepted}  # handed over, gone
    finally:
        _cancel_all(sid, mmo_process_guard)


def test_a_job_created_elsewhere_gets_a_fresh_token_recorded_before_its_host(
        make_session, mmo_process_guard):
    session = make_session()
    sid = session["session_id"]
    [record] = spawn.admit_and_create(sid, ROOT, None,
                                      [SpawnRequest(agent="flagship_escalation", task=SLOW)])
    job_id = record["job_id"]
    created_hash = record["mcp_caller_token_hash"]
    assert read_job_record(job_id)["mcp_caller_token_hash"] == created_hash
    del spawn._minted[job_id]  # as if another process had created it
    try:
        launched = spawn.launch(job_id)
        assert launched["mcp_caller_token_hash"] != created_hash
        env = agent_environ(job_id)
        assert token_hash(env["MMO_CALLER_TOKEN"]) == launched["mcp_caller_token_hash"]
    finally:
        _cancel_all(sid, mmo_process_guard)


def test_a_failed_creation_keeps_no_token_in_memory(make_session, monkeypatch):
    session = make_session()
    sid = session["session_id"]
    before = dict(spawn._minted)
    real = spawn.atomic_write_text
    calls: list[int] = []

    def failing_second(path, text, *args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise OSError("disk trouble")
        return real(path, text, *args, **kwargs)

    monkeypatch.setattr(spawn, "atomic_write_text", failing_second)
    with pytest.raises(OSError, match="disk trouble"):
        spawn.spawn_jobs([{"agent": "flagship_escalation", "task": "a"},
                          {"agent": "literal_scout", "literal_task": LITERAL}], sid, ROOT)
    assert list_jobs(sid) == []
    assert spawn._minted == before

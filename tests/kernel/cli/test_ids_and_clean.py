"""Id prefixes and short ids (spec 11, issue 14 item 14); ``mmo clean`` confirmation, dry run,
orphaned jobs, and the ``--status``/``--profile`` filters (item 16)."""

from __future__ import annotations

import os
import pty
import shutil
import subprocess
from pathlib import Path

from kernel.jobs.results.conftest import WRITER, snapshot_template  # noqa: F401 - fixture
from kernel.jobs.results.conftest import make_session as make_live_session

from mmo_kernel.jobs.records import job_dir, update_job, write_job_record
from mmo_kernel.sessions.records import session_dir, write_run_record, write_session_record

from .conftest import MMO, mmo, mmo_json, one_line_error

OLD = "2020-01-01T00:00:00+00:00"
S1, S2, S3 = ("20260101-120000-demo-aaaaaa", "20260101-120000-demo-abbbbb",
              "20260101-120005-other-cccccc")
J1, J2, J3 = ("20260101-120100-writer-aaaaaa", "20260101-120100-writer-abbbbb",
              "20260101-120101-reviewer-cccccc")


def session(session_id: str, status: str = "completed", profile: str = "demo",
            stamp: str = "2026-01-01T12:00:00+00:00", **fields) -> str:
    run_id = f"{session_id[:16]}run-{session_id[-6:]}"
    write_run_record({"run_id": run_id, "session_id": session_id, "sequence": 1,
                      "kind": "initial", "status": status, "created_at": stamp,
                      "root_mcp_token_hash": "00" * 32})
    write_session_record({
        "session_id": session_id, "status": status, "profile_id": profile,
        "snapshot_hash": "ab" * 32, "cwd": "/tmp", "session_kind": "noninteractive",
        "root_agent": "lead", "created_at": stamp, "run_created_at": stamp,
        "current_run_id": run_id, "run_sequence": 1, "root_mcp_token_hash": "00" * 32,
        "finished_at": stamp, "last_active_at": stamp, **fields})
    return session_id


def job(job_id: str, session_id: str, status: str = "completed", agent: str = "writer",
        stamp: str = "2026-01-01T12:01:00+00:00", **fields) -> str:
    write_job_record({"job_id": job_id, "session_id": session_id, "agent": agent,
                      "status": status, "created_at": stamp, "finished_at": stamp, **fields})
    return job_id


def three_sessions_and_jobs() -> None:
    session(S1)
    session(S2)
    session(S3, profile="other", status="failed")
    job(J1, S1)
    job(J2, S1, status="failed")
    job(J3, S3, agent="reviewer")


# ------------------------------------------------------------ item 14 --


def test_an_unambiguous_session_prefix_works_everywhere_an_ambiguous_one_lists_candidates():
    three_sessions_and_jobs()
    shown = mmo_json("session", "show", "20260101-120005")
    assert shown["session"]["session_id"] == S3
    assert mmo_json("session", "show", "20260101-120000-demo-ab")["session"]["session_id"] == S2
    ambiguous = mmo("session", "show", "20260101-120000")
    one_line_error(ambiguous, "ambiguous")
    assert S1 in ambiguous.stderr and S2 in ambiguous.stderr and S3 not in ambiguous.stderr
    one_line_error(mmo("session", "show", "2099"), "no such session")
    one_line_error(mmo("stop", "20260101-120000"), "ambiguous")
    one_line_error(mmo("resume", "20260101-120000-demo-a"), "ambiguous")
    listed = mmo_json("jobs", "--session", "20260101-120005")
    assert [j["job_id"] for j in listed["jobs"]] == [J3]


def test_an_unambiguous_job_prefix_works_an_unknown_one_says_no_such_job():
    three_sessions_and_jobs()
    assert mmo_json("job", "show", "20260101-120101")["job_id"] == J3
    assert mmo_json("job", "show", "20260101-120100-writer-ab")["job_id"] == J2
    ambiguous = mmo("job", "show", "20260101-120100-writer")
    one_line_error(ambiguous, "ambiguous")
    assert J1 in ambiguous.stderr and J2 in ambiguous.stderr
    one_line_error(mmo("job", "result", "2099"), "no such job")
    one_line_error(mmo("job", "diff", "20260101-1201"), "ambiguous")


def test_tables_show_the_shortest_unique_cut_and_json_keeps_full_ids():
    three_sessions_and_jobs()
    rows = [line.split()[0] for line in mmo("sessions", "--all").stdout.splitlines()[1:]]
    assert rows == ["20260101-120005", "20260101-120000-demo-ab", "20260101-120000-demo-aa"]
    assert {s["session_id"] for s in mmo_json("sessions", "--all")["sessions"]} == {S1, S2, S3}
    jobs = [line.split()[0] for line in mmo("jobs").stdout.splitlines()[1:]]
    assert jobs == ["20260101-120101", "20260101-120100-writer-ab", "20260101-120100-writer-aa"]
    assert {j["job_id"] for j in mmo_json("jobs")["jobs"]} == {J1, J2, J3}
    shown = mmo("session", "show", S1).stdout
    assert "20260101-120100-writer-aa " in shown and J1 not in shown.split("jobs (2)")[1]
    for short in rows + jobs:  # every short id shown resolves back
        kind = ("session", "show") if short in rows else ("job", "show")
        assert mmo(*kind, short, "--json").returncode == 0


# ------------------------------------------------------------ item 16 --


def test_sessions_and_jobs_filter_by_status_and_profile():
    three_sessions_and_jobs()
    session("20260101-130000-demo-dddddd", status="paused")
    failed = mmo_json("sessions", "--status", "failed")["sessions"]
    assert [s["session_id"] for s in failed] == [S3]  # --status looks at finished ones too
    demo = mmo_json("sessions", "--all", "--profile", "demo")["sessions"]
    assert {s["session_id"] for s in demo} == {S1, S2, "20260101-130000-demo-dddddd"}
    both = mmo_json("sessions", "--status", "completed", "--status", "failed",
                    "--profile", "demo")["sessions"]
    assert {s["session_id"] for s in both} == {S1, S2}
    assert mmo("sessions", "--status", "finished").returncode == 2  # not a status
    assert [j["job_id"] for j in mmo_json("jobs", "--status", "failed")["jobs"]] == [J2]
    assert [j["job_id"] for j in mmo_json("jobs", "--profile", "other")["jobs"]] == [J3]
    table = mmo("jobs", "--profile", "demo", "--status", "completed").stdout
    assert "20260101-120100-writer-aa" in table and "reviewer" not in table


def old_state() -> None:
    session(S1, stamp=OLD)
    job(J1, S1, stamp=OLD)
    session(S3, stamp=OLD, status="running")  # never removed, however old


def test_clean_without_a_terminal_or_yes_lists_and_refuses_with_the_fix():
    old_state()
    out = mmo("clean")
    one_line_error(out, "--yes")
    assert "--dry-run" in out.stderr
    assert S1 in out.stdout and J1 in out.stdout and S3 not in out.stdout
    assert session_dir(S1).exists() and job_dir(J1).exists()


def test_clean_dry_run_lists_and_removes_nothing_yes_removes():
    old_state()
    dry = mmo("clean", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert S1 in dry.stdout and J1 in dry.stdout and "nothing removed" in dry.stdout
    assert session_dir(S1).exists() and job_dir(J1).exists()
    plan = mmo_json("clean", "--dry-run")
    assert plan["dry_run"] is True and plan["sessions"] == 0
    assert [s["session_id"] for s in plan["candidates"]["sessions"]] == [S1]
    done = mmo("clean", "--yes")
    assert done.returncode == 0, done.stderr
    assert "removed 1 job(s)" in done.stdout and "1 session(s)" in done.stdout
    assert not session_dir(S1).exists() and not job_dir(J1).exists()
    assert session_dir(S3).exists()
    assert "nothing to remove" in mmo("clean").stdout  # nothing left: no question


def _clean_on_a_terminal(answer: str) -> tuple[int, str]:
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen([MMO, "clean"], stdin=slave, stdout=subprocess.PIPE,
                                stderr=slave, text=True)
        os.close(slave)
        slave = -1
        os.write(master, answer.encode() + b"\n")
        out, _ = proc.communicate(timeout=60)
        return proc.returncode, out
    finally:
        os.close(master)
        if slave != -1:
            os.close(slave)


def test_clean_on_a_terminal_asks_and_removes_only_on_yes():
    old_state()
    code, out = _clean_on_a_terminal("n")
    assert code == 1 and S1 in out
    assert session_dir(S1).exists() and job_dir(J1).exists()
    code, out = _clean_on_a_terminal("y")
    assert code == 0 and "removed 1 job(s)" in out
    assert not session_dir(S1).exists() and not job_dir(J1).exists()


def test_clean_removes_a_recent_job_whose_session_is_gone_with_its_worktree(
        mmo_git_workspace, tmp_path, snapshot_template):  # noqa: F811 - the fixture
    from mmo_kernel.jobs.spawn import isolator_for
    from mmo_kernel.profiles.snapshots import snapshot_profile

    live = make_live_session(mmo_git_workspace, tmp_path, snapshot_template)
    writer = job("20260101-120200-writer-eeeeee", live["session_id"], agent=WRITER,
                 stamp="2099-01-01T00:00:00+00:00", mode="workspace-write", write_scope=["src"])
    isolator = isolator_for(snapshot_profile(live["snapshot_hash"]))
    handle = isolator.prepare(Path(live["cwd"]), job_dir(writer) / "workspace", ["src"], writer)
    update_job(writer, workspace=handle.model_dump())
    other = job("20260101-120300-reviewer-ffffff", live["session_id"], agent="reviewer")
    shutil.rmtree(session_dir(live["session_id"]))
    recent = "2099-01-01T00:00:00+00:00"
    session(S1, stamp=recent)  # a recent finished session keeps its recent job
    ours = job(J1, S1, stamp=recent)

    out = mmo("clean", "--yes")
    assert out.returncode == 0, out.stderr
    assert "session is gone" in out.stdout
    assert not job_dir(writer).exists() and not job_dir(other).exists()
    assert not Path(handle.worktree).exists()
    branches = subprocess.run(["git", "branch", "--list"], cwd=live["cwd"], text=True,
                              capture_output=True, check=True).stdout
    assert handle.branch not in branches
    assert job_dir(ours).exists() and session_dir(S1).exists()

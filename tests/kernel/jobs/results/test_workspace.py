"""Writer patches at job end, integration as one transaction, taint, worktree hygiene (06)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from kernel.jobs.results.conftest import ROOT, WRITER, audit_events, make_job

from mmo_kernel.jobs import workspace as ws
from mmo_kernel.jobs.records import job_dir, read_job_record, update_job
from mmo_kernel.jobs.results import accept_result, read_result, reject_result
from mmo_kernel.sessions.records import read_session_record
from mmo_kernel.sessions.retention import clean_state
from mmo_kernel.sessions.state import update_session
from mmo_kernel.workspace.patches import PreimageMismatch


def _git(repo, *args):
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True,
                          stdin=subprocess.DEVNULL, text=True).stdout


def _writer(session, scope=("src",), **fields):
    """A writer job with a real git worktree prepared by the session's isolator."""
    from mmo_kernel.jobs.spawn import isolator_for
    from mmo_kernel.profiles.snapshots import snapshot_profile

    job = make_job(session, WRITER, status="running", mode="workspace-write",
                   write_scope=list(scope), result="implemented", **fields)
    isolator = isolator_for(snapshot_profile(session["snapshot_hash"]))
    handle = isolator.prepare(Path(session["cwd"]), job_dir(job["job_id"]) / "workspace",
                              list(scope), job["job_id"])
    update_job(job["job_id"], workspace=handle.model_dump())
    return job, Path(handle.root), handle


def _finish(job_id, status="completed"):
    update_job(job_id, status=status)


def _accepted(session, job_id):
    read_result(job_id, session["session_id"])
    accept_result(job_id, "good change", session["session_id"], ROOT)


def test_capture_records_patch_artifacts_and_diff_without_touching_the_workspace(session):
    job, root, _ = _writer(session)
    (root / "src").mkdir()
    (root / "src/generated.py").write_text("VALUE = 1\n")
    record = ws.capture_job_patch(job["job_id"])
    assert record["status"] == "running"
    assert record["patch"]["changed_paths"] == ["src/generated.py"]
    assert record["artifacts"][0]["relative_path"] == "src/generated.py"
    assert record["artifacts"][0]["bytes"] == len("VALUE = 1\n")
    assert "+VALUE = 1" in ws.read_patch_diff(job["job_id"])
    assert not (Path(session["cwd"]) / "src/generated.py").exists()
    assert str(job_dir(job["job_id"])) not in str(record["patch"])


def test_out_of_scope_change_fails_the_job_and_taints_the_session(session):
    job, root, _ = _writer(session)
    (root / "README.md").write_text("rewritten\n")
    record = ws.capture_job_patch(job["job_id"])
    assert record["status"] == "failed" and "out-of-scope mutation" in record["error"]
    assert "README.md" in record["error"]
    tainted = read_session_record(session["session_id"])
    assert tainted["tainted"] is True
    assert tainted["taint_reasons"][-1]["job_id"] == job["job_id"]
    assert any(e["event"] == "session_tainted" for e in audit_events(session))


def test_integration_applies_persists_audits_and_removes_the_worktree(session):
    job, root, handle = _writer(session)
    (root / "src/pkg").mkdir(parents=True)
    (root / "src/pkg/mod.py").write_text("x = 1\n")
    ws.capture_job_patch(job["job_id"])
    _finish(job["job_id"])
    with pytest.raises(RuntimeError, match="must be accepted"):
        ws.integrate_patch(job["job_id"], "ship it", session["session_id"], ROOT)
    _accepted(session, job["job_id"])
    public = ws.integrate_patch(job["job_id"], "ship it", session["session_id"], ROOT)
    assert public["result_state"] == "integrated"
    assert (Path(session["cwd"]) / "src/pkg/mod.py").read_text() == "x = 1\n"
    event = [e for e in audit_events(session) if e["event"] == "agent_patch_integrated"][-1]
    assert event["job_id"] == job["job_id"] and event["changed_paths"] == ["src/pkg/mod.py"]
    assert not Path(handle.worktree).exists()
    assert handle.branch not in _git(session["cwd"], "branch", "--list")
    with pytest.raises(RuntimeError, match="already integrated"):
        ws.integrate_patch(job["job_id"], "again", session["session_id"], ROOT)


def test_a_moved_workspace_refuses_integration_and_applies_nothing(session):
    job, root, _ = _writer(session, scope=(".",))
    (root / "README.md").write_text("writer version\n")
    ws.capture_job_patch(job["job_id"])
    _finish(job["job_id"])
    _accepted(session, job["job_id"])
    (Path(session["cwd"]) / "README.md").write_text("user edited meanwhile\n")
    with pytest.raises(PreimageMismatch):
        ws.integrate_patch(job["job_id"], "ship", session["session_id"], ROOT)
    assert (Path(session["cwd"]) / "README.md").read_text() == "user edited meanwhile\n"
    assert read_job_record(job["job_id"])["result_state"] == "accepted"


def test_failed_persistence_rolls_the_workspace_back_exactly(session, monkeypatch):
    job, root, _ = _writer(session)
    (root / "src/new/deep").mkdir(parents=True)
    (root / "src/new/deep/f.txt").write_text("new\n")
    ws.capture_job_patch(job["job_id"])
    _finish(job["job_id"])
    _accepted(session, job["job_id"])
    before = _git(session["cwd"], "status", "--porcelain", "--untracked-files=all")

    def refuse(*_args, **_kwargs):  # the audit log cannot be written (a full disk, say)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ws, "append_audit", refuse)
    with pytest.raises(OSError, match="No space left"):
        ws.integrate_patch(job["job_id"], "ship", session["session_id"], ROOT)
    assert _git(session["cwd"], "status", "--porcelain", "--untracked-files=all") == before
    assert not (Path(session["cwd"]) / "src").exists()
    assert read_job_record(job["job_id"])["result_state"] == "accepted"
    assert read_session_record(session["session_id"])["tainted"] is False


def test_a_tainted_session_refuses_integration(session):
    job, root, _ = _writer(session)
    (root / "src").mkdir()
    (root / "src/a.py").write_text("a\n")
    ws.capture_job_patch(job["job_id"])
    _finish(job["job_id"])
    _accepted(session, job["job_id"])
    update_session(session["session_id"], tainted=True)
    with pytest.raises(RuntimeError, match="--allow-tainted"):
        ws.integrate_patch(job["job_id"], "ship", session["session_id"], ROOT)
    assert not (Path(session["cwd"]) / "src").exists()


def test_reject_removes_the_worktree_and_branch(session):
    job, root, handle = _writer(session)
    ws.capture_job_patch(job["job_id"])
    _finish(job["job_id"])
    read_result(job["job_id"], session["session_id"])
    reject_result(job["job_id"], "wrong", session["session_id"], ROOT)
    assert not Path(handle.worktree).exists()
    assert handle.branch not in _git(session["cwd"], "branch", "--list")


def test_cleanup_never_touches_a_job_that_can_continue_and_clean_state_retires(session):
    job, _, handle = _writer(session)
    update_job(job["job_id"], status="suspended")
    assert ws.job_workspace_cleanup(read_job_record(job["job_id"])) is False
    assert Path(handle.worktree).exists()
    update_job(job["job_id"], status="stopped", finished_at="2000-01-01T00:00:00+00:00")
    update_session(session["session_id"], status="completed",
                   finished_at="2000-01-01T00:00:00+00:00",
                   last_active_at="2000-01-01T00:00:00+00:00")
    removed = clean_state(1, 1, job_cleanup=ws.job_workspace_cleanup)
    assert removed["jobs"] == 1 and not Path(handle.worktree).exists()
    assert handle.branch not in _git(session["cwd"], "branch", "--list")

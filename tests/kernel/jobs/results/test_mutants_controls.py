"""Control revisions, re-admission and relaunch failures found by mutation testing (spec 04)."""

from __future__ import annotations

import pytest
from kernel.jobs.results.conftest import REVIEWER, ROOT, WRITER, make_job, make_session

from mmo_kernel.errors import AdmissionError
from mmo_kernel.jobs.controls import control_job
from mmo_kernel.jobs.records import job_dir, read_job_record


def test_an_undelivered_control_restores_the_previous_control_fields(session, fake_host):
    job = make_job(session, WRITER, status="running", control_revision=3,
                   last_control_action="steer", last_control_status="applied",
                   progress_revision=7)
    host = fake_host(job["job_id"])
    host.socket.unlink()  # the host lives but nobody listens on its socket path any more
    before = read_job_record(job["job_id"])
    with pytest.raises(RuntimeError, match="not delivered"):
        control_job(job["job_id"], "pause", session["session_id"], ROOT, expected_revision=3)
    after = read_job_record(job["job_id"])
    assert {k: after.get(k) for k in ("control_revision", "last_control_action",
                                      "last_control_status", "progress_revision")} == {
        "control_revision": 3, "last_control_action": "steer",
        "last_control_status": "applied", "progress_revision": 7}
    assert after == before


def test_continue_is_refused_when_a_writer_of_another_session_holds_the_scope(
        session, fake_host, mmo_git_workspace, tmp_path, snapshot_template):
    other = make_session(mmo_git_workspace, tmp_path / "other", snapshot_template)
    holder = make_job(other, WRITER, status="running", control_revision=0,
                      mode="workspace-write", write_scope=["src"],
                      write_scope_resolved=[session["cwd"] + "/src"])
    fake_host(holder["job_id"])
    paused = make_job(session, REVIEWER, status="suspended", mode="workspace-write",
                      write_scope=["src/app"], write_scope_resolved=[session["cwd"] + "/src/app"],
                      control_revision=2, partial="so far")
    before = read_job_record(paused["job_id"])
    with pytest.raises(AdmissionError, match="write scope conflicts"):
        control_job(paused["job_id"], "continue", session["session_id"], ROOT,
                    expected_revision=2, input="go on")
    assert read_job_record(paused["job_id"]) == before


def test_a_relaunch_that_cannot_start_a_host_is_recorded_as_failed(session, monkeypatch):
    monkeypatch.setenv("MMO_WARM_HOSTS", "0")  # the host is spawned here, not by a warm host
    job = make_job(session, REVIEWER, status="suspended", control_revision=1, partial="p")
    (job_dir(job["job_id"]) / "runner.log").mkdir()  # the host's log cannot be opened
    with pytest.raises(RuntimeError, match="could not be relaunched"):
        control_job(job["job_id"], "continue", session["session_id"], ROOT,
                    expected_revision=1, input="carry on")
    record = read_job_record(job["job_id"])
    assert record["status"] == "suspended"
    assert record["last_control_status"] == "failed" and record["control_revision"] == 2
    assert "the job host could not be relaunched" in record["recovery_error"]


def test_a_worker_agent_without_its_job_id_cannot_control_a_job(session):
    job = make_job(session, REVIEWER, status="suspended", control_revision=0, partial="p")
    before = read_job_record(job["job_id"])
    with pytest.raises(PermissionError, match="own caller_job_id"):
        control_job(job["job_id"], "stop", session["session_id"], WRITER, expected_revision=0)
    assert read_job_record(job["job_id"]) == before

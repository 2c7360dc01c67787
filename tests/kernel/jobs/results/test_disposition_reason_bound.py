"""A disposition reason is at most 2,000 characters (spec 04/07), at every door.

``accept_result``, ``reject_result`` and ``integrate_patch`` record the reason in the
job record and the audit log: a longer one is refused before anything changes, and
one of exactly 2,000 characters is recorded whole. The mesh refuses the longer one
as invalid arguments (``-32602``) before calling the API.
"""

from __future__ import annotations

import pytest
from kernel.jobs.results.conftest import ROOT, audit_events, make_job
from kernel.mesh.meshkit import call, make_session, session_call

from mmo_kernel import package_version
from mmo_kernel.jobs.records import read_job_record
from mmo_kernel.jobs.results import accept_result, read_result, reject_result
from mmo_kernel.jobs.workspace import integrate_patch

LIMIT = 2000


def _disposition_events(session) -> list[dict]:
    return [e for e in audit_events(session)
            if e["event"] in ("agent_result_accepted", "agent_result_rejected",
                              "agent_patch_integrated")]


@pytest.mark.parametrize("dispose", [accept_result, reject_result])
def test_a_reason_over_2000_characters_is_refused_and_changes_nothing(session, dispose):
    job = make_job(session, result="done")
    read_result(job["job_id"], session["session_id"])
    before = read_job_record(job["job_id"])
    with pytest.raises(ValueError, match=f"at most {LIMIT} characters"):
        dispose(job["job_id"], "x" * (LIMIT + 1), session["session_id"], ROOT)
    assert read_job_record(job["job_id"]) == before
    assert before["result_state"] == "read" and "disposition_reason" not in before
    assert _disposition_events(session) == []


@pytest.mark.parametrize("dispose, state", [(accept_result, "accepted"),
                                            (reject_result, "rejected")])
def test_a_reason_of_exactly_2000_characters_is_recorded_whole(session, dispose, state):
    job = make_job(session, result="done")
    read_result(job["job_id"], session["session_id"])
    reason = "é" * LIMIT  # characters, not bytes
    public = dispose(job["job_id"], reason, session["session_id"], ROOT)
    assert public["result_state"] == state and public["disposition_reason"] == reason
    [event] = _disposition_events(session)
    assert event["job_id"] == job["job_id"] and event["reason"] == reason


def test_integration_refuses_a_reason_over_2000_characters_before_touching_anything(session):
    job = make_job(session, result="done", result_state="accepted")
    before = read_job_record(job["job_id"])
    with pytest.raises(ValueError, match=f"at most {LIMIT} characters"):
        integrate_patch(job["job_id"], "x" * (LIMIT + 1), session["session_id"], ROOT)
    assert read_job_record(job["job_id"]) == before
    assert _disposition_events(session) == []


@pytest.mark.parametrize("tool", ["agent_result_accept", "agent_result_reject",
                                  "agent_patch_integrate"])
def test_the_mesh_refuses_a_reason_over_2000_characters_as_invalid_arguments(mmo_env, tmp_path,
                                                                           tool):
    mesh = make_session(mmo_env.state_dir)
    # complete the hand-laid session record so that the API can answer on the merits
    mesh.update(package_version=package_version(), profile_id="mesh-team", cwd=str(tmp_path),
                session_kind="noninteractive", created_at="2026-01-01T00:00:00Z")
    job_id, _ = mesh.add_job("builder", status="completed")
    before = read_job_record(job_id)
    run = session_call(mesh.root_env(),
                       call(1, tool, {"job_id": job_id, "reason": "x" * (LIMIT + 1)}),
                       call(2, tool, {"job_id": job_id, "reason": "x" * LIMIT}))
    refused = run.by_id(1)["error"]
    assert refused["code"] == -32602 and "invalid tool arguments" in refused["data"]
    assert "reason" in refused["data"]
    # 2,000 characters pass the arguments check; the API then answers on the merits:
    # this result was never read (nor accepted), so it cannot be disposed of yet.
    within = run.by_id(2)["result"]
    assert within["isError"] is True and "result must be" in within["content"][0]["text"]
    assert read_job_record(job_id) == before

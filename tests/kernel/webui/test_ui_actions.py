"""Actions from the page go through the API as the CLI's do, and are audited as `ui`."""

from __future__ import annotations

from pathlib import Path

from .harness import audit, offline_session, writer_job


def _ui_events(session: dict) -> list[tuple[str, str | None]]:
    return [(e["event"], e.get("job_id")) for e in audit(session) if e.get("actor") == "ui"]


def test_read_accept_integrate_change_the_records_and_the_workspace_each_audited_as_ui(
        ui, mmo_git_workspace):
    from mmo_kernel.api import login_name, peek_job

    session = offline_session(mmo_git_workspace)
    job_id = writer_job(session)
    client = ui.client()
    path = f"/job/{job_id}/action"
    early = ui.post(client, path, {"action": "accept", "reason": "looks right"})
    assert early.status_code == 409 and early.json()["ok"] is False  # not read yet
    assert "read" in early.json()["message"] and "\n" not in early.json()["message"]
    assert ui.post(client, path, {"action": "accept"}).json()["message"].endswith(
        "needs a reason (it is kept in the audit log)")

    assert ui.post(client, path, {"action": "read"}).json() == {
        "ok": True, "message": f"read: job {job_id} result_state read"}
    assert ui.post(client, path, {"action": "accept", "reason": "looks right"}).status_code == 200
    assert peek_job(job_id)["result_state"] == "accepted"
    assert not (Path(mmo_git_workspace) / "notes" / "plan.md").exists()
    done = ui.post(client, path, {"action": "integrate", "reason": "ship it"})
    assert done.status_code == 200, done.text
    assert (Path(mmo_git_workspace) / "notes" / "plan.md").read_text() == "step one\n"
    assert peek_job(job_id)["result_state"] == "integrated"
    assert _ui_events(session) == [("agent_result_read", job_id),
                                   ("agent_result_accepted", job_id),
                                   ("agent_patch_integrated", job_id)]
    names = {e.get("actor_name") for e in audit(session) if e.get("actor") == "ui"}
    assert names == {login_name()}
    integrated = [e for e in audit(session) if e["event"] == "agent_patch_integrated"][-1]
    assert integrated["reason"] == "ship it"


def test_a_form_posted_without_the_script_redirects_back_with_the_outcome_shown_once(
        ui, mmo_git_workspace):
    from mmo_kernel.api import peek_job

    session = offline_session(mmo_git_workspace)
    job_id = writer_job(session)
    client = ui.client()
    csrf = ui.csrf(client, f"/job/{job_id}")
    sent = client.post(f"/job/{job_id}/action", data={"csrf": csrf, "action": "read"},
                       headers={"origin": ui.origin})
    assert sent.status_code == 303
    back = sent.headers["location"]
    assert back.startswith(f"/job/{job_id}?note=")
    assert "result_state read" in client.get(back).text
    assert "result_state read" not in client.get(back).text.split('id="notice"')[1][:200]
    assert peek_job(job_id)["result_state"] == "read"


def test_reject_and_cancel_a_job_and_cancel_the_session_from_the_page(ui, mmo_git_workspace):
    from mmo_kernel.api import peek_job, peek_session

    session = offline_session(mmo_git_workspace)
    sid = session["session_id"]
    job_id = writer_job(session)
    client = ui.client()
    ui.post(client, f"/job/{job_id}/action", {"action": "read"})
    rejected = ui.post(client, f"/job/{job_id}/action", {"action": "reject", "reason": "no"})
    assert rejected.status_code == 200 and peek_job(job_id)["result_state"] == "rejected"
    status = peek_session(sid)["status"]
    too_long = ui.post(client, f"/session/{sid}/control", {"action": "cancel",
                                                           "reason": "x" * 2_001})
    assert too_long.status_code == 409 and peek_session(sid)["status"] == status
    cancelled = ui.post(client, f"/session/{sid}/control", {"action": "cancel",
                                                            "reason": "wrong branch"})
    assert cancelled.status_code == 200, cancelled.text
    assert peek_session(sid)["status"] == "cancelled"
    assert ("agent_result_rejected", job_id) in _ui_events(session)
    event = [e for e in audit(session) if e["event"] == "session_cancelled"][-1]
    assert (event["actor"], event["reason"]) == ("ui", "wrong branch")
    again = ui.post(client, f"/session/{sid}/control", {"action": "pause"})
    assert again.status_code == 409 and again.json()["message"].startswith("refused: ")
    unknown = ui.post(client, f"/session/{sid}/control", {"action": "delete"})
    assert unknown.status_code == 409 and "unknown session action" in unknown.json()["message"]

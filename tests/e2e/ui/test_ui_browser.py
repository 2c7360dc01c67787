"""`mmo ui` in a real headless Chromium: the list, a live status change, reviewing and
integrating a patch, cancelling a session, the refusals, and no request leaving loopback."""

from __future__ import annotations

from pathlib import Path

from kernel.webui.harness import audit, finished, offline_session, spawn, writer_job
from playwright.sync_api import expect
from support.waiting import wait_until

ATTACKER = "http://attacker.example"


def test_the_fixture_sessions_are_listed_and_the_page_reaches_nothing_but_loopback(
        tab, mmo_git_workspace):
    made = [offline_session(mmo_git_workspace)["session_id"] for _ in range(2)]
    tab.open("/")
    for sid in made:
        expect(tab.page.locator(f'#all-sessions a[href="/session/{sid}"]')).to_be_visible()
        expect(tab.page.locator(f'#live-rows a[href="/session/{sid}"]')).to_be_visible()
    tab.page.click(f'#all-sessions a[href="/session/{made[0]}"]')
    expect(tab.page.locator("#sess-head h1")).to_contain_text("job-lab")
    tab.shot("list-then-session")
    assert tab.requests and tab.foreign() == []


def test_a_running_job_turns_completed_on_the_page_without_a_reload(tab, mmo_git_workspace,
                                                                   tmp_path):
    from mmo_kernel.api import peek_job

    session = offline_session(mmo_git_workspace)
    gate = tmp_path / "gate"
    job_id = spawn(session, "plain", f"Say hello FAKE_HOLD_UNTIL={gate}")
    wait_until(lambda: peek_job(job_id)["status"] == "running", timeout=60, what="the job")
    tab.open(f"/session/{session['session_id']}")
    card = tab.page.locator(f'#sess-tree li[data-key="{job_id}"] .badge').first
    expect(card).to_have_text("running")
    tab.page.evaluate("window.__sameDocument = true")  # gone if the page were reloaded
    gate.write_text("go")
    finished(job_id)
    expect(card).to_have_text("completed", timeout=3000)
    assert tab.page.evaluate("window.__sameDocument === true")
    tab.shot("live-completed")
    assert tab.foreign() == []


def test_read_accept_integrate_from_the_page_change_the_repository_and_the_audit_log(
        tab, mmo_git_workspace):
    session = offline_session(mmo_git_workspace)
    job_id = writer_job(session)
    tab.open(f"/job/{job_id}?tab=diff")
    page = tab.page
    expect(page.locator("pre.diff")).to_contain_text("+step one")
    tab.shot("job-diff")
    integrate = page.locator("button[value=integrate]")
    expect(integrate).to_be_disabled()  # not accepted yet
    page.click("button[value=read]")
    expect(page.locator("#notice")).to_contain_text("result_state read")
    page.fill("input[name=reason]", "the plan is right")
    accept = page.locator("button[value=accept]")
    expect(accept).to_be_enabled()
    accept.click()
    expect(page.locator("#notice")).to_contain_text("result_state accepted")
    page.fill("input[name=reason]", "ship it")
    expect(integrate).to_be_enabled()
    integrate.click()
    expect(page.locator("#notice")).to_contain_text("result_state integrated")
    expect(page.locator("#job-head")).to_contain_text("integrated")
    assert (Path(mmo_git_workspace) / "notes" / "plan.md").read_text() == "step one\n"
    line = [e for e in audit(session) if e["event"] == "agent_patch_integrated"][-1]
    assert (line["actor"], line["job_id"], line["reason"]) == ("ui", job_id, "ship it")
    tab.shot("job-integrated")
    assert tab.foreign() == []


def test_cancel_from_the_session_page(tab, mmo_git_workspace):
    from mmo_kernel.api import peek_session

    session = offline_session(mmo_git_workspace)
    sid = session["session_id"]
    tab.open(f"/session/{sid}")
    tab.page.on("dialog", lambda dialog: dialog.accept())  # "Cancel ...?" confirmed
    tab.page.click("button[value=cancel]")
    expect(tab.page.locator("#sess-head .badge").first).to_have_text("cancelled",
                                                                      timeout=10_000)
    assert peek_session(sid)["status"] == "cancelled"
    event = [e for e in audit(session) if e["event"] == "session_cancelled"][-1]
    assert event["actor"] == "ui"
    expect(tab.page.locator("button[value=cancel]")).to_be_disabled()
    tab.shot("session-cancelled")
    assert tab.foreign() == []


def test_a_wrong_token_a_foreign_host_and_a_cross_origin_post_get_403(context, ui,
                                                                    mmo_git_workspace):
    session = offline_session(mmo_git_workspace)
    job_id = writer_job(session)
    page = context.new_page()  # closed with the test's context
    wrong = page.goto(f"{ui.origin}/?token=not-the-token")
    assert wrong.status == 403
    foreign = page.goto(f"http://localhost:{ui.port}/?token={ui.token}")
    assert foreign.status == 403  # the Host names another site (DNS rebinding)
    page.goto(f"{ui.origin}/?token={ui.token}")  # this browser now holds the cookie
    # another site's page posts a form to the UI (served by the browser itself: no network)
    form = (f'<form method="post" action="{ui.origin}/job/{job_id}/action">'
            '<input name="action" value="read"><button>go</button></form>')
    page.route(f"{ATTACKER}/**", lambda route: route.fulfill(body=form,
                                                            content_type="text/html"))
    page.goto(f"{ATTACKER}/")
    with page.expect_response(f"{ui.origin}/job/{job_id}/action") as posted:
        page.click("button")
    assert posted.value.status == 403
    assert [e for e in audit(session) if e["event"] == "agent_result_read"] == []

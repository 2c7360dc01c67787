"""Who `mmo ui` answers: the printed token (then its cookie), the bound Host only, POSTs
from its own origin with the page's CSRF token; and what it never serves."""

from __future__ import annotations

import pytest

from .harness import audit, offline_session, writer_job


def test_the_token_is_traded_once_for_a_strict_httponly_cookie_and_dropped_from_the_url(ui):
    client = ui.client(login=False)
    welcome = client.get(f"/?token={ui.token}&status=running")
    assert welcome.status_code == 303
    assert welcome.headers["location"] == "/?status=running"  # the token leaves the address
    cookie = welcome.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and ui.token not in cookie
    page = client.get("/")
    assert page.status_code == 200 and ui.token not in page.text
    csp = page.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "connect-src 'self'" in csp
    assert page.headers["x-frame-options"] == "DENY"


@pytest.mark.parametrize("path", ["/", "/static/mmo-ui.js", "/events?topic=list",
                                  "/session/20261202-101500-team-abc123"])
def test_no_token_or_a_wrong_one_is_403_everywhere(ui, path):
    bare = ui.client(login=False)
    assert bare.get(path).status_code == 403
    assert bare.get(path, params={"token": ui.token[:-2] + "xx"}).status_code == 403
    assert bare.get(path, headers={"cookie": "mmo_ui=" + ui.token}).status_code == 403


@pytest.mark.parametrize("host", ["evil.example", "localhost:{port}", "127.0.0.1",
                                  "127.0.0.1:1", "evil.example:{port}"])
def test_a_foreign_host_header_is_403_even_with_the_cookie(ui, host):
    client = ui.client()
    assert client.get("/", headers={"host": host.format(port=ui.port)}).status_code == 403
    welcome = ui.client(login=False).get(f"/?token={ui.token}",
                                         headers={"host": host.format(port=ui.port)})
    assert welcome.status_code == 403  # DNS rebinding cannot even trade the token


def test_posts_need_the_own_origin_and_the_csrf_token_and_a_refused_one_changes_nothing(
        ui, mmo_git_workspace):
    from mmo_kernel.api import peek_job

    session = offline_session(mmo_git_workspace)
    job_id = writer_job(session)
    client = ui.client()
    before = audit(session)
    path = f"/job/{job_id}/action"
    data = {"action": "read"}
    assert ui.post(client, path, data, origin="http://evil.example").status_code == 403
    assert ui.post(client, path, data, origin="").status_code == 403  # no Origin at all
    assert ui.post(client, path, data, origin=f"http://localhost:{ui.port}").status_code == 403
    assert ui.post(client, path, data, **{"x-csrf-token": ""}).status_code == 403
    assert ui.post(client, path, data, **{"x-csrf-token": "forged"}).status_code == 403
    csrf = ui.csrf(client)
    bare = ui.client(login=False)  # the right CSRF token and origin, but no cookie
    assert bare.post(path, data=data, headers={"origin": ui.origin, "x-csrf-token": csrf,
                                               "accept": "application/json"}).status_code == 403
    form = client.post(path, data={**data, "csrf": "forged"}, headers={"origin": ui.origin})
    assert form.status_code == 403
    assert peek_job(job_id)["result_state"] == "unread" and audit(session) == before


def test_no_path_outside_the_state_dir_no_credentials_and_no_capability_is_ever_served(
        ui, mmo_git_workspace, offline):
    from mmo_kernel.api import root_mcp_token

    session = offline_session(mmo_git_workspace)
    sid = session["session_id"]
    job_id = writer_job(session)
    secret = "sk-ui-test-" + "7" * 24
    (offline.config_dir / "credentials.env").write_text(f"OPENAI_API_KEY={secret}\n")
    client = ui.client()
    for path in ("/static/../credentials.env", "/static/..%2f..%2fcredentials.env",
                 "/static/page.html", "/session/..%2F..%2Fconfig", "/session/%2e%2e",
                 f"/job/{job_id}%2F..%2F..%2Fsessions", "/job/..%2Fcredentials.env",
                 "/events?topic=job:..%2F..%2Fetc"):
        answer = client.get(path)
        assert answer.status_code in (403, 404), path
        assert secret not in answer.text
    capability = root_mcp_token(sid)
    pages = [client.get(p).text for p in (
        "/", f"/session/{sid}", f"/job/{job_id}", f"/job/{job_id}?tab=trace",
        f"/job/{job_id}?tab=prompt", f"/job/{job_id}?tab=diff")]
    with client.stream("GET", f"/events?topic=session:{sid}") as stream:
        lines = stream.iter_lines()
        pages.append("".join(next(lines) for _ in range(3)))  # event, id, data
    for text in pages:
        assert capability not in text and secret not in text and ui.token not in text


def test_a_symlinked_prompt_is_not_followed(ui, mmo_git_workspace, tmp_path):
    from mmo_kernel.jobs.records import job_file

    session = offline_session(mmo_git_workspace)
    job_id = writer_job(session)
    outside = tmp_path / "outside.txt"
    outside.write_text("OUTSIDE-THE-STATE-DIR\n")
    prompt = job_file(job_id, "prompt.txt")
    prompt.unlink()
    prompt.symlink_to(outside)
    page = ui.client().get(f"/job/{job_id}?tab=prompt")
    assert page.status_code == 200 and "OUTSIDE-THE-STATE-DIR" not in page.text

"""`mmo ui` over HTTP: the list with its filter and pages, a session, a job's result, patch,
trace and prompt, and the live stream with its keep-alives and `Last-Event-ID` resume."""

from __future__ import annotations

import json
import re

from .harness import audit, offline_session, sse_events, writer_job


def test_the_list_shows_every_session_newest_first_in_pages_and_filters(ui, mmo_git_workspace):
    from mmo_kernel.api import iter_sessions

    for _ in range(3):
        offline_session(mmo_git_workspace)
    made = [r["session_id"] for r in iter_sessions(all_sessions=True)]  # `mmo sessions --all`
    assert len(made) == 3
    client = ui.client()
    first = client.get("/?size=2")
    assert first.status_code == 200
    shown = re.findall(r'href="/session/([^"]+)"', first.text.split('id="all-sessions"')[1])
    assert shown == made[:2]
    assert 'rel="next"' in first.text and 'rel="prev"' not in first.text
    second = client.get("/?size=2&page=2").text.split('id="all-sessions"')[1]
    assert re.findall(r'href="/session/([^"]+)"', second) == [made[2]]
    only = client.get("/", params={"q": made[1]}).text.split('id="all-sessions"')[1]
    assert re.findall(r'href="/session/([^"]+)"', only) == [made[1]]
    none = client.get("/", params={"status": "completed"})
    assert "no session matches" in none.text
    assert client.get("/?page=0").status_code == 400  # one line naming the parameter
    assert "page" in client.get("/?page=0").text


def test_a_session_page_shows_its_tree_and_audit_and_a_job_page_its_result_patch_trace_prompt(
        ui, mmo_git_workspace):
    session = offline_session(mmo_git_workspace)
    sid = session["session_id"]
    job_id = writer_job(session)
    client = ui.client()
    page = client.get(f"/session/{sid}").text
    assert f'href="/job/{job_id}"' in page and ">writer</a>" in page
    assert "agent_started" in page and "run_started" in page
    assert "✎ notes" in page  # the writer's scope
    diff = client.get(f"/job/{job_id}?tab=diff").text
    assert '<span class="d-add">+step one</span>' in diff and "notes/plan.md" in diff
    assert "FAKE_WRITE notes/plan.md::step one" in client.get(f"/job/{job_id}?tab=prompt").text
    result = client.get(f"/job/{job_id}").text
    assert "FAKE_CODEX_OK" in result and "result_state unread" in result
    trace = client.get(f"/job/{job_id}?tab=trace").text
    assert "turn/started" in trace
    # reading the page never marks the result read: that is the audited `read` action
    assert [e for e in audit(session) if e["event"] == "agent_result_read"] == []
    assert client.get(f"/job/{job_id}?tab=secrets").status_code == 400
    assert client.get("/job/20990101-000000-nobody-abc123").status_code == 404


def test_the_stream_sends_the_state_then_keepalives_and_resumes_from_last_event_id(
        ui, mmo_git_workspace):
    from mmo_kernel.api import read_result

    session = offline_session(mmo_git_workspace)
    sid = session["session_id"]
    job_id = writer_job(session)
    client = ui.client()
    with client.stream("GET", f"/events?topic=session:{sid}") as stream:
        assert stream.headers["content-type"].startswith("text/event-stream")
        lines = stream.iter_lines()
        sent = [sse_events(lines, 1)[0]]
        # the UI's snapshot may be up to a period old, so the writer's last change can still
        # follow the state; then nothing changes and only keep-alives come
        while "comment" not in sent[-1] and len(sent) < 4:
            sent.append(sse_events(lines, 1)[0])
    *states, ping = sent
    assert "comment" in ping, sent  # a keep-alive while nothing changed
    versions = [int(e["id"].split(".")[1]) for e in states]
    assert versions == sorted(set(versions))  # every change is sent once, newest last
    first = states[-1]
    assert first["event"] == "fragments" and re.fullmatch(r"[0-9a-f]{8}\.\d+", first["id"])
    fragments = json.loads(first["data"])
    assert f'href="/job/{job_id}"' in fragments["sess-tree"]

    with client.stream("GET", f"/events?topic=session:{sid}",
                       headers={"last-event-id": first["id"]}) as stream:
        lines = stream.iter_lines()
        resumed = sse_events(lines, 1)[0]
        assert "comment" in resumed  # the client has this state: nothing is sent again
        read_result(job_id, sid, caller_agent="lead")  # an audited change
        change = next(e for e in iter(lambda: sse_events(lines, 1)[0], None) if "id" in e)
    run, version = first["id"].split(".")
    assert change["id"].split(".")[0] == run and int(change["id"].split(".")[1]) > int(version)
    assert "agent_result_read" in json.loads(change["data"])["sess-audit"]

    with client.stream("GET", f"/events?topic=session:{sid}",
                       headers={"last-event-id": "00000000.99999"}) as stream:
        other_run = sse_events(stream.iter_lines(), 1)[0]  # another run's id: the state at once
    assert other_run.get("event") == "fragments"
    assert client.get("/events?topic=session:../../etc").status_code == 404

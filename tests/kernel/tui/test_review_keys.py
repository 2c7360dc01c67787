"""Reviewing from the keys on real records: read, accept, reject and integrate go through
the API as ``mmo job ...`` does, destructive ones ask first, a declined confirmation
changes nothing, errors are one line in the app, and the audit log says ``ui``."""

from __future__ import annotations

from kernel.tui.conftest import audit, run, shown, until

from mmo_kernel.api import login_name
from mmo_kernel.jobs.records import read_job_record
from mmo_kernel.tui.dialogs import AskScreen, TextScreen


async def select(pilot, job_id: str | None, session_id: str | None = None) -> None:
    """Move the cursor to the job's row (or, with ``job_id`` None, the session's header)."""
    team = pilot.app.team
    await pilot.press("home")
    for _ in range(len(team.rows)):
        row = team.selected
        if (job_id and row.agent and row.agent.job_id == job_id) or (
                job_id is None and row.is_session and row.session.session_id == session_id):
            return
        await pilot.press("down")
    raise AssertionError(f"no row for {job_id or session_id}")


async def answer(pilot, *keys: str) -> None:
    await until(pilot, lambda: isinstance(pilot.app.screen, AskScreen), "the question")
    for key in keys:
        await pilot.press(key)


async def notice(pilot, phrase: str, before: int) -> str:
    """The first notice after the first ``before`` that contains ``phrase``."""
    return await until(pilot, lambda: next((n for n in pilot.app.notices[before:]
                                            if phrase in n), None), f"a notice with {phrase!r}")


def _ui_entries(session_id: str, event: str) -> list[dict]:
    return [e for e in audit(session_id) if e["event"] == event]


def test_read_accept_and_integrate_a_writers_patch_from_the_keys(team):
    writer, sid = team["writer"], team["paused"]
    target = team["cwd"] / "src" / "feature.py"

    async def body(pilot):
        await select(pilot, writer)
        # accepting an unread result is refused by the API: one line, the app goes on
        before = len(pilot.app.notices)
        await pilot.press("A")
        await answer(pilot, *"looks fine", "enter")
        refused = await notice(pilot, "failed", before)
        assert refused.startswith(f"accept implementation_specialist (job …{writer[-6:]}) "
                                  "failed: result must be read")
        assert shown(pilot.app, refused[:60]) and not shown(pilot.app, "Traceback")
        assert read_job_record(writer)["result_state"] == "unread"

        await pilot.press("r")  # reads the whole result: it is read now
        await until(pilot, lambda: isinstance(pilot.app.screen, TextScreen), "the result")
        assert shown(pilot.app, "Implemented the feature in src/feature.py.")
        assert shown(pilot.app, "result_state read")
        await pilot.press("escape")
        await pilot.press("A")
        await answer(pilot, *"good change", "enter")
        await until(pilot, lambda: read_job_record(writer)["result_state"] == "accepted",
                    "the acceptance")

        await pilot.press("d")  # the captured patch, as `mmo job diff` prints it
        await until(pilot, lambda: shown(pilot.app, "+FEATURE = True"), "the diff")
        await pilot.press("escape")
        # integrate is destructive: declined, nothing is applied
        before = len(pilot.app.notices)
        await pilot.press("I")
        await answer(pilot, "escape")
        assert "not confirmed, nothing changed" in await notice(pilot, "integrate", before)
        assert read_job_record(writer)["result_state"] == "accepted" and not target.exists()
        # an empty reason is not sent: the dialog says so and stays
        await pilot.press("I")
        await answer(pilot, "enter")
        assert isinstance(pilot.app.screen, AskScreen) and shown(pilot.app, "is required")
        await pilot.press(*"apply it", "enter")
        await until(pilot, lambda: read_job_record(writer)["result_state"] == "integrated",
                    "the integration")
        await until(pilot, lambda: shown(pilot.app, "result integrated"), "the new state shown")

    run(body, (100, 30))
    assert target.read_text() == "FEATURE = True\n"
    for event in ("agent_result_read", "agent_result_accepted", "agent_patch_integrated"):
        entries = _ui_entries(sid, event)
        assert entries, event
        assert (entries[-1]["actor"], entries[-1]["actor_name"]) == ("ui", login_name())
    assert _ui_entries(sid, "agent_result_accepted")[-1]["reason"] == "good change"
    assert _ui_entries(sid, "agent_patch_integrated")[-1]["reason"] == "apply it"


def test_reject_asks_first_and_a_declined_one_changes_nothing(team):
    reviewer, sid = team["reviewer"], team["paused"]

    async def body(pilot):
        await select(pilot, reviewer)
        await pilot.press("r")
        await until(pilot, lambda: isinstance(pilot.app.screen, TextScreen), "the result")
        await pilot.press("q")
        await until(pilot, lambda: read_job_record(reviewer)["result_state"] == "read", "read")
        await pilot.press("R")
        await answer(pilot)
        assert shown(pilot.app, f"Reject job {reviewer}") and shown(pilot.app, "esc: cancel")
        await pilot.press(*"nope", "escape")
        await until(pilot, lambda: not isinstance(pilot.app.screen, AskScreen), "the close")
        assert read_job_record(reviewer)["result_state"] == "read"
        assert not _ui_entries(sid, "agent_result_rejected")
        await pilot.press("R")
        await answer(pilot, *"wrong file", "enter")
        await until(pilot, lambda: read_job_record(reviewer)["result_state"] == "rejected",
                    "the rejection")

    run(body, (80, 24))
    [rejected] = _ui_entries(sid, "agent_result_rejected")
    assert (rejected["actor"], rejected["reason"]) == ("ui", "wrong file")


def test_keys_that_do_not_fit_the_row_or_fail_say_so_in_one_line(team):
    async def body(pilot):
        await select(pilot, None, team["paused"])  # a session header
        for key, phrase in (("A", "accept acts on a worker's result"),
                            ("s", "steer acts on a worker")):
            before = len(pilot.app.notices)
            await pilot.press(key)
            assert phrase in await notice(pilot, phrase, before)
            assert not isinstance(pilot.app.screen, AskScreen)
        # a worker that already failed cannot be steered: the API's refusal, one line
        await select(pilot, team["scout"])
        before = len(pilot.app.notices)
        await pilot.press("s")
        await answer(pilot, *"look at src", "enter")
        failed = await notice(pilot, "failed", before)
        assert failed.startswith(f"steer repo_scout (job …{team['scout'][-6:]}) failed: ")
        assert "\n" not in failed and "Traceback" not in failed
        assert shown(pilot.app, failed[:60])  # on the notice line, cut to the width
        # a worker's stop asks only yes/no (a control takes no reason): n declines it
        before = len(pilot.app.notices)
        await pilot.press("S")
        await answer(pilot, "n")
        assert "not confirmed, nothing changed" in await notice(pilot, "stop", before)

    run(body, (80, 24))
    assert read_job_record(team["scout"])["status"] == "failed"

"""Goal plans (spec 12 "Goal plans") against the server's GoalStore: every rule, in order."""

from __future__ import annotations

import copy
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from mmo_kernel.project_tools.envelope import ToolFailure
from mmo_kernel.serve.goals import GoalStore

SESSION = "mmo_sess_lead1"


def prepare_args(key: str = "k-prep", session: str = SESSION, **over: Any) -> dict[str, Any]:
    args = {"session_id": session, "title": "Fix calc", "objective": "calc.py adds",
            "completion_conditions": ["tests pass"],
            "steps": [{"id": "read", "title": "Read calc.py"},
                      {"id": "fix", "title": "Fix add()"},
                      {"id": "test", "title": "Run tests"}],
            "idempotency_key": key}
    args.update(over)
    return args


def failure_of(call: Any, *args: Any) -> ToolFailure:
    with pytest.raises(ToolFailure) as caught:
        call(*args)
    return caught.value


def snapshot(state: Path) -> bytes:
    return (state / "goals.json").read_bytes()


@pytest.fixture
def store(tmp_path: Path) -> GoalStore:
    return GoalStore(tmp_path / "serve")


@pytest.fixture
def goal(store: GoalStore) -> dict[str, Any]:
    return store.prepare(prepare_args())["goal"]


def checkpoint(store: GoalStore, goal_id: str, rev: int, key: str, **over: Any) -> dict[str, Any]:
    args = {"goal_id": goal_id, "expected_revision": rev, "summary": "progress",
            "idempotency_key": key}
    args.update(over)
    return store.checkpoint(args)


def revise(store: GoalStore, goal_id: str, rev: int, key: str, steps: list[dict[str, str]],
           reason: str = "replan") -> dict[str, Any]:
    return store.revise({"goal_id": goal_id, "expected_revision": rev, "reason": reason,
                         "steps": steps, "idempotency_key": key})


def update(store: GoalStore, goal_id: str, rev: int, key: str, lifecycle: str,
           **over: Any) -> dict[str, Any]:
    args = {"goal_id": goal_id, "expected_revision": rev, "lifecycle": lifecycle,
            "idempotency_key": key}
    args.update(over)
    return store.update(args)


# ------------------------------------------------------------------ prepare --


def test_prepare_starts_at_revision_one_with_every_step_pending(store: GoalStore) -> None:
    reply = store.prepare(prepare_args())
    assert reply["replayed"] is False and reply["state_changed"] is True
    goal = reply["goal"]
    summary = goal["summary"]
    assert summary["goal_id"].startswith("mmo_goal_")
    assert {k: summary[k] for k in ("session_id", "title", "objective", "completion_conditions",
                                    "revision", "lifecycle", "current_step_id",
                                    "terminal_reason", "terminal_at_unix_ms")} == {
        "session_id": SESSION, "title": "Fix calc", "objective": "calc.py adds",
        "completion_conditions": ["tests pass"], "revision": 1, "lifecycle": "active",
        "current_step_id": None, "terminal_reason": None, "terminal_at_unix_ms": None}
    assert isinstance(summary["updated_at_unix_ms"], int)
    assert goal["plan"] == {"current_step_id": None, "steps": [
        {"id": "read", "title": "Read calc.py", "status": "pending"},
        {"id": "fix", "title": "Fix add()", "status": "pending"},
        {"id": "test", "title": "Run tests", "status": "pending"}]}
    assert goal["plan_history"] == {"revisions": [], "total_count": 0, "returned_count": 0}
    assert store.get(summary["goal_id"]) == {"goal": goal}


@pytest.mark.parametrize("steps, phrase", [
    ([], "at least one step"),
    ([{"id": "a", "title": "A"}, {"id": "a", "title": "again"}], "duplicate step id 'a'"),
    ([{"id": f"s{i}", "title": "t"} for i in range(101)], "at most 100 steps"),
    ([{"id": "", "title": "t"}], "steps[0].id"),
])
def test_prepare_refuses_bad_step_lists_and_keeps_no_key(store: GoalStore, tmp_path: Path,
                                                         steps: list[Any], phrase: str) -> None:
    exc = failure_of(store.prepare, prepare_args(steps=steps))
    assert exc.kind == "invalid_goal_plan" and phrase in exc.message
    assert not (tmp_path / "serve" / "goals.json").exists()
    # The failed call left no key behind: the same key now prepares a goal.
    assert store.prepare(prepare_args())["replayed"] is False


def test_prepare_accepts_exactly_one_hundred_steps(store: GoalStore) -> None:
    steps = [{"id": f"s{i}", "title": "t"} for i in range(100)]
    assert len(store.prepare(prepare_args(steps=steps))["goal"]["plan"]["steps"]) == 100


def test_prepare_key_is_per_session(store: GoalStore) -> None:
    first = store.prepare(prepare_args())["goal"]
    replay = store.prepare(prepare_args())
    assert replay["replayed"] is True and replay["state_changed"] is False
    assert replay["goal"] == first
    other = store.prepare(prepare_args(session="mmo_sess_other"))
    assert other["replayed"] is False
    assert other["goal"]["summary"]["goal_id"] != first["summary"]["goal_id"]
    exc = failure_of(store.prepare, prepare_args(title="Another title"))
    assert exc.kind == "goal_idempotency_conflict"


def test_prepare_replay_returns_the_goal_as_it_is_now(store: GoalStore) -> None:
    goal = store.prepare(prepare_args())["goal"]
    gid = goal["summary"]["goal_id"]
    checkpoint(store, gid, 1, "c1", current_step_id="read")
    replay = store.prepare(prepare_args())
    assert replay["replayed"] is True and replay["goal"]["summary"]["revision"] == 2


# ---------------------------------------------------------------- checkpoint --


def test_checkpoint_completes_steps_sets_current_and_leaves_others_exactly(
        store: GoalStore, goal: dict[str, Any]) -> None:
    gid = goal["summary"]["goal_id"]
    reply = checkpoint(store, gid, 1, "c1", current_step_id="read")
    assert reply["state_changed"] is True and reply["replayed"] is False
    after = reply["goal"]
    assert after["summary"]["revision"] == 2
    assert after["summary"]["current_step_id"] == after["plan"]["current_step_id"] == "read"
    assert after["plan"]["steps"][0] == {"id": "read", "title": "Read calc.py",
                                         "status": "in_progress"}
    assert after["plan"]["steps"][1:] == goal["plan"]["steps"][1:]

    after = checkpoint(store, gid, 2, "c2", completed_step_ids=["read"],
                       current_step_id="fix")["goal"]
    assert [s["status"] for s in after["plan"]["steps"]] == ["completed", "in_progress",
                                                             "pending"]
    assert after["plan"]["steps"][2] == goal["plan"]["steps"][2]
    assert after["plan_history"]["total_count"] == 0  # only revise adds history


def test_checkpoint_without_current_step_clears_it(store: GoalStore,
                                                   goal: dict[str, Any]) -> None:
    gid = goal["summary"]["goal_id"]
    checkpoint(store, gid, 1, "c1", current_step_id="fix")
    after = checkpoint(store, gid, 2, "c2")["goal"]
    assert after["plan"]["current_step_id"] is None
    assert after["summary"]["current_step_id"] is None
    assert [s["status"] for s in after["plan"]["steps"]] == ["pending"] * 3
    assert after["summary"]["revision"] == 3


@pytest.mark.parametrize("over, phrase", [
    ({"completed_step_ids": ["nope"]}, "no step 'nope'"),
    ({"current_step_id": "nope"}, "no step 'nope'"),
    ({"completed_step_ids": ["read"], "current_step_id": "read"}, "steps never go back"),
])
def test_checkpoint_content_rules(store: GoalStore, goal: dict[str, Any], tmp_path: Path,
                                  over: dict[str, Any], phrase: str) -> None:
    gid = goal["summary"]["goal_id"]
    before = snapshot(tmp_path / "serve")
    with pytest.raises(ToolFailure) as caught:
        checkpoint(store, gid, 1, "c1", **over)
    exc = caught.value
    assert exc.kind == "invalid_goal_plan" and phrase in exc.message
    assert exc.state_changed is False
    assert snapshot(tmp_path / "serve") == before


def test_a_completed_step_never_goes_back(store: GoalStore, goal: dict[str, Any]) -> None:
    gid = goal["summary"]["goal_id"]
    checkpoint(store, gid, 1, "c1", completed_step_ids=["read"])
    with pytest.raises(ToolFailure) as caught:
        checkpoint(store, gid, 2, "c2", current_step_id="read")
    assert caught.value.kind == "invalid_goal_plan"
    # Completing it again changes nothing but the revision.
    after = checkpoint(store, gid, 2, "c3", completed_step_ids=["read"])["goal"]
    assert after["plan"]["steps"][0]["status"] == "completed"
    assert after["summary"]["revision"] == 3


# -------------------------------------------------------------------- revise --


def test_revise_keeps_statuses_adds_pending_and_pushes_history(store: GoalStore,
                                                               goal: dict[str, Any]) -> None:
    gid = goal["summary"]["goal_id"]
    before = checkpoint(store, gid, 1, "c1", completed_step_ids=["read"],
                        current_step_id="fix")["goal"]
    after = revise(store, gid, 2, "r1", [
        {"id": "read", "title": "Read calc.py and tests"},
        {"id": "fix", "title": "Fix add()"},
        {"id": "doc", "title": "Document"},
    ], reason="tests need no separate step")["goal"]
    assert after["summary"]["revision"] == 3
    assert after["plan"] == {"current_step_id": "fix", "steps": [
        {"id": "read", "title": "Read calc.py and tests", "status": "completed"},
        {"id": "fix", "title": "Fix add()", "status": "in_progress"},
        {"id": "doc", "title": "Document", "status": "pending"}]}
    assert after["plan_history"] == {"total_count": 1, "returned_count": 1, "revisions": [
        {"revision": 2, "reason": "tests need no separate step", "plan": before["plan"]}]}


def test_revise_dropping_the_current_step_clears_it(store: GoalStore,
                                                    goal: dict[str, Any]) -> None:
    gid = goal["summary"]["goal_id"]
    checkpoint(store, gid, 1, "c1", current_step_id="fix")
    after = revise(store, gid, 2, "r1", [{"id": "read", "title": "Read"},
                                         {"id": "test", "title": "Run tests"}])["goal"]
    assert after["plan"]["current_step_id"] is None
    assert after["summary"]["current_step_id"] is None
    assert [s["status"] for s in after["plan"]["steps"]] == ["pending", "pending"]


@pytest.mark.parametrize("steps, phrase", [
    ([], "at least one step"),
    ([{"id": "fix", "title": "Fix"}, {"id": "test", "title": "Test"}], "completed step 'read'"),
    ([{"id": "b", "title": "B"}, {"id": "read", "title": "Read"}], "completed step 'a'"),
    ([{"id": "a", "title": "A"}, {"id": "read", "title": "Read"}],
     "completed steps must keep their order"),
    ([{"id": "read", "title": "R"}, {"id": "a", "title": "A"}, {"id": "read", "title": "R"}],
     "duplicate step id 'read'"),
])
def test_revise_content_rules_change_nothing(store: GoalStore, tmp_path: Path,
                                             steps: list[Any], phrase: str) -> None:
    gid = store.prepare(prepare_args(steps=[{"id": "read", "title": "Read"},
                                            {"id": "a", "title": "A"},
                                            {"id": "b", "title": "B"}]))["goal"]["summary"][
        "goal_id"]
    checkpoint(store, gid, 1, "c1", completed_step_ids=["read", "a"])
    before = snapshot(tmp_path / "serve")
    with pytest.raises(ToolFailure) as caught:
        revise(store, gid, 2, "r1", steps)
    assert caught.value.kind == "invalid_goal_plan" and phrase in caught.value.message
    assert snapshot(tmp_path / "serve") == before
    # No key bookkeeping either: the same key with a valid plan is a fresh change (an
    # unfinished step may move before the completed ones and be dropped).
    ok = revise(store, gid, 2, "r1", [{"id": "c", "title": "C"}, {"id": "read", "title": "R"},
                                      {"id": "a", "title": "A"}])
    assert ok["replayed"] is False and ok["goal"]["summary"]["revision"] == 3


def test_history_returns_the_newest_twenty(store: GoalStore, goal: dict[str, Any]) -> None:
    gid = goal["summary"]["goal_id"]
    for number in range(25):
        reply = revise(store, gid, 1 + number, f"r{number}",
                       [{"id": "read", "title": f"Read v{number}"}], reason=f"why {number}")
    history = reply["goal"]["plan_history"]
    assert history["total_count"] == 25 and history["returned_count"] == 20
    assert [r["revision"] for r in history["revisions"]] == list(range(25, 5, -1))
    assert history["revisions"][0]["reason"] == "why 24"
    assert history["revisions"][0]["plan"]["steps"][0]["title"] == "Read v23"
    assert history["revisions"][-1]["plan"]["steps"][0]["title"] == "Read v4"


# -------------------------------------------------------------------- update --


def test_completing_needs_every_step_completed(store: GoalStore, goal: dict[str, Any],
                                               tmp_path: Path) -> None:
    gid = goal["summary"]["goal_id"]
    checkpoint(store, gid, 1, "c1", completed_step_ids=["read", "fix"])
    before = snapshot(tmp_path / "serve")
    with pytest.raises(ToolFailure) as caught:
        update(store, gid, 2, "u1", "completed")
    assert caught.value.kind == "goal_steps_incomplete" and "'test'" in caught.value.message
    assert snapshot(tmp_path / "serve") == before
    done = checkpoint(store, gid, 2, "c2", completed_step_ids=["test"])["goal"]
    final = update(store, gid, 3, "u1", "completed", terminal_reason="all green")["goal"]
    assert final["summary"]["lifecycle"] == "completed"
    assert final["summary"]["terminal_reason"] == "all green"
    assert isinstance(final["summary"]["terminal_at_unix_ms"], int)
    assert final["summary"]["revision"] == 4
    assert final["plan"] == done["plan"] and final["plan_history"] == done["plan_history"]


def test_abandoning_needs_no_completed_steps_and_then_refuses_changes(
        store: GoalStore, goal: dict[str, Any]) -> None:
    gid = goal["summary"]["goal_id"]
    final = update(store, gid, 1, "u1", "abandoned")["goal"]
    assert final["summary"]["lifecycle"] == "abandoned"
    assert final["summary"]["terminal_reason"] is None
    for call in (lambda: checkpoint(store, gid, 2, "c1"),
                 lambda: revise(store, gid, 2, "r1", [{"id": "x", "title": "X"}]),
                 lambda: update(store, gid, 2, "u2", "completed")):
        with pytest.raises(ToolFailure) as caught:
            call()
        assert caught.value.kind == "goal_terminal"


def test_update_to_active_is_not_a_change(store: GoalStore, goal: dict[str, Any]) -> None:
    with pytest.raises(ToolFailure) as caught:
        update(store, goal["summary"]["goal_id"], 1, "u1", "active")
    assert caught.value.kind == "invalid_goal_plan"


# -------------------------------------------------------------- check order --


def test_checks_run_in_the_spec_order(store: GoalStore, goal: dict[str, Any],
                                      tmp_path: Path) -> None:
    gid = goal["summary"]["goal_id"]
    checkpoint(store, gid, 1, "c1", current_step_id="read")
    # 3 before 4: a stale revision wins over bad content.
    with pytest.raises(ToolFailure) as caught:
        checkpoint(store, gid, 1, "c2", current_step_id="nope")
    assert caught.value.kind == "goal_revision_changed"
    assert "revision 2" in caught.value.message
    update(store, gid, 2, "u1", "abandoned")
    before = snapshot(tmp_path / "serve")
    # 2 before 3: terminal wins over a stale revision.
    with pytest.raises(ToolFailure) as caught:
        checkpoint(store, gid, 1, "c3")
    assert caught.value.kind == "goal_terminal"
    # 1 before 2: a used key with another payload is a conflict even when terminal ...
    with pytest.raises(ToolFailure) as caught:
        checkpoint(store, gid, 1, "c1", current_step_id="fix")
    assert caught.value.kind == "goal_idempotency_conflict"
    # ... and the same payload an inert replay, the goal as it is now.
    replay = checkpoint(store, gid, 1, "c1", current_step_id="read")
    assert replay["replayed"] is True and replay["state_changed"] is False
    assert replay["goal"]["summary"]["lifecycle"] == "abandoned"
    assert replay["goal"]["summary"]["revision"] == 3
    assert snapshot(tmp_path / "serve") == before


def test_a_key_used_by_another_tool_conflicts(store: GoalStore, goal: dict[str, Any]) -> None:
    gid = goal["summary"]["goal_id"]
    checkpoint(store, gid, 1, "shared", current_step_id="read")
    with pytest.raises(ToolFailure) as caught:
        revise(store, gid, 2, "shared", [{"id": "read", "title": "Read"}])
    assert caught.value.kind == "goal_idempotency_conflict"
    with pytest.raises(ToolFailure) as caught:  # the prepare key belongs to the goal too
        checkpoint(store, gid, 2, "k-prep")
    assert caught.value.kind == "goal_idempotency_conflict"


def test_checkpoint_keys_are_per_goal(store: GoalStore, goal: dict[str, Any]) -> None:
    other = store.prepare(prepare_args(key="k-other"))["goal"]["summary"]["goal_id"]
    checkpoint(store, goal["summary"]["goal_id"], 1, "same", current_step_id="read")
    reply = checkpoint(store, other, 1, "same", current_step_id="fix")
    assert reply["replayed"] is False and reply["goal"]["plan"]["current_step_id"] == "fix"


def test_unknown_goal(store: GoalStore) -> None:
    for call in (lambda: store.get("mmo_goal_nope"), lambda: store.card("mmo_goal_nope"),
                 lambda: checkpoint(store, "mmo_goal_nope", 1, "c1")):
        with pytest.raises(ToolFailure) as caught:
            call()
        assert caught.value.kind == "goal_not_found"
        assert caught.value.message == "goal not found: mmo_goal_nope"


def test_goals_and_keys_survive_a_restart(tmp_path: Path) -> None:
    first = GoalStore(tmp_path / "serve")
    gid = first.prepare(prepare_args())["goal"]["summary"]["goal_id"]
    checkpoint(first, gid, 1, "c1", current_step_id="read")
    again = GoalStore(tmp_path / "serve")
    assert again.get(gid)["goal"]["summary"]["revision"] == 2
    assert checkpoint(again, gid, 1, "c1", current_step_id="read")["replayed"] is True
    assert again.prepare(prepare_args())["goal"]["summary"]["goal_id"] == gid
    mode = (tmp_path / "serve" / "goals.json").stat().st_mode & 0o777
    assert mode == 0o600


def test_a_credential_value_never_reaches_the_record_and_replays_still_match(
        store: GoalStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEPLOY_API_TOKEN", "tok-5f3a9c1e7b")
    args = prepare_args(objective="deploy with tok-5f3a9c1e7b")
    first = store.prepare(args)["goal"]
    assert "tok-5f3a9c1e7b" not in json.dumps(first)
    assert "tok-5f3a9c1e7b" not in (tmp_path / "serve" / "goals.json").read_text()
    assert first["summary"]["objective"] == "deploy with [redacted:DEPLOY_API_TOKEN]"
    replay = store.prepare(args)
    assert replay["replayed"] is True and replay["goal"] == first
    assert store.get(first["summary"]["goal_id"])["goal"] == first


def test_concurrent_writers_lose_no_goal(tmp_path: Path) -> None:
    """Two stores on one state dir (two server threads or processes) serialize on the lock."""
    stores = [GoalStore(tmp_path / "serve"), GoalStore(tmp_path / "serve")]

    def prepare_many(number: int) -> None:
        for index in range(15):
            stores[number].prepare(prepare_args(key=f"k{number}-{index}"))

    threads = [threading.Thread(target=prepare_many, args=(n,)) for n in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    data = json.loads((tmp_path / "serve" / "goals.json").read_text())
    assert len(data["goals"]) == 30
    assert len(data["sessions"][SESSION]["prepare_keys"]) == 30


# ----------------------------------------------------------- card and brief --


def test_card_and_brief_follow_the_plan(store: GoalStore, goal: dict[str, Any]) -> None:
    gid = goal["summary"]["goal_id"]
    now = checkpoint(store, gid, 1, "c1", completed_step_ids=["read"],
                     current_step_id="fix")["goal"]
    card = store.card(gid)["goal_plan"]
    assert card == {"goal_id": gid, "title": "Fix calc", "revision": 2, "lifecycle": "active",
                    "terminal_at_unix_ms": None, "current_step_id": "fix",
                    "steps": now["plan"]["steps"], "completed_step_count": 1,
                    "total_step_count": 3}
    assert store.brief(SESSION) == {
        "goal_id": gid, "title": "Fix calc", "revision": 2, "lifecycle": "active",
        "plan": {"current_step_id": "fix", "steps": {
            "items": now["plan"]["steps"], "total_count": 3, "returned_count": 3}}}
    assert store.brief("mmo_sess_without_goals") is None
    newer = store.prepare(prepare_args(key="k2", title="Second"))["goal"]
    assert store.brief(SESSION)["goal_id"] == newer["summary"]["goal_id"]


def test_the_session_of_a_goal(store: GoalStore, goal: dict[str, Any]) -> None:
    assert store.session_of(goal["summary"]["goal_id"]) == SESSION
    assert store.session_of("mmo_goal_nope") is None


# ------------------------------------------------------ acceptance sequence --


def test_goal_plan_revision_sequence(store: GoalStore, tmp_path: Path) -> None:
    """The acceptance case ``goal_plan_revision`` step by step."""
    goal = store.prepare(prepare_args(key="prep"))["goal"]
    gid = goal["summary"]["goal_id"]
    assert goal["summary"]["revision"] == 1
    step2 = checkpoint(store, gid, 1, "cp1", completed_step_ids=["read"],
                       current_step_id="fix")
    assert step2["goal"]["summary"]["revision"] == 2
    revised_args = [{"id": "read", "title": "Read calc.py"}, {"id": "fix", "title": "Fix add()"},
                    {"id": "verify", "title": "Run the validation"}]
    step3 = revise(store, gid, 2, "rev1", revised_args, reason="one validation step")["goal"]
    assert step3["summary"]["revision"] == 3
    assert step3["plan_history"]["total_count"] == 1
    # inert replay
    replay = revise(store, gid, 2, "rev1", revised_args, reason="one validation step")
    assert (replay["replayed"], replay["state_changed"]) == (True, False)
    assert replay["goal"] == step3
    # conflict: the same key with another payload
    with pytest.raises(ToolFailure) as caught:
        revise(store, gid, 2, "rev1", revised_args, reason="another reason")
    assert caught.value.kind == "goal_idempotency_conflict"
    # stale
    with pytest.raises(ToolFailure) as caught:
        checkpoint(store, gid, 2, "cp-stale", current_step_id="verify")
    assert caught.value.kind == "goal_revision_changed"
    # invalid: dropping a completed step
    with pytest.raises(ToolFailure) as caught:
        revise(store, gid, 3, "rev-bad", [{"id": "fix", "title": "Fix"}])
    assert caught.value.kind == "invalid_goal_plan"
    assert store.get(gid)["goal"] == step3
    # card and handoff brief converge on the same plan
    card = store.card(gid)["goal_plan"]
    brief = store.brief(SESSION)
    assert card["steps"] == step3["plan"]["steps"] == brief["plan"]["steps"]["items"]
    assert card["revision"] == brief["revision"] == 3
    # complete
    step4 = checkpoint(store, gid, 3, "cp2", completed_step_ids=["fix", "verify"])["goal"]
    assert step4["summary"]["revision"] == 4
    final = update(store, gid, 4, "done", "completed", terminal_reason="validated")["goal"]
    assert final["summary"]["revision"] == 5 and final["summary"]["lifecycle"] == "completed"
    # terminal refusal
    with pytest.raises(ToolFailure) as caught:
        checkpoint(store, gid, 5, "cp3")
    assert caught.value.kind == "goal_terminal"
    # inert historical replay: the revision-2 checkpoint, answered with the goal as it is now
    old = checkpoint(store, gid, 1, "cp1", completed_step_ids=["read"], current_step_id="fix")
    assert (old["replayed"], old["state_changed"]) == (True, False)
    assert old["goal"] == final
    assert json.loads((tmp_path / "serve" / "goals.json").read_text())["goals"][gid][
        "record"]["summary"]["revision"] == 5
    assert copy.deepcopy(final) == store.get(gid)["goal"]

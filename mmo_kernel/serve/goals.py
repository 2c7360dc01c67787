"""Goal plans (spec 12 "Goal plans"): the lead's revisioned plan for a session, server-side.

Every mutation runs the spec's checks in order (idempotency key, terminal goal,
expected revision, content rules) inside one lock, and writes only when all pass: a
failed call changes nothing, not even the key bookkeeping. The methods take the
validated arguments as plain JSON (the router dumps the catalog's models) with the
session id already canonical (``mmo_sess_<id>``), so a ref and an id of the same
session replay alike.
"""

from __future__ import annotations

import copy
import secrets
from pathlib import Path
from typing import Any

from mmo_kernel.project_tools.envelope import ToolFailure
from mmo_kernel.serve.sessions_index import StateFile, now_ms
from mmo_kernel.state.redaction import redact_value

MAX_STEPS = 100
HISTORY_RETURNED = 20
BRIEF_STEPS = 50
"""Steps a handoff's goal BRIEF lists (``total_count`` says how many there are)."""
LIFECYCLES = ("active", "completed", "abandoned")
TERMINAL = ("completed", "abandoned")
PREPARE = "prepare_goal_workflow"
CHECKPOINT = "checkpoint_goal"
REVISE = "revise_goal_plan"
UPDATE = "update_goal"


def payload_of(arguments: dict[str, Any]) -> dict[str, Any]:
    """What an idempotency key is bound to: the arguments minus the key and ``_mmo``.

    Redacted as the record on disk is, so a replay compares like with like even when
    an argument happens to hold a known credential value.
    """
    payload = {k: copy.deepcopy(v) for k, v in arguments.items()
               if k not in ("idempotency_key", "_mmo")}
    return dict(redact_value(payload))


def _invalid(message: str) -> ToolFailure:
    return ToolFailure("invalid_goal_plan", message)


def _not_found(goal_id: str) -> ToolFailure:
    return ToolFailure("goal_not_found", f"goal not found: {goal_id}")


def _check_steps(steps: Any, *, allow_status: bool = False) -> list[dict[str, str]]:
    """Step ids unique, 1-100 steps, each with a non-empty id and title."""
    if not isinstance(steps, list) or not steps:
        raise _invalid("steps must list at least one step")
    if len(steps) > MAX_STEPS:
        raise _invalid(f"steps: at most {MAX_STEPS} steps, got {len(steps)}")
    seen: set[str] = set()
    clean: list[dict[str, str]] = []
    for number, step in enumerate(steps):
        if not isinstance(step, dict):
            raise _invalid(f"steps[{number}] must be an object with id and title")
        step_id, title = step.get("id"), step.get("title")
        if not isinstance(step_id, str) or not step_id.strip():
            raise _invalid(f"steps[{number}].id must be a non-empty string")
        if not isinstance(title, str) or not title.strip():
            raise _invalid(f"steps[{number}].title must be a non-empty string")
        if step_id in seen:
            raise _invalid(f"duplicate step id {step_id!r}")
        seen.add(step_id)
        clean.append({"id": step_id, "title": title})
    return clean


class GoalStore:
    """All goal plans of one server: ``goals.json`` under its state dir.

    Document: ``goals`` (goal id -> ``{"record", "session_id", "keys", "checkpoint"}``,
    the record holding the full plan history) and ``sessions`` (session id ->
    ``{"goals": [ids, oldest first], "prepare_keys": {key: {"payload", "goal_id"}}}``).
    """

    def __init__(self, state_dir: Path) -> None:
        self._file = StateFile(Path(state_dir) / "goals.json",
                               {"schema_version": 1, "goals": {}, "sessions": {}})

    # --------------------------------------------------------------- reading --

    def _entry(self, data: dict[str, Any], goal_id: str) -> dict[str, Any]:
        entry = data["goals"].get(goal_id) if isinstance(goal_id, str) else None
        if entry is None:
            raise _not_found(goal_id)
        return entry

    def session_of(self, goal_id: str) -> str | None:
        """The session a goal belongs to (the router checks it is the caller's), or None."""
        entry = self._file.read()["goals"].get(goal_id)
        return entry["session_id"] if entry else None

    def get(self, goal_id: str) -> dict[str, Any]:
        """``get_goal`` output."""
        return {"goal": _view(self._entry(self._file.read(), goal_id)["record"])}

    def card(self, goal_id: str) -> dict[str, Any]:
        """``present_goal_plan`` output: the card the goal-plan UI renders."""
        record = self._entry(self._file.read(), goal_id)["record"]
        summary, plan = record["summary"], record["plan"]
        steps = copy.deepcopy(plan["steps"])
        return {"goal_plan": {
            "goal_id": summary["goal_id"], "title": summary["title"],
            "revision": summary["revision"], "lifecycle": summary["lifecycle"],
            "terminal_at_unix_ms": summary["terminal_at_unix_ms"],
            "current_step_id": plan["current_step_id"], "steps": steps,
            "completed_step_count": sum(1 for s in steps if s["status"] == "completed"),
            "total_step_count": len(steps)}}

    def latest_for_session(self, session_id: str) -> dict[str, Any] | None:
        """The session's latest goal (record view), or None when it has none."""
        data = self._file.read()
        ids = data["sessions"].get(session_id, {}).get("goals", [])
        if not ids:
            return None
        entry = data["goals"][ids[-1]]
        view = _view(entry["record"])
        view["last_checkpoint_summary"] = entry.get("checkpoint")
        return view

    def brief(self, session_id: str) -> dict[str, Any] | None:
        """The handoff's ``goal_context.goal`` BRIEF of the session's latest goal, or None."""
        goal = self.latest_for_session(session_id)
        if goal is None:
            return None
        summary, steps = goal["summary"], goal["plan"]["steps"]
        items = [{"id": s["id"], "title": s["title"], "status": s["status"]}
                 for s in steps[:BRIEF_STEPS]]
        return {"goal_id": summary["goal_id"], "title": summary["title"],
                "revision": summary["revision"], "lifecycle": summary["lifecycle"],
                "plan": {"current_step_id": goal["plan"]["current_step_id"],
                         "steps": {"items": items, "total_count": len(steps),
                                   "returned_count": len(items)}}}

    # ------------------------------------------------------------- mutations --

    def prepare(self, args: dict[str, Any]) -> dict[str, Any]:
        """``prepare_goal_workflow``: a new goal at revision 1, every step ``pending``."""
        session_id, key = args["session_id"], args["idempotency_key"]
        payload = payload_of(args)
        with self._file.transaction() as data:
            book = data["sessions"].get(session_id, {"goals": [], "prepare_keys": {}})
            used = book["prepare_keys"].get(key)
            if used is not None:
                if used["payload"] != payload:
                    raise _conflict(key)
                return _reply(data["goals"][used["goal_id"]]["record"], replayed=True)
            steps = _check_steps(args.get("steps"))
            _check_text(args, "title")
            goal_id = "mmo_goal_" + secrets.token_hex(8)
            stamp = now_ms()
            record = {
                "summary": {
                    "goal_id": goal_id, "session_id": session_id, "title": args["title"],
                    "objective": args.get("objective"),
                    "completion_conditions": copy.deepcopy(args.get("completion_conditions")),
                    "revision": 1, "lifecycle": "active", "current_step_id": None,
                    "terminal_reason": None, "terminal_at_unix_ms": None,
                    "updated_at_unix_ms": stamp},
                "plan": {"steps": [{**s, "status": "pending"} for s in steps],
                         "current_step_id": None},
                "plan_history": [],
            }
            data["goals"][goal_id] = {
                "record": record, "session_id": session_id, "checkpoint": None,
                "keys": {key: {"tool": PREPARE, "payload": payload}}}
            book["goals"].append(goal_id)
            book["prepare_keys"][key] = {"payload": payload, "goal_id": goal_id}
            data["sessions"][session_id] = book
            return _reply(record, replayed=False)

    def checkpoint(self, args: dict[str, Any]) -> dict[str, Any]:
        """``checkpoint_goal``: steps completed (never back), the current step set or cleared."""
        return self._mutate(CHECKPOINT, args, _apply_checkpoint)

    def revise(self, args: dict[str, Any]) -> dict[str, Any]:
        """``revise_goal_plan``: the step list replaced, the prior plan pushed to history."""
        return self._mutate(REVISE, args, _apply_revision)

    def update(self, args: dict[str, Any]) -> dict[str, Any]:
        """``update_goal``: the lifecycle set; plan and history unchanged."""
        return self._mutate(UPDATE, args, _apply_update)

    def _mutate(self, tool: str, args: dict[str, Any], apply: Any) -> dict[str, Any]:
        goal_id, key = args["goal_id"], args["idempotency_key"]
        payload = payload_of(args)
        with self._file.transaction() as data:
            entry = self._entry(data, goal_id)
            record = entry["record"]
            used = entry["keys"].get(key)
            if used is not None:  # 1. the key: an inert replay or a conflict
                if used["tool"] != tool or used["payload"] != payload:
                    raise _conflict(key)
                return _reply(record, replayed=True)
            summary = record["summary"]
            if summary["lifecycle"] in TERMINAL:  # 2.
                raise ToolFailure("goal_terminal",
                                  f"goal {goal_id} is {summary['lifecycle']}; it takes no "
                                  "further changes")
            expected = args.get("expected_revision")
            if expected != summary["revision"]:  # 3.
                raise ToolFailure("goal_revision_changed",
                                  f"expected_revision {expected} but goal {goal_id} is at "
                                  f"revision {summary['revision']}; call get_goal",
                                  current_revision=summary["revision"])
            fresh = copy.deepcopy(record)
            apply(fresh, args, entry)  # 4. content rules; raises before anything is kept
            fresh["summary"]["revision"] = summary["revision"] + 1
            fresh["summary"]["current_step_id"] = fresh["plan"]["current_step_id"]
            fresh["summary"]["updated_at_unix_ms"] = now_ms()
            entry["record"] = fresh
            entry["keys"][key] = {"tool": tool, "payload": payload}
            if tool == CHECKPOINT:
                entry["checkpoint"] = args.get("summary")
            return _reply(fresh, replayed=False)


def _check_text(args: dict[str, Any], name: str) -> None:
    value = args.get(name)
    if not isinstance(value, str) or not value.strip():
        raise _invalid(f"{name} must be a non-empty string")


def _conflict(key: str) -> ToolFailure:
    return ToolFailure("goal_idempotency_conflict",
                       f"idempotency_key {key!r} was already used with other arguments; "
                       "use a new key for a new change")


def _apply_checkpoint(record: dict[str, Any], args: dict[str, Any], _entry: Any) -> None:
    plan = record["plan"]
    by_id = {step["id"]: step for step in plan["steps"]}
    completed = list(args.get("completed_step_ids") or [])
    current = args.get("current_step_id")
    for step_id in completed:
        if step_id not in by_id:
            raise _invalid(f"completed_step_ids: no step {step_id!r} in the plan")
    if current is not None:
        if current not in by_id:
            raise _invalid(f"current_step_id: no step {current!r} in the plan")
        if current in completed or by_id[current]["status"] == "completed":
            raise _invalid(f"current_step_id: step {current!r} is completed (steps never go "
                           "back)")
    for step_id in completed:
        by_id[step_id]["status"] = "completed"
    previous = plan["current_step_id"]
    if previous is not None and previous != current and previous in by_id \
            and by_id[previous]["status"] == "in_progress":
        by_id[previous]["status"] = "pending"  # no longer current, not completed
    if current is not None:
        by_id[current]["status"] = "in_progress"
    plan["current_step_id"] = current


def _apply_revision(record: dict[str, Any], args: dict[str, Any], _entry: Any) -> None:
    if not isinstance(args.get("reason"), str) or not args["reason"].strip():
        raise _invalid("reason must be a non-empty string")
    steps = _check_steps(args.get("steps"))
    old = record["plan"]
    old_by_id = {step["id"]: step for step in old["steps"]}
    kept_done = [s["id"] for s in old["steps"] if s["status"] == "completed"]
    new_ids = [s["id"] for s in steps]
    missing = [step_id for step_id in kept_done if step_id not in new_ids]
    if missing:
        raise _invalid(f"completed step {missing[0]!r} must stay in the plan")
    if [step_id for step_id in new_ids if step_id in kept_done] != kept_done:
        raise _invalid("completed steps must keep their order")
    new_steps = []
    for step in steps:
        before = old_by_id.get(step["id"])
        new_steps.append({"id": step["id"], "title": step["title"],
                          "status": before["status"] if before else "pending"})
    current = old["current_step_id"] if old["current_step_id"] in new_ids else None
    record["plan_history"].insert(0, {"revision": record["summary"]["revision"],
                                      "reason": args["reason"], "plan": copy.deepcopy(old)})
    record["plan"] = {"steps": new_steps, "current_step_id": current}


def _apply_update(record: dict[str, Any], args: dict[str, Any], _entry: Any) -> None:
    lifecycle = args.get("lifecycle")
    if lifecycle not in TERMINAL:
        raise _invalid(f"lifecycle must be one of {', '.join(TERMINAL)} (the goal is already "
                       "active)" if lifecycle == "active" else
                       f"lifecycle must be one of {', '.join(LIFECYCLES)}")
    if lifecycle == "completed":
        open_steps = [s["id"] for s in record["plan"]["steps"] if s["status"] != "completed"]
        if open_steps:
            raise ToolFailure("goal_steps_incomplete",
                              f"{len(open_steps)} step(s) not completed (first: "
                              f"{open_steps[0]!r}); checkpoint them or revise the plan",
                              incomplete_step_ids=open_steps)
    summary = record["summary"]
    summary["lifecycle"] = lifecycle
    summary["terminal_reason"] = args.get("terminal_reason")
    summary["terminal_at_unix_ms"] = now_ms()


def _view(record: dict[str, Any]) -> dict[str, Any]:
    """The record as returned: ``plan_history`` newest first, at most 20 revisions."""
    history = record["plan_history"]
    shown = copy.deepcopy(history[:HISTORY_RETURNED])
    view = {"summary": copy.deepcopy(record["summary"]), "plan": copy.deepcopy(record["plan"]),
            "plan_history": {"revisions": shown, "total_count": len(history),
                             "returned_count": len(shown)}}
    return dict(redact_value(view))  # as stored: the first reply equals every later read


def _reply(record: dict[str, Any], *, replayed: bool) -> dict[str, Any]:
    return {"goal": _view(record), "replayed": replayed, "state_changed": not replayed}

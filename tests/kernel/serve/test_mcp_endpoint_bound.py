"""The 1 MiB response bound's cuts (spec 12 "Limits") on shapes the endpoint tests do not
reach over HTTP: a single page too big alone, nested outputs, a failure envelope."""

from __future__ import annotations

from mmo_kernel.project_tools.envelope import compact_json, failure, mcp_result, success
from mmo_kernel.serve.response_bound import fit_envelope

LIMIT = 64 * 1024


def measure(envelope: dict) -> int:
    return len(compact_json(mcp_result(envelope)).encode("utf-8"))


def test_a_single_page_too_big_alone_suggests_a_smaller_page_from_the_same_cursor():
    asked = {"project": "~p1", "items": [{"path": "a.txt", "limit": 400, "cursor": 800},
                                         {"path": "b.txt"}],
             "_mmo": {"record": "~s1"}}
    page = {"text": "z" * LIMIT, "has_more": True, "next_cursor": 1200,
            "read_revision": "sha256:1"}
    envelope = success({"items": [{"path": "a.txt", "output": page},
                                  {"path": "b.txt", "output": {**page, "text": "y"}}]})
    cut = fit_envelope(envelope, "read_files", asked, measure, LIMIT)
    assert measure(cut) <= LIMIT
    output = cut["output"]
    assert output["items"] == [] and output["output_truncated"] is True
    call = output["suggested_call"]
    assert call["follow_up_kind"] == "mechanically_followable"
    assert call["arguments"] == {"project": "~p1", "items": [
        {"path": "a.txt", "limit": 100, "cursor": 800}, {"path": "b.txt"}]}  # no _mmo


def test_a_nested_list_is_cut_inside_and_small_fields_are_kept():
    items = [{"path": f"out{i}.bin", "status": "missing", "reason": "r" * 200}
             for i in range(1000)]
    envelope = success({"work_result": {"session_id": "mmo_sess_1", "status": "finished",
                                        "task_outputs": {"requested_count": 1000,
                                                         "items": items}}})
    cut = fit_envelope(envelope, "get_work_result_state",
                       {"project": "~p1", "session_id": "~s1"}, measure, LIMIT)
    assert measure(cut) <= LIMIT
    result = cut["output"]["work_result"]
    assert result["session_id"] == "mmo_sess_1"
    assert result["task_outputs"]["requested_count"] == 1000
    kept = result["task_outputs"]["items"]
    assert 0 < len(kept) < 1000 and kept == items[:len(kept)]
    assert cut["output"]["suggested_call"]["follow_up_kind"] == "needs_judgement"


def test_a_failure_keeps_its_kind_and_state_changed():
    stdout = "o" * (2 * LIMIT) + "SENTINEL\n"
    envelope = failure("nonzero_exit", "exit 7", True, exit_code=7, stdout=stdout)
    cut = fit_envelope(envelope, "run_script", {"project": "~p1"}, measure, LIMIT)
    assert measure(cut) <= LIMIT and cut["success"] is False and cut["error"] == "exit 7"
    output = cut["output"]
    assert (output["error_kind"], output["state_changed"], output["exit_code"]) == (
        "nonzero_exit", True, 7)
    assert output["output_truncated"] is True
    head, omitted, tail = output["stdout"].split("\n", 2)
    assert head == "o" * len(head) and tail.endswith("oSENTINEL\n")  # the last line survives
    assert omitted == f"[... {len(stdout) - len(head) - len(tail)} bytes omitted ...]"


def test_within_the_bound_nothing_changes():
    envelope = success({"items": [1, 2, 3]})
    assert fit_envelope(envelope, "observe_jobs", {}, measure, LIMIT) is envelope

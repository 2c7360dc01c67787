"""Reading Codex's tool outputs, on the exact strings Codex 0.169.0 sent."""

from __future__ import annotations

from mmo_scripted.conversation import Conversation, ResponsesRequest
from mmo_scripted.tool_outputs import exec_outcome, function_outcome, mcp_outcome, patch_outcome
from plugins.scripted.transcript import recorded


def recorded_outputs(name: str) -> dict[str, object]:
    conv = Conversation(ResponsesRequest.model_validate(recorded()[name]))
    return {c.call_id: c.output for c in conv.calls}


def test_exec_success_keeps_the_output_and_a_non_zero_exit_fails():
    out = recorded_outputs("tool_round")
    ok = exec_outcome(out["c1"])
    assert (ok.error, ok.exit_code, ok.text) == (None, 0, "hi-there\nerr\n")
    failed = exec_outcome(out["c1b"])
    assert failed.exit_code == 3 and failed.error == "command exited with code 3: "


def test_exec_still_running_reports_its_session():
    out = recorded_outputs("running_round")
    running = exec_outcome(out["c1"])
    assert running.session_id == 5438 and running.error is None


def test_exec_refused_by_codex_is_a_failure():
    refused = exec_outcome("exec_command failed: command rejected by user")
    assert refused.error == "exec_command failed: command rejected by user"


def test_apply_patch_success_and_verification_failure():
    out = recorded_outputs("tool_round")
    assert patch_outcome(out["c2"]).error is None
    assert patch_outcome(out["c2"]).text.startswith("Success. Updated the following files:")
    failed = patch_outcome(out["c2b"])
    assert failed.error.startswith("apply_patch verification failed: Failed to read file")


def test_mcp_structured_result_is_json_and_tool_errors_fail():
    out = recorded_outputs("tool_round")
    ok = mcp_outcome(out["c3"])
    assert ok.error is None and ok.value() == {"job_id": "job-1", "echo": "ping"}
    text_only = mcp_outcome(out["c4"])  # an isError result: Codex does not forward the flag
    assert text_only.error is None and text_only.text == "boom"
    goal = recorded_outputs("goal_round")
    rpc_error = mcp_outcome(goal["c3"])
    assert rpc_error.error.startswith("tool call error: tool call failed for `echo/rpcerr`")
    assert "Stack backtrace" not in rpc_error.error
    unsupported = mcp_outcome(goal["c4"])
    assert unsupported.error == "unsupported call: mcp__echonosuch"


def test_mesh_exception_text_is_a_failure():
    raised = mcp_outcome([{"type": "input_text", "text": "Wall time: 0.01 seconds\nOutput:"},
                          {"type": "input_text", "text": "FileNotFoundError: no job j-9"}])
    assert raised.error == "FileNotFoundError: no job j-9"


def test_update_goal_answers_json_and_plain_text_is_a_failure():
    goal = recorded_outputs("goal_round")
    done = function_outcome(goal["c5"])
    assert done.error is None and done.value()["goal"]["status"] == "complete"
    assert function_outcome("update_goal failed: no goal").error == "update_goal failed: no goal"

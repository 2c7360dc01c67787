"""The project-tool catalog and envelopes are spec 12's contract: names, scopes, listings,
argument fields and defaults, error kinds. The tables below are copied from the spec."""

from __future__ import annotations

import json

import jsonschema
import pytest

from mmo_kernel.project_tools import catalog, envelope
from mmo_kernel.project_tools.catalog import TOOLS, ToolFailure, listed_tools, validate_arguments
from mmo_kernel.project_tools.envelope import (
    ERROR_KINDS,
    failure,
    from_exception,
    mcp_result,
    success,
    suggested,
)

SPEC_SCOPES = {
    "read": ["list_projects", "work_on_project", "read_files", "read_session_handoff",
             "review_changes", "observe_jobs", "wait_for_job_readiness", "get_goal",
             "present_goal_plan", "get_work_result_state", "team_agents", "team_status"],
    "write": ["edit_project_files", "transfer_project_artifact", "finish_coding_task"],
    "execute": ["run_script", "run_process", "write_job_input"],
    "goals": ["prepare_goal_workflow", "checkpoint_goal", "revise_goal_plan", "update_goal"],
    "delegate": ["team_spawn", "team_wait", "team_result", "team_accept", "team_reject",
                 "team_integrate", "team_cancel"],
}
SPEC_DIRECT = ["list_projects", "work_on_project", "read_files", "edit_project_files",
               "run_script", "run_process", "observe_jobs", "wait_for_job_readiness",
               "review_changes", "finish_coding_task", "call_project_tool"]
SPEC_ERROR_KINDS = """invalid_arguments, unknown_tool, insufficient_scope, invalid_project_selector,
project_not_found, session_not_found, session_terminal, runner_unavailable,
runner_disconnected, path_outside_project, not_a_regular_file, file_not_found,
not_a_text_file, stale_file_revision, file_exists, edit_text_not_found,
edit_text_not_unique, destination_exists, policy_denied, nonzero_exit,
timeout, job_limit_reached, job_not_found, job_not_running,
job_input_conflict, job_stdin_closed, not_a_git_project, goal_not_found,
goal_idempotency_conflict, goal_revision_changed, invalid_goal_plan,
goal_terminal, goal_steps_incomplete, team_unavailable, admission_refused,
permission_denied"""
# Each tool's argument names as spec 12 writes them ("?" = optional there).
SPEC_FIELDS = {
    "list_projects": set(),
    "work_on_project": {"project", "client_id", "path", "session_id", "instruction"},
    "read_session_handoff": {"project", "session_id", "include_workspace"},
    "read_files": {"project", "session_id", "items"},
    "edit_project_files": {"project", "session_id", "changes"},
    "transfer_project_artifact": {"source_project", "source_path", "destination_project",
                                  "destination_path", "overwrite"},
    "run_script": {"project", "session_id", "language", "script", "timeout_secs", "wait_secs",
                   "purpose"},
    "run_process": {"project", "session_id", "executable", "args", "cwd", "stdin",
                    "interactive", "timeout_secs", "wait_secs"},
    "observe_jobs": {"items", "tail_lines", "wait_secs"},
    "wait_for_job_readiness": {"job_ids", "mode", "wait_secs"},
    "write_job_input": {"project", "job_id", "input_id", "data", "close"},
    "review_changes": {"project", "session_id", "scope", "paths"},
    "finish_coding_task": {"project", "session_id", "summary", "summary_only", "outputs"},
    "get_work_result_state": {"project", "session_id"},
    "prepare_goal_workflow": {"session_id", "title", "objective", "completion_conditions",
                              "steps", "idempotency_key"},
    "checkpoint_goal": {"goal_id", "expected_revision", "completed_step_ids",
                        "current_step_id", "summary", "idempotency_key"},
    "revise_goal_plan": {"goal_id", "expected_revision", "reason", "steps", "idempotency_key"},
    "update_goal": {"goal_id", "expected_revision", "lifecycle", "terminal_reason",
                    "idempotency_key"},
    "get_goal": {"goal_id"},
    "present_goal_plan": {"goal_id"},
    "team_agents": {"session_id"},
    "team_spawn": {"session_id", "agents", "idempotency_key"},
    "team_status": {"session_id", "job_ids"},
    "team_wait": {"session_id", "job_ids", "timeout_seconds", "after_revision"},
    "team_result": {"session_id", "job_id", "cursor", "max_chars"},
    "team_accept": {"session_id", "job_id", "reason"},
    "team_reject": {"session_id", "job_id", "reason"},
    "team_integrate": {"session_id", "job_id", "reason"},
    "team_cancel": {"session_id", "job_id", "reason"},
    "call_project_tool": {"tool", "arguments"},
}
INTERNAL = {"resolve_project_path", "session_status", "artifact_read", "artifact_write"}


def test_every_spec_tool_has_its_scope_and_nothing_else_is_public():
    expected = {tool: scope for scope, tools in SPEC_SCOPES.items() for tool in tools}
    public = {name: spec.scope for name, spec in TOOLS.items()
              if spec.listing != "internal" and name != "call_project_tool"}
    assert public == expected
    assert TOOLS["call_project_tool"].scope is None
    assert {n for n, s in TOOLS.items() if s.listing == "internal"} == INTERNAL


def test_argument_fields_are_the_specs_names():
    for name, fields in SPEC_FIELDS.items():
        assert set(TOOLS[name].args.model_fields) == fields, name
        expected_class = "".join(part.title() for part in name.split("_")) + "Args"
        assert TOOLS[name].args.__name__ == expected_class


def test_defaults_are_the_specs():
    script = validate_arguments("run_script", {"project": "p", "session_id": "s",
                                               "language": "python", "script": "print(1)"})
    assert (script.timeout_secs, script.wait_secs, script.purpose) == (60, 20, None)
    read = validate_arguments("read_files", {"project": "p", "items": [{"path": "a.txt"}]})
    assert (read.items[0].limit, read.items[0].cursor, read.session_id) == (400, 0, None)
    observe = validate_arguments("observe_jobs", {"items": [{"job_id": "mmo_pjob_1"}]})
    assert (observe.tail_lines, observe.wait_secs) == (80, 0)
    transfer = validate_arguments("transfer_project_artifact", {
        "source_project": "a", "source_path": "x", "destination_project": "b",
        "destination_path": "y"})
    assert transfer.overwrite is False
    process = validate_arguments("run_process", {"project": "p", "session_id": "s",
                                                 "executable": "/bin/true", "args": [],
                                                 "timeout_secs": 5})
    assert process.interactive is False
    finish = validate_arguments("finish_coding_task", {"project": "p", "session_id": "s"})
    assert finish.outputs is None and finish.summary_only is False


def test_direct_listing_is_the_specs_and_app_tools_need_a_ui_client():
    assert [t["name"] for t in listed_tools(False)] == SPEC_DIRECT
    assert [t["name"] for t in listed_tools(True)] == [*SPEC_DIRECT, "get_work_result_state"]


def test_listed_tools_have_schemas_explicit_annotations_and_ui_meta():
    for tool in listed_tools(True):
        jsonschema.Draft202012Validator.check_schema(tool["inputSchema"])
        assert "$ref" not in json.dumps(tool["inputSchema"])
        assert "_mmo" in tool["inputSchema"]["properties"]
        assert set(tool["annotations"]) == {"readOnlyHint", "destructiveHint",
                                            "idempotentHint", "openWorldHint"}
        assert all(isinstance(v, bool) for v in tool["annotations"].values())
    work = {t["name"]: t for t in listed_tools(True)}["get_work_result_state"]
    assert work["_meta"]["ui"] == {"resourceUri": "ui://mmo/work-result", "visibility": ["app"]}
    assert catalog.mcp_tool(TOOLS["present_goal_plan"])["_meta"]["ui"]["resourceUri"] == \
        "ui://mmo/goal-plan"
    assert {t["name"]: t for t in listed_tools(False)}["read_files"]["annotations"][
        "readOnlyHint"] is True


def test_a_schema_accepts_what_validation_accepts():
    schema = catalog.input_schema(TOOLS["edit_project_files"])
    arguments = {"project": "~p1", "changes": [
        {"kind": "create", "path": "a.txt", "content": "x"},
        {"kind": "edit", "path": "b.txt", "expected_read_revision": "sha256:00",
         "edits": [{"kind": "replace_exact", "old_text": "a", "new_text": "b"}]}],
        "_mmo": {"record": "~s1"}}
    jsonschema.validate(arguments, schema)
    validate_arguments("edit_project_files", arguments)


@pytest.mark.parametrize("arguments,fragment", [
    ({"project": "p", "items": [{"path": "a", "limit": 2001}]}, "items.0.limit"),
    ({"project": "p", "items": [{"path": "a"}] * 21}, "items:"),
    ({"project": "p", "items": [{"path": "a"}], "colour": "red"}, "colour: unknown field"),
    ({"items": [{"path": "a"}]}, "project: field required"),
])
def test_bad_arguments_name_the_field_in_one_line(arguments, fragment):
    with pytest.raises(ToolFailure) as caught:
        validate_arguments("read_files", arguments)
    assert caught.value.kind == "invalid_arguments"
    assert fragment in caught.value.message and "\n" not in caught.value.message
    assert caught.value.message.startswith("invalid arguments for read_files: ")


def test_a_bad_value_is_never_echoed():
    secret = "/home/alice/secret-project/api-key-abc123"
    with pytest.raises(ToolFailure) as caught:
        validate_arguments("run_script", {"project": "p", "session_id": "s",
                                          "language": secret, "script": "x"})
    assert secret not in caught.value.message and "language" in caught.value.message


def test_spec_bounds_are_refused():
    base = {"project": "p", "session_id": "s", "language": "python", "script": "x"}
    with pytest.raises(ToolFailure, match="wait_secs"):
        validate_arguments("run_script", {**base, "wait_secs": 31})
    with pytest.raises(ToolFailure, match="tail_lines"):
        validate_arguments("observe_jobs", {"items": [{"job_id": "j"}], "tail_lines": 501})
    with pytest.raises(ToolFailure, match="timeout_seconds"):
        validate_arguments("team_wait", {"session_id": "s", "job_ids": ["j"],
                                         "timeout_seconds": 61})
    with pytest.raises(ToolFailure, match="data exceeds 1 MiB"):
        validate_arguments("write_job_input", {"project": "p", "job_id": "j", "input_id": "i",
                                               "data": "x" * (1024 * 1024 + 1)})
    change = {"kind": "create", "path": "a", "content": "x"}
    with pytest.raises(ToolFailure, match="changes"):
        validate_arguments("edit_project_files", {"project": "p", "changes": [change] * 51})
    with pytest.raises(ToolFailure, match="content exceeds 4 MiB"):
        validate_arguments("edit_project_files", {"project": "p", "changes": [
            {**change, "content": "x" * (4 * 1024 * 1024 + 1)}]})


def test_mmo_is_stripped_and_checked():
    args = validate_arguments("list_projects", {"_mmo": {"record": "~s1"}})
    assert args.model_dump() == {}
    rest, mmo = catalog.split_mmo({"tool": "get_goal", "_mmo": {"record": "mmo_sess_x"}})
    assert rest == {"tool": "get_goal"} and mmo is not None and mmo.record == "mmo_sess_x"
    with pytest.raises(ToolFailure, match="_mmo"):
        validate_arguments("list_projects", {"_mmo": {"session": "x"}})


def test_unknown_and_internal_tools_are_not_client_tools():
    with pytest.raises(ToolFailure) as caught:
        validate_arguments("no_such_tool", {})
    assert caught.value.kind == "unknown_tool"
    assert catalog.client_tool("artifact_write", ui_capable=True) is None
    assert catalog.client_tool("get_work_result_state", ui_capable=False) is None
    assert catalog.client_tool("get_work_result_state", ui_capable=True) is not None
    assert catalog.direct_tool("get_goal", ui_capable=True) is None
    assert catalog.client_tool("get_goal", ui_capable=False) is not None


def test_ui_capability_is_the_mcp_apps_mime_type():
    ui = {"extensions": {"io.modelcontextprotocol/ui": {
        "mimeTypes": ["text/html;profile=mcp-app"]}}}
    assert catalog.ui_capable(ui)
    assert not catalog.ui_capable({"extensions": {"io.modelcontextprotocol/ui": {
        "mimeTypes": ["text/html"]}}})
    assert not catalog.ui_capable({}) and not catalog.ui_capable(None)


def test_error_kinds_are_exactly_the_specs():
    assert list(ERROR_KINDS) == [k.strip() for k in SPEC_ERROR_KINDS.split(",")]
    with pytest.raises(ValueError):
        ToolFailure("something_else", "x")


def test_envelopes_and_the_mcp_result():
    assert success({"a": 1}) == {"success": True, "output": {"a": 1}}
    call = suggested("list_projects", {}, True, "find the project id")
    failed = failure("invalid_project_selector", "missing client_id\nrequired", suggested_call=call)
    assert failed == {"success": False, "error": "missing client_id required",
                      "output": {"error_kind": "invalid_project_selector", "state_changed": False,
                                 "suggested_call": {"tool": "list_projects", "arguments": {},
                                                    "follow_up_kind": "mechanically_followable",
                                                    "reason": "find the project id"}}}
    lost = from_exception(ToolFailure("runner_disconnected", "link lost", "unknown"))
    assert lost["output"]["state_changed"] == "unknown"
    result = mcp_result(failed)
    assert result["isError"] is True and result["structuredContent"] == failed
    assert json.loads(result["content"][0]["text"]) == failed
    assert result["content"][0]["type"] == "text" and " " not in result["content"][0]["text"][:30]
    assert mcp_result(success({}))["isError"] is False
    assert suggested("x", {}, False, "r")["follow_up_kind"] == "needs_judgement"
    assert envelope.is_envelope(failed) and envelope.is_envelope(success({}))
    assert not envelope.is_envelope({"success": False, "output": {"error_kind": "nope"},
                                     "error": "x"})

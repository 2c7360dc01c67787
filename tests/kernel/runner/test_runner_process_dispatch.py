"""The runner's dispatcher: one forwarded call frame in, one envelope out (spec 12)."""

from __future__ import annotations

import pytest
from support.runner_core import LocalRunner, register_project, write_runner_config

import mmo_kernel.runner.sessions as runner_sessions


@pytest.fixture(autouse=True)
def _env(mmo_env, mmo_process_guard):
    yield mmo_env


@pytest.fixture
def runner(tmp_path) -> LocalRunner:
    config = write_runner_config(tmp_path / "runner", allowed_roots=[tmp_path / "projects"])
    register_project(config, "outer", tmp_path / "projects" / "outer")
    register_project(config, "inner", tmp_path / "projects" / "outer" / "pkg")
    return LocalRunner(config)


def test_unknown_tools_projects_and_bad_arguments_fail_cleanly(runner):
    runner.fails("no_such_tool", {}, "unknown_tool")
    out = runner.fails("work_on_project", {"project": "ghost", "instruction": "x"},
                       "project_not_found")
    assert out["output"]["state_changed"] is False
    runner.fails("transfer_project_artifact", {"source_project": "outer",
                                               "destination_project": "ghost",
                                               "source_path": "a", "destination_path": "b"},
                 "project_not_found")
    envelope = runner.call("session_status", [], session="x")  # type: ignore[arg-type]
    assert envelope["output"]["error_kind"] == "invalid_arguments"


def test_an_executor_crash_is_one_line_without_a_traceback(runner, monkeypatch, caplog):
    def broken(arguments, ctx):  # the fault: an executor bug
        raise RuntimeError("boom\n  File \"/secret/x.py\", line 1")

    monkeypatch.setitem(runner_sessions.EXECUTORS, "session_status", broken)
    envelope = runner.fails("session_status", {"session_id": "x"}, "runner_unavailable")
    assert envelope["output"]["state_changed"] == "unknown"
    assert envelope["error"].startswith("session_status failed on the runner: RuntimeError: boom")
    assert "Traceback" in caplog.text  # the traceback goes to the runner log only


def test_resolve_project_path_picks_the_innermost_project_and_never_echoes(runner, tmp_path):
    outer = tmp_path / "projects" / "outer"
    (outer / "pkg" / "src").mkdir(parents=True)
    assert runner.ok("resolve_project_path", {"path": str(outer / "README.md")}) == {
        "project": "outer"}
    assert runner.ok("resolve_project_path", {"path": str(outer / "pkg" / "src")}) == {
        "project": "inner"}
    assert runner.ok("resolve_project_path", {"path": str(outer / "pkg/../x")}) == {
        "project": "outer"}
    for path in (str(tmp_path / "elsewhere"), "relative/path", str(outer) + "-sibling"):
        out = runner.fails("resolve_project_path", {"path": path}, "project_not_found")
        assert path not in str(out)

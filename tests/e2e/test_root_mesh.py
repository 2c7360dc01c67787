"""A goal-mode root on real Codex completes its goal and delegates through `mmo_mesh`."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import jsonschema
import pytest

from mmo_kernel.api import run_root_exec
from mmo_kernel.jobs.records import read_job_record

from .conftest import OFFLINE, PROJECT_ROOT, completed_items, events, mesh_step, script, sent

pytestmark = pytest.mark.real_codex
GOAL_PROFILE = "adaptive-engineering"  # root orchestrator: goal mode
CONTRACTS = PROJECT_ROOT / "profiles" / GOAL_PROFILE / "contracts"


def run(workspace: Path, prompt: str, wall: float = 90) -> dict:
    return run_root_exec(GOAL_PROFILE, workspace, prompt, wall, bindings=OFFLINE)


def test_goal_root_completes_its_goal_through_update_goal(workspace):
    out = run(workspace, script("shell echo from-real-codex", "goal_complete",
                                "say finished: {{step1}}"))
    assert out["status"] == "completed" and out["exit_code"] == 0
    assert out["result"] == "finished: from-real-codex"
    session = out["session"]
    assert session["root_goal_status"] == "complete"
    assert session["codex_binary"].endswith("/bin/codex")  # the native binary, not the stand-in
    goal_set = sent(out["events_path"], "thread/goal/set")[0]["params"]
    assert goal_set["status"] == "active"
    assert goal_set["tokenBudget"] == session["root_goal_token_budget"]
    commands = completed_items(out["events_path"], "commandExecution")
    assert any("echo from-real-codex" in c.get("command", "") for c in commands)
    received = [r["message"] for r in events(out["events_path"]) if r["direction"] == "received"]
    goals = [m["params"]["goal"]["status"] for m in received
             if m.get("method") == "thread/goal/updated"]
    assert goals[-1] == "complete"


def test_root_spawns_a_strict_worker_waits_reads_and_accepts(workspace):
    worker = script("say reviewed the change", intro="Review the change.")
    prompt = script(
        mesh_step("spawn", "agent_spawn", {"agent": "adversarial_reviewer",
                                           "task_kind": "review", "task": worker}),
        'wait: mcp mmo_mesh.agents_wait {"job_ids": ["{{spawn.job_id}}"], "timeout_seconds": 60}',
        'result: mcp mmo_mesh.agent_result {"job_id": "{{spawn.job_id}}"}',
        'mcp mmo_mesh.agent_result_accept {"job_id": "{{spawn.job_id}}", "reason": "sound"}',
        "goal_complete",
        'say {"job": "{{spawn.job_id}}", "waited": {{wait.results}}, '
        '"content": {{result.content}}}',
        intro="Get the change reviewed.")
    out = run(workspace, prompt)
    assert out["status"] == "completed", out["result"]
    said = json.loads(out["result"])
    job = read_job_record(said["job"])
    assert job["status"] == "completed" and job["result_state"] == "accepted"
    assert job["contract_valid"] is True and job["contract_transport"] == "native_schema_projection"
    contract = json.loads((CONTRACTS / "evidence.json").read_text())
    # the worker's only turn carried the contract as Codex's own outputSchema
    starts = sent(job["events_path"], "turn/start")
    assert [s["params"].get("outputSchema") for s in starts] == [job["output_contract"]]
    assert job["output_contract"]["required"] == contract["required"]
    # agent_result hands the root the whole contract value, every field intact
    jsonschema.validate(said["content"], contract)
    assert said["content"] == json.loads(Path(job["result_path"]).read_text())
    assert said["waited"][said["job"]]["status"] == "completed"


def test_writer_apply_patch_is_reviewed_accepted_and_integrated(workspace):
    (workspace / "src").mkdir()
    (workspace / "src" / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    subprocess.run(["git", "add", "-A"], cwd=workspace, check=True)
    subprocess.run(["git", "commit", "-qm", "calc"], cwd=workspace, check=True)
    worker = script("patch <<P", "*** Begin Patch", "*** Update File: src/calc.py",
                    "@@", " def add(a, b):", "-    return a - b", "+    return a + b",
                    "*** End Patch", "P", "goal_complete", "say fixed add", intro="Fix add.")
    prompt = script(
        mesh_step("spawn", "agent_spawn", {
            "agent": "implementation_specialist", "task_kind": "implement",
            "mode": "workspace-write", "write_scopes": ["src/"], "task": worker}),
        'mcp mmo_mesh.agents_wait {"job_ids": ["{{spawn.job_id}}"], "timeout_seconds": 60}',
        'result: mcp mmo_mesh.agent_result {"job_id": "{{spawn.job_id}}"}',
        'mcp mmo_mesh.agent_result_accept {"job_id": "{{spawn.job_id}}", "reason": "right fix"}',
        'mcp mmo_mesh.agent_patch_integrate {"job_id": "{{spawn.job_id}}", "reason": "accepted"}',
        "goal_complete",
        'say {"job": "{{spawn.job_id}}", "content": {{result.content}}}',
        intro="Fix the calculator.")
    out = run(workspace, prompt)
    assert out["status"] == "completed", out["result"]
    said = json.loads(out["result"])
    job = read_job_record(said["job"])
    assert job["status"] == "completed" and job["result_state"] == "integrated"
    assert job["patch"]["changed_paths"] == ["src/calc.py"]
    # Codex's own apply_patch tool made the edit inside the worktree
    changes = completed_items(job["events_path"], "fileChange")
    assert changes and changes[0]["status"] == "completed"
    assert job["workspace"]["worktree"] in json.dumps(changes[0])
    assert (workspace / "src" / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    stored = json.loads(Path(job["result_path"]).read_text())
    jsonschema.validate(stored, json.loads((CONTRACTS / "engineering.json").read_text()))
    # agent_result keeps contract fields whose names look like supervisor keys
    # (tests_run[].command) — the mesh used to strip them
    assert said["content"] == stored and stored["tests_run"][0]["command"]

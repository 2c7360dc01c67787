"""A root delegates through ``mmo_mesh`` and its worker runs the script it was given."""

from __future__ import annotations

import json

from plugins.scripted.transcript import (
    Transcript,
    exec_output,
    mcp_json,
    patch_ok,
    recorded_body,
    script,
)

MESH_TOOLS = ["agent_spawn", "agents_wait", "agent_result", "agent_result_accept",
              "agent_patch_integrate"]


def mesh_tools() -> list[dict]:
    tools = [t for t in recorded_body("tool_round")["tools"] if t.get("name") != "mcp__echo"]
    tools.append({"type": "namespace", "name": "mcp__mmo_mesh", "description": "mesh", "tools": [
        {"type": "function", "name": n, "strict": False, "parameters": {"type": "object"}}
        for n in MESH_TOOLS]})
    return tools


WORKER_SCRIPT = (  # {{!step1}}: the worker's own placeholder, escaped from the root
    "```mmo-script\nwrite src/feature.py <<EOF\nFEATURE = True\nEOF\n"
    "say feature written: {{!step1}}\n```"
)


def root_prompt() -> str:
    spawn = json.dumps({"agent": "coder", "task_kind": "implement", "mode": "write",
                        "write_scopes": ["src/"], "task": "Add the feature.\n" + WORKER_SCRIPT})
    return script(
        f"spawn: mcp mmo_mesh.agent_spawn {spawn}",
        'mcp mmo_mesh.agents_wait {"job_ids": ["{{spawn.job_id}}"], "timeout_seconds": 600}',
        'result: mcp mmo_mesh.agent_result {"job_id": "{{spawn.job_id}}"}',
        'mcp mmo_mesh.agent_result_accept {"job_id": "{{spawn.job_id}}", "reason": "looks right"}',
        'mcp mmo_mesh.agent_patch_integrate {"job_id": "{{spawn.job_id}}", "reason": "accepted"}',
        "goal_complete",
        "say integrated {{spawn.job_id}}: {{result.final_message}}",
    )


def test_root_spawns_waits_reads_accepts_and_integrates():
    root = Transcript(root_prompt(), tools=mesh_tools())
    spawn = root.call()
    assert (spawn.namespace, spawn.name) == ("mcp__mmo_mesh", "agent_spawn")
    task = json.loads(spawn.arguments)["task"]
    assert "say feature written: {{step1}}" in task
    root.answer(mcp_json({"job_id": "job-7", "status": "queued"}))
    wait = root.call()
    assert json.loads(wait.arguments) == {"job_ids": ["job-7"], "timeout_seconds": 600}
    root.answer(mcp_json({"jobs": [{"job_id": "job-7", "status": "completed"}]}))
    assert json.loads(root.call().arguments) == {"job_id": "job-7"}
    root.answer(mcp_json({"job_id": "job-7", "final_message": "feature written: ok"}))
    accept = root.call()
    assert (accept.name, json.loads(accept.arguments)["job_id"]) == ("agent_result_accept", "job-7")
    root.answer(mcp_json({"accepted": True}))
    assert root.call().name == "agent_patch_integrate"
    root.answer(mcp_json({"integrated": True}))
    assert root.call().name == "update_goal"
    root.answer('{"goal": {"status": "complete"}}')
    assert root.message() == "integrated job-7: feature written: ok"

    worker = Transcript(task)
    write = worker.custom()
    assert write.input == (
        "*** Begin Patch\n*** Add File: src/feature.py\n+FEATURE = True\n*** End Patch\n"
    )
    worker.answer(patch_ok(["src/feature.py"]))
    assert worker.message() == (
        "feature written: Success. Updated the following files:\nA src/feature.py")


def test_a_spawn_refusal_stops_the_root_before_it_waits():
    root = Transcript(root_prompt(), tools=mesh_tools())
    root.call()
    refusal = "AdmissionError: agent 'coder' may not write src/"
    root.answer([{"type": "input_text", "text": "Wall time: 0.01 seconds\nOutput:"},
                 {"type": "input_text", "text": refusal}])
    text = root.message()
    assert text.startswith("mmo-script stopped at step 1 (`spawn: mcp mmo_mesh.agent_spawn")
    assert text.endswith("AdmissionError: agent 'coder' may not write src/")


def test_a_shell_step_can_feed_a_spawn_task():
    spawn = 'mcp mmo_mesh.agent_spawn {"agent": "coder", "task": "Review {{step1}}"}'
    root = Transcript(script("shell git rev-parse --short HEAD", spawn), tools=mesh_tools())
    root.call()
    root.answer(exec_output("abc1234\n"))
    assert json.loads(root.call().arguments)["task"] == "Review abc1234"

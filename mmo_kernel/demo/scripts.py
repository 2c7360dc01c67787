"""The scripted prompts `mmo demo` gives the offline model (docs/scripted-model.md).

With real Codex the root's own script drives the team through `mmo_mesh`:
it runs the failing tests, spawns a writer and a reviewer in parallel, waits,
reads, accepts and integrates the writer's patch, re-runs the tests and
completes its goal. Each worker's script travels inside its `task`.
"""

from __future__ import annotations

import json

from mmo_kernel.demo.project import MODULE, fix_patch, test_command

WRITER = "implementation_specialist"
REVIEWER = "adversarial_reviewer"


def block(intro: str, *steps: str) -> str:
    return "\n".join([intro, "```mmo-script", *steps, "```"])


def writer_task() -> str:
    return block(
        f"count_up in {MODULE} stops one short of n; fix it and prove it with the tests.",
        "patch <<P", fix_patch(), "P",
        # no {{placeholders}} here: the root's script would resolve them first
        f"shell {test_command()}",
        "goal_complete",
        "say Fixed the off-by-one in count_up; the tests pass in the worktree.",
    )


def reviewer_task() -> str:
    return block(
        f"Review {MODULE} for range bounds that can be off by one.",
        f"shell grep -n range {MODULE}",
        "say count_up's range(1, n) excludes n; the fix is range(1, n + 1).",
    )


def root_prompt() -> str:
    """The orchestrator's goal: the whole demo flow as one script."""
    spawn = {"agents": [
        {"agent": WRITER, "task_kind": "implement", "mode": "workspace-write",
         "write_scopes": ["calc/"], "task": writer_task()},
        {"agent": REVIEWER, "task_kind": "review", "task": reviewer_task()},
    ]}
    writer, reviewer = "{{team.accepted.0.job_id}}", "{{team.accepted.1.job_id}}"
    both = json.dumps({"job_ids": [writer, reviewer], "timeout_seconds": 90})
    return block(
        "The test suite fails. Plan: confirm the failure, have the specialist fix it while "
        "the reviewer checks the module, then integrate the reviewed patch.",
        f"before: try shell {test_command()} 2>&1 | tail -1",
        f"team: mcp mmo_mesh.agents_spawn {json.dumps(spawn)}",
        f"mcp mmo_mesh.agents_wait {both}",
        f'fix: mcp mmo_mesh.agent_result {{"job_id": "{writer}"}}',
        f'review: mcp mmo_mesh.agent_result {{"job_id": "{reviewer}"}}',
        f'mcp mmo_mesh.agent_result_accept {{"job_id": "{reviewer}", '
        '"reason": "the review confirms the bug"}',
        f'mcp mmo_mesh.agent_result_accept {{"job_id": "{writer}", '
        '"reason": "minimal fix, tests pass in the worktree"}',
        f'mcp mmo_mesh.agent_patch_integrate {{"job_id": "{writer}", '
        '"reason": "reviewed and accepted"}',
        f"after: shell {test_command()} 2>&1 | tail -1",
        "goal_complete",
        "say Integrated the fix. Before: {{before}} After: {{after}}",
    )


def standin_writer_task() -> str:
    """The stand-in has no script language: its FAKE_WRITE marker rewrites the file."""
    return (f"Fix count_up. FAKE_WRITE {MODULE}::def count_up(n): "
            "return list(range(1, n + 1))")


def standin_reviewer_task() -> str:
    return f"Review {MODULE} for off-by-one range bounds."

"""The scripted prompts `mmo demo` gives the offline model (docs/scripted-model.md).

With real Codex the root's own script drives the team through `mmo_mesh`:
it runs the failing tests, spawns the writer and waits for its patch, then
spawns the reviewer with that patch (the diff MMO captured from the writer's
worktree), reads the review, accepts both results, integrates the patch,
re-runs the tests and completes its goal. Each worker's script travels
inside its `task`.
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


def reviewer_task(worktree: str, base: str) -> str:
    """The reviewer reads the writer's staged diff against its base, in the writer's worktree."""
    diff = f"git -C '{worktree}' diff --cached --binary {base}"
    return block(
        "Review the writer's patch before it is integrated: it is the staged diff against "
        f"{base} in the writer's worktree {worktree}. Does it fix count_up's off-by-one in "
        f"{MODULE}, and does it apply to the current tree?",
        f"changed: shell {diff} | grep '^[-+] '",
        f"check: shell {diff} | git apply --check --verbose - 2>&1",
        "say The writer's patch applies cleanly here ({{!check}}). It changes {{!changed}}: "
        "count_up now includes n, which test_includes_n checks.",
    )


def root_prompt() -> str:
    """The orchestrator's goal: the whole demo flow as one script."""
    writer_spec = {"agent": WRITER, "task_kind": "implement", "mode": "workspace-write",
                   "write_scopes": ["calc/"], "task": writer_task()}
    reviewer_spec = {"agent": REVIEWER, "task_kind": "review",
                     "task": reviewer_task("{{writer.jobs.0.cwd}}",
                                             "{{writer.jobs.0.patch.base}}")}
    writer, reviewer = "{{fix.job_id}}", "{{review.job_id}}"
    return block(
        "The test suite fails. Plan: confirm the failure, have the specialist fix it, have "
        "the reviewer review the specialist's actual patch, then integrate the reviewed patch.",
        f"before: try shell {test_command()} 2>&1 | tail -1",
        f"fix: mcp mmo_mesh.agent_spawn {json.dumps(writer_spec)}",
        f'mcp mmo_mesh.agents_wait {{"job_ids": ["{writer}"], "timeout_seconds": 90}}',
        f'writer: mcp mmo_mesh.agent_status {{"job_ids": ["{writer}"]}}',
        f'mcp mmo_mesh.agent_result {{"job_id": "{writer}"}}',
        f"review: mcp mmo_mesh.agent_spawn {json.dumps(reviewer_spec)}",
        f'mcp mmo_mesh.agents_wait {{"job_ids": ["{reviewer}"], "timeout_seconds": 90}}',
        f'mcp mmo_mesh.agent_result {{"job_id": "{reviewer}"}}',
        f'mcp mmo_mesh.agent_result_accept {{"job_id": "{reviewer}", '
        '"reason": "the review checked the patch against the tree"}',
        f'mcp mmo_mesh.agent_result_accept {{"job_id": "{writer}", '
        '"reason": "minimal fix, reviewed, tests pass in the worktree"}',
        f'mcp mmo_mesh.agent_patch_integrate {{"job_id": "{writer}", '
        '"reason": "reviewed and accepted"}',
        f"after: shell {test_command()} 2>&1 | tail -1",
        "goal_complete",
        "say Integrated the reviewed fix. Before: {{before}} After: {{after}}",
    )


def standin_writer_task() -> str:
    """The stand-in has no script language: its FAKE_WRITE marker rewrites the file."""
    return (f"Fix count_up. FAKE_WRITE {MODULE}::def count_up(n): "
            "return list(range(1, n + 1))")


def standin_reviewer_task(diff: str) -> str:
    """The stand-in reads no files: the demo hands it the captured diff itself."""
    return (f"Review the writer's patch to {MODULE} for off-by-one range bounds "
            f"before it is integrated:\n```diff\n{diff}\n```")

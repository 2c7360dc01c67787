"""Fixtures for catalog, profile and snapshot tests: private dirs and tiny profiles."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

SKILL = """\
---
name: mmo-orchestration
description: How the tiny team delegates.
---

Spawn the worker with agent_spawn, wait with agents_wait, read with agent_result.
"""

BASE_PROFILE = """\
schema_version = 1
id = "tiny"
description = "A two-agent test team"
root_agent = "lead"

[coordination]
max_depth = 1

[agents.lead]
model = "codex_chatgpt_builtin__gpt_5_codex"
reasoning = "high"
allowed_reasoning_efforts = ["medium", "high"]
permissions = "workspace-write"
execution_mode = "goal"
goal_token_budget = 1000
can_spawn = ["worker"]

[agents.worker]
model = "opencode_go_openai_chat__glm_5_1"
permissions = "workspace-write"
output_contract = "contracts/result.json"
"""

RESULT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["summary"],
    "properties": {"summary": {"type": "string"}},
}

MakeProfile = Callable[..., Path]


@pytest.fixture(autouse=True)
def _private_env(mmo_env):
    """Every test here gets its own state/config dirs and CODEX_HOME."""
    return mmo_env


@pytest.fixture
def make_profile(tmp_path: Path) -> MakeProfile:
    """Write a profile folder: ``make_profile(toml=..., name=..., contracts=..., skill=...)``."""

    def make(
        toml: str = BASE_PROFILE,
        name: str = "tiny",
        root: Path | None = None,
        contracts: dict[str, Any] | None = None,
        skill: str | None = SKILL,
        guidance: dict[str, str] | None = None,
    ) -> Path:
        folder = (root or tmp_path / "profiles") / name
        (folder / "agents").mkdir(parents=True)
        (folder / "contracts").mkdir()
        (folder / "profile.toml").write_text(textwrap.dedent(toml), encoding="utf-8")
        if skill is not None:
            (folder / "skill.md").write_text(skill, encoding="utf-8")
        for agent, text in (
            guidance or {"lead": "# Lead\nLead the team.\n", "worker": "# Worker\nDo the work.\n"}
        ).items():
            (folder / "agents" / f"{agent}.md").write_text(text, encoding="utf-8")
        for file_name, schema in (contracts or {"result.json": RESULT_SCHEMA}).items():
            body = schema if isinstance(schema, str) else json.dumps(schema)
            (folder / "contracts" / file_name).write_text(body, encoding="utf-8")
        return folder

    return make


@pytest.fixture
def base_toml() -> str:
    """The text of the tiny test profile's profile.toml, for tests that edit it."""
    return BASE_PROFILE

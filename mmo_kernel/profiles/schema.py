"""The ``profile.toml`` document (spec 02, "Profiles"), validated strictly.

These models check shape and per-agent consistency; cross-references between
agents, the catalog, plugins and files are checked in ``profile_checks``.
``Resolved*`` models are what a snapshot stores: the document after bindings
plus every default made explicit and the contract transport chosen per agent.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from mmo_kernel.hosts.control_actions import GRANTABLE_ACTIONS

PROFILE_ID_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
AGENT_ID_RE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")

CONTROL_ACTIONS: tuple[str, ...] = GRANTABLE_ACTIONS
"""Actions a ``controls`` grant may name (spec 04 controls plus inspect/trace/fork)."""

LITERAL_OPERATIONS: tuple[str, ...] = ("summarize_supplied", "locate")
"""``literal_task`` operations a low-trust agent may be allowed (spec 04)."""

PROFILE_SKILL_NAME = "mmo-orchestration"
PROFILE_SKILL_RELATIVE_PATH = f"skills/{PROFILE_SKILL_NAME}/SKILL.md"
"""Where the team's orchestration skill sits, in a snapshot and in an agent home alike."""
PROFILE_SKILL_SOURCE = "skill.md"
"""The skill's file name inside a profile folder."""


def agent_guidance_relative_path(agent: str) -> str:
    """``agents/<agent>.md``: an agent's guidance, in a profile folder and in a snapshot."""
    if not isinstance(agent, str) or not AGENT_ID_RE.match(agent):
        raise ValueError(f"invalid agent id {agent!r}")
    return f"agents/{agent}.md"


Permissions = Literal["read-only", "workspace-write"]
ApprovalPolicy = Literal["never", "on-request", "on-failure", "untrusted"]


class _Doc(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


def _no_duplicates(values: list[str]) -> list[str]:
    seen = [v for i, v in enumerate(values) if v in values[:i]]
    if seen:
        raise ValueError(f"lists {sorted(set(seen))} more than once")
    return values


class ControlGrant(_Doc):
    """``controls.<agent> = { actions = [...] }``: control a sibling's jobs without owning them."""

    actions: list[str] = Field(min_length=1)

    @field_validator("actions")
    @classmethod
    def _actions(cls, value: list[str]) -> list[str]:
        for action in value:
            if action == "cancel":
                raise ValueError("a control grant never grants cancellation ('cancel')")
            if action not in CONTROL_ACTIONS:
                raise ValueError(
                    f"unknown control action {action!r}; "
                    f"must be one of {', '.join(CONTROL_ACTIONS)}"
                )
        return _no_duplicates(value)


class ToolMcpOptIn(_Doc):
    """``tool_mcp_servers.<server> = {...}``: this agent uses a declared tool MCP server."""

    enabled_tools: list[str] | None = None
    """A subset of the server's tools; unset means all of the server's enabled tools."""
    required: bool = True
    bridge: str = "native_mcp"
    bridge_options: dict[str, Any] = Field(default_factory=dict)

    @field_validator("enabled_tools")
    @classmethod
    def _tools(cls, value: list[str] | None) -> list[str] | None:
        if value is not None:
            if not value:
                raise ValueError("enabled_tools is empty; omit the server instead")
            _no_duplicates(value)
        return value


class Coordination(_Doc):
    """``[coordination]``: team-wide limits and the workspace isolation driver."""

    max_depth: int = Field(default=1, ge=0)
    max_active_agents: int = Field(default=4, ge=1)
    max_active_writers: int = Field(default=1, ge=0)
    native_nested_delegation: bool = False
    isolation: str = "git_worktree"
    isolation_options: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _writers_fit(self) -> Coordination:
        if self.max_active_writers > self.max_active_agents:
            raise ValueError(
                f"max_active_writers ({self.max_active_writers}) exceeds max_active_agents "
                f"({self.max_active_agents})"
            )
        return self


class AgentSpec(_Doc):
    """``[agents.<id>]``: one role of the team."""

    model: str
    reasoning: str | None = None
    allowed_reasoning_efforts: list[str] = Field(default_factory=list)
    permissions: Permissions = "read-only"
    execution_mode: Literal["goal", "turn"] = "turn"
    goal_token_budget: int | None = Field(default=None, gt=0)
    max_goal_token_budget: int | None = Field(default=None, gt=0)
    approval_policy: ApprovalPolicy = "never"
    can_spawn: list[str] = Field(default_factory=list)
    native_agents: list[str] = Field(default_factory=list)
    controls: dict[str, ControlGrant] = Field(default_factory=dict)
    tool_mcp_servers: dict[str, ToolMcpOptIn] = Field(default_factory=dict)
    write_scope_required: bool = False
    max_active: int | None = Field(default=None, ge=1)
    output_contract: str | None = None
    contract_enforcement: Literal["strict", "warn"] = "strict"
    trust: Literal["standard", "low"] = "standard"
    literal_operations: list[str] = Field(default_factory=list)
    resource_lock_key: str | None = None
    resource_units: int = Field(default=1, ge=1)
    accepts_images: bool = False
    host: str = "app_server"
    host_options: dict[str, Any] = Field(default_factory=dict)

    @field_validator(
        "allowed_reasoning_efforts", "can_spawn", "native_agents", "literal_operations"
    )
    @classmethod
    def _lists(cls, value: list[str]) -> list[str]:
        return _no_duplicates(value)

    @field_validator("literal_operations")
    @classmethod
    def _operations(cls, value: list[str]) -> list[str]:
        for op in value:
            if op not in LITERAL_OPERATIONS:
                raise ValueError(
                    f"unknown literal_task operation {op!r}; "
                    f"must be one of {', '.join(LITERAL_OPERATIONS)}"
                )
        return value

    @field_validator("output_contract")
    @classmethod
    def _contract_path(cls, value: str | None) -> str | None:
        if value is not None and not re.match(
            r"^contracts/[A-Za-z0-9][A-Za-z0-9_.-]*\.json$", value
        ):
            raise ValueError(f"output_contract {value!r} must be 'contracts/<name>.json'")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> AgentSpec:
        if self.execution_mode == "goal":
            if self.goal_token_budget is None:
                raise ValueError("goal_token_budget is required in goal mode")
            ceiling = self.max_goal_token_budget
            if ceiling is not None and ceiling < self.goal_token_budget:
                raise ValueError(
                    f"max_goal_token_budget ({ceiling}) must be >= goal_token_budget "
                    f"({self.goal_token_budget})"
                )
        elif self.goal_token_budget is not None or self.max_goal_token_budget is not None:
            raise ValueError(
                'goal_token_budget and max_goal_token_budget only apply to execution_mode = "goal"'
            )
        if self.trust == "low":
            if self.permissions != "read-only":
                raise ValueError('a low-trust agent is read-only (permissions = "read-only")')
            if not self.literal_operations:
                raise ValueError(
                    "a low-trust agent needs literal_operations (it accepts literal_task only)"
                )
            if self.can_spawn or self.native_agents:
                raise ValueError(
                    "a low-trust agent cannot delegate (can_spawn and native_agents must be empty)"
                )
        elif self.literal_operations:
            raise ValueError('literal_operations only apply to trust = "low" agents')
        if self.write_scope_required and self.permissions != "workspace-write":
            raise ValueError('write_scope_required only applies to permissions = "workspace-write"')
        return self


class ProfileDoc(_Doc):
    """The whole ``profile.toml``."""

    schema_version: int
    id: str
    description: str = ""
    root_agent: str
    coordination: Coordination = Field(default_factory=Coordination)
    agents: dict[str, AgentSpec] = Field(min_length=1)

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        if not PROFILE_ID_RE.match(value):
            raise ValueError(f"profile id {value!r} must be lower case letters, digits, '-' or '_'")
        return value


class ResolvedAgent(AgentSpec):
    """An agent as a snapshot stores it: defaults explicit, route and transport chosen."""

    route: str
    route_driver: str
    guidance_path: str
    native_parents: list[str] = Field(default_factory=list)
    contract_transport: str | None = None
    contract_transport_reason: str | None = None


class ResolvedProfile(ProfileDoc):
    """The profile a session runs: bindings applied, every agent resolved."""

    agents: dict[str, ResolvedAgent] = Field(min_length=1)  # type: ignore[assignment]
    bindings: dict[str, str] = Field(default_factory=dict)
    skill_path: str

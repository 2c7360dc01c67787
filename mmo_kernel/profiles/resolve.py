"""From a checked profile document to the resolved profile a snapshot stores.

Bindings (``--offline`` and the API's ``bindings``) re-point agents at other
catalog models before the profile is checked, so a bound profile is held to
the same rules as a hand-written one.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mmo_kernel.config.catalog import Catalog, Model
from mmo_kernel.contracts.schemas import load_schema, resolve_contract_file
from mmo_kernel.plugin.transports import choose_transport
from mmo_kernel.profiles.schema import (
    PROFILE_SKILL_RELATIVE_PATH,
    AgentSpec,
    ProfileDoc,
    ResolvedAgent,
    ResolvedProfile,
    agent_guidance_relative_path,
)

ALL_AGENTS = "*"


def _binding_model(target: str, catalog: Catalog) -> Model:
    if target in catalog.models:
        return catalog.models[target]
    if target in catalog.routes:
        model = catalog.default_model(target)
        if model is None:
            raise ValueError(
                f"bindings: route {target!r} has several models and no default_model; "
                f"bind one of {[m.id for m in catalog.models_of(target)]}"
            )
        return model
    raise ValueError(f"bindings: unknown route or model {target!r} (see `mmo catalog models`)")


def _rebind(agent: AgentSpec, model: Model) -> AgentSpec:
    """The agent on ``model``, with efforts the model cannot take dropped or replaced."""
    levels = model.reasoning_levels
    if not levels:
        return agent.model_copy(
            update={"model": model.id, "reasoning": None, "allowed_reasoning_efforts": []}
        )
    allowed = [e for e in agent.allowed_reasoning_efforts if e in levels]
    pool = allowed or levels
    reasoning = agent.reasoning if agent.reasoning in pool else None
    if reasoning is None and model.default_reasoning not in pool:
        reasoning = pool[-1]
    return agent.model_copy(
        update={"model": model.id, "reasoning": reasoning, "allowed_reasoning_efforts": allowed}
    )


def apply_bindings(
    doc: ProfileDoc, bindings: Mapping[str, str] | None, catalog: Catalog
) -> tuple[ProfileDoc, dict[str, str]]:
    """``doc`` with bound agents re-pointed; also the bindings as recorded in the snapshot."""
    if not bindings:
        return doc, {}
    if not isinstance(bindings, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in bindings.items()
    ):
        raise ValueError("bindings must map agent ids (or '*') to a catalog model key or route id")
    unknown = sorted(k for k in bindings if k != ALL_AGENTS and k not in doc.agents)
    if unknown:
        raise ValueError(f"bindings: unknown agent {unknown[0]!r}; agents: {', '.join(doc.agents)}")
    agents = {}
    for aid, agent in doc.agents.items():
        target = bindings.get(aid, bindings.get(ALL_AGENTS))
        agents[aid] = agent if target is None else _rebind(agent, _binding_model(target, catalog))
    return doc.model_copy(update={"agents": agents}), dict(sorted(bindings.items()))


def _native_parents(doc: ProfileDoc, aid: str) -> list[str]:
    return [parent for parent, spec in doc.agents.items() if aid in spec.native_agents]


def resolve_profile(
    doc: ProfileDoc, folder: Path, catalog: Catalog, bindings: dict[str, str]
) -> tuple[ResolvedProfile, dict[str, dict[str, Any]]]:
    """The resolved profile and the contract schemas it uses (by ``contracts/<name>.json``)."""
    agents: dict[str, ResolvedAgent] = {}
    contracts: dict[str, dict[str, Any]] = {}
    for aid, agent in doc.agents.items():
        model = catalog.model(agent.model)
        route = catalog.route(model.route)
        fields = agent.model_dump()
        if model.has_reasoning:
            fields["allowed_reasoning_efforts"] = agent.allowed_reasoning_efforts or list(
                model.reasoning_levels
            )
            fields["reasoning"] = agent.reasoning or model.default_reasoning
        if agent.execution_mode == "goal" and agent.max_goal_token_budget is None:
            fields["max_goal_token_budget"] = agent.goal_token_budget
        if agent.output_contract is not None:
            schema = load_schema(resolve_contract_file(folder, agent.output_contract))
            contracts[agent.output_contract] = schema
            transport, reason = choose_transport(agent.contract_enforcement, schema)
            fields.update(contract_transport=transport, contract_transport_reason=reason)
        agents[aid] = ResolvedAgent.model_validate(
            {
                **fields,
                "route": route.id,
                "route_driver": route.driver,
                "guidance_path": agent_guidance_relative_path(aid),
                "native_parents": _native_parents(doc, aid),
            }
        )
    resolved = ResolvedProfile.model_validate(
        {
            **doc.model_dump(exclude={"agents"}),
            "agents": {aid: a.model_dump() for aid, a in agents.items()},
            "bindings": bindings,
            "skill_path": PROFILE_SKILL_RELATIVE_PATH,
        }
    )
    return resolved, contracts

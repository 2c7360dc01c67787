"""Checks of a parsed profile against itself, the catalog, the plugins and its files.

Every check appends ``<file>: <key>: <message>`` problems so a user sees all
that is wrong in one pass; a profile is usable only when the list is empty.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from mmo_kernel.config.catalog import Catalog
from mmo_kernel.config.toml_input import DOCUMENT_KEY, problem
from mmo_kernel.contracts.schemas import load_schema, resolve_contract_file
from mmo_kernel.errors import UnknownDriverError
from mmo_kernel.plugin.manager import get_driver
from mmo_kernel.plugin.transports import choose_transport
from mmo_kernel.profiles.schema import (
    AGENT_ID_RE,
    PROFILE_SKILL_NAME,
    PROFILE_SKILL_SOURCE,
    AgentSpec,
    ProfileDoc,
    agent_guidance_relative_path,
)
from mmo_kernel.tools.servers import load_tool_servers

Add = Callable[[str, str], None]


def _check_references(doc: ProfileDoc, add: Add) -> None:
    """Agents named by root_agent, can_spawn, native_agents and controls exist."""
    names = list(doc.agents)
    known = ", ".join(names)
    for aid in names:
        if not AGENT_ID_RE.match(aid):
            add(f"agents.{aid}", "agent ids are lower snake case (letters, digits, '_')")
    if doc.root_agent not in doc.agents:
        add("root_agent", f"unknown agent {doc.root_agent!r}; agents: {known}")
    reachable = {doc.root_agent}
    for aid, agent in doc.agents.items():
        base = f"agents.{aid}"
        for key in ("can_spawn", "native_agents"):
            for target in getattr(agent, key):
                if target not in doc.agents:
                    add(f"{base}.{key}", f"unknown agent {target!r}; agents: {known}")
                elif target == aid:
                    add(f"{base}.{key}", "an agent cannot name itself")
                elif target == doc.root_agent:
                    add(
                        f"{base}.{key}",
                        f"the root agent {target!r} cannot be spawned or run natively",
                    )
                reachable.add(target)
        for target in agent.controls:
            if target not in doc.agents:
                add(f"{base}.controls", f"unknown agent {target!r}; agents: {known}")
            elif target == aid:
                add(f"{base}.controls", "an agent cannot grant itself controls")
    for aid in doc.agents:
        if aid not in reachable:
            add(f"agents.{aid}", "unreachable: no agent lists it in can_spawn or native_agents")
    root = doc.agents.get(doc.root_agent)
    if root is not None and root.trust == "low":
        add(f"agents.{doc.root_agent}.trust", "the root agent cannot be low-trust")


def _check_depth(doc: ProfileDoc, add: Add) -> None:
    """An agent may only list can_spawn if its depth leaves room under max_depth."""
    if doc.root_agent not in doc.agents:
        return
    depth = {doc.root_agent: 0}
    frontier = [doc.root_agent]
    while frontier:
        current = frontier.pop(0)
        for target in getattr(doc.agents.get(current), "can_spawn", []):
            if target in doc.agents and target not in depth:
                depth[target] = depth[current] + 1
                frontier.append(target)
    limit = doc.coordination.max_depth
    for aid, level in depth.items():
        if doc.agents[aid].can_spawn and level + 1 > limit:
            add(
                f"agents.{aid}.can_spawn",
                f"{aid} runs at delegation depth {level}; coordination.max_depth = {limit} "
                "does not let it spawn",
            )


def _check_model(aid: str, agent: AgentSpec, catalog: Catalog, add: Add) -> None:
    base = f"agents.{aid}"
    model = catalog.models.get(agent.model)
    if model is None:
        try:
            catalog.model(agent.model)
        except ValueError as exc:  # unknown, or disabled by a catalog problem (says which)
            add(f"{base}.model", str(exc))
        return
    levels = model.reasoning_levels
    if not levels:
        if agent.reasoning is not None or agent.allowed_reasoning_efforts:
            add(
                f"{base}.reasoning",
                f"model {model.id} has reasoning none: remove reasoning and "
                "allowed_reasoning_efforts",
            )
    else:
        bad = [e for e in agent.allowed_reasoning_efforts if e not in levels]
        if bad:
            add(
                f"{base}.allowed_reasoning_efforts",
                f"{bad} not supported by model {model.id} (levels {levels})",
            )
        allowed = agent.allowed_reasoning_efforts or levels
        if agent.reasoning is not None:
            if agent.reasoning not in levels:
                add(
                    f"{base}.reasoning",
                    f"{agent.reasoning!r} not supported by model {model.id} (levels {levels})",
                )
            elif agent.reasoning not in allowed:
                add(
                    f"{base}.reasoning",
                    f"{agent.reasoning!r} must be one of allowed_reasoning_efforts {allowed}",
                )
        elif model.default_reasoning not in allowed:
            add(
                f"{base}.reasoning",
                f"required: the model default {model.default_reasoning!r} is not in "
                f"allowed_reasoning_efforts {allowed}",
            )
    if agent.accepts_images and "image" not in model.modalities:
        add(
            f"{base}.accepts_images",
            f"model {model.id} does not take images (modalities {model.modalities})",
        )


def _driver(concern: str, name: str, key: str, add: Add) -> object | None:
    try:
        return get_driver(concern, name)
    except UnknownDriverError as exc:
        add(key, str(exc))
        return None


def _options(driver: object | None, options: dict, where: str, problems: list[str]) -> None:
    if driver is None:
        return
    try:
        driver.validate_options(options, where)  # type: ignore[attr-defined]
    except ValueError as exc:
        problems.append(str(exc))


def _check_drivers(
    doc: ProfileDoc, folder: Path, file: Path, add: Add, problems: list[str]
) -> None:
    """Every driver a profile names is installed and accepts its options."""
    iso = _driver("workspace_isolation", doc.coordination.isolation, "coordination.isolation", add)
    _options(
        iso, doc.coordination.isolation_options, f"{file}: coordination.isolation_options", problems
    )
    for aid, agent in doc.agents.items():
        base = f"agents.{aid}"
        host = _driver("execution_hosts", agent.host, f"{base}.host", add)
        _options(host, agent.host_options, f"{file}: {base}.host_options", problems)
        for server, opt_in in agent.tool_mcp_servers.items():
            key = f"{base}.tool_mcp_servers.{server}"
            bridge = _driver("tool_bridges", opt_in.bridge, f"{key}.bridge", add)
            _options(bridge, opt_in.bridge_options, f"{file}: {key}.bridge_options", problems)
        if agent.output_contract is None:
            continue
        try:
            schema = load_schema(resolve_contract_file(folder, agent.output_contract))
        except (OSError, ValueError) as exc:
            add(f"{base}.output_contract", str(exc))
            continue
        try:  # a transport is chosen from the installed ones; none fitting is a problem
            choose_transport(agent.contract_enforcement, schema)
        except ValueError as exc:
            add(f"{base}.output_contract", str(exc))


def _check_tool_servers(doc: ProfileDoc, add: Add) -> None:
    """Opt-ins name servers declared in ``tool-mcp.d`` and a subset of their tools."""
    if not any(agent.tool_mcp_servers for agent in doc.agents.values()):
        return
    try:
        servers = load_tool_servers()
    except ValueError as exc:
        add("tool_mcp_servers", f"tool-mcp.d cannot be read: {exc}")
        return
    for aid, agent in doc.agents.items():
        for name, opt_in in agent.tool_mcp_servers.items():
            key = f"agents.{aid}.tool_mcp_servers.{name}"
            server = servers.get(name)
            if server is None:
                if opt_in.required:
                    add(
                        key,
                        f"no tool MCP server {name!r} is declared in tool-mcp.d "
                        f"(declared: {', '.join(servers) or 'none'}); "
                        "declare it or set required = false",
                    )
                continue
            extra = [t for t in opt_in.enabled_tools or [] if t not in server.enabled_tools]
            if extra:
                add(
                    f"{key}.enabled_tools",
                    f"{extra} are not enabled tools of server {name!r} ({server.enabled_tools})",
                )


def skill_problems(path: Path) -> list[tuple[str, str]]:
    """``(key, message)`` for a SKILL.md whose front matter is not the team skill's."""
    if not path.is_file():
        return [
            (DOCUMENT_KEY, f"the team's orchestration skill ({PROFILE_SKILL_SOURCE}) is missing")
        ]
    text = path.read_text(encoding="utf-8")
    if not text.startswith("---\n"):
        return [
            (DOCUMENT_KEY, "must start with front matter ('---' line, name, description, '---')")
        ]
    end = text.find("\n---", 4)
    if end < 0:
        return [(DOCUMENT_KEY, "front matter is not closed with a '---' line")]
    fields = {}
    for line in text[4:end].splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip()] = value.strip().strip("'\"")
    out = []
    if fields.get("name") != PROFILE_SKILL_NAME:
        out.append(("name", f"must be {PROFILE_SKILL_NAME!r} (found {fields.get('name')!r})"))
    if not fields.get("description"):
        out.append(("description", "a one-line description is required"))
    if not text[end + 4 :].strip():
        out.append((DOCUMENT_KEY, "the skill has no body"))
    return out


def _check_files(doc: ProfileDoc, folder: Path, add: Add, problems: list[str]) -> None:
    for aid in doc.agents:
        if not AGENT_ID_RE.match(aid):
            continue
        guidance = folder / agent_guidance_relative_path(aid)
        if not guidance.is_file() or not guidance.read_text(encoding="utf-8").strip():
            add(
                f"agents.{aid}",
                f"guidance file {agent_guidance_relative_path(aid)} is missing or empty",
            )
    skill = folder / PROFILE_SKILL_SOURCE
    problems.extend(problem(skill, key, msg) for key, msg in skill_problems(skill))


def check_profile(doc: ProfileDoc, folder: Path, file: Path, catalog: Catalog) -> list[str]:
    """All problems of a schema-valid profile document; empty when it can be compiled."""
    problems: list[str] = []

    def add(key: str, message: str) -> None:
        problems.append(problem(file, key, message))

    _check_references(doc, add)
    _check_depth(doc, add)
    for aid, agent in doc.agents.items():
        _check_model(aid, agent, catalog, add)
    _check_drivers(doc, folder, file, add, problems)
    _check_tool_servers(doc, add)
    _check_files(doc, folder, add, problems)
    return problems

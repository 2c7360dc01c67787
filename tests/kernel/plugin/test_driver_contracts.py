"""Third-party drivers get what the base classes declare, never what a built-in name gets.

Each test installs a plugin in-process (the example route of tests/fixtures,
or a small driver defined here), compiles a real profile against it and
renders a real agent home, the way `mmo run` does before starting Codex.
"""

from __future__ import annotations

import json
import textwrap
import tomllib
from pathlib import Path
from typing import Any

import pytest

from mmo_kernel import hookimpl
from mmo_kernel.config.toml_input import DocumentError
from mmo_kernel.plugin import ContractTransport, ToolBridge, TransportFit
from mmo_kernel.plugin import manager as plugin_manager

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "mmo-example-route"

ECHO_ROUTES = """
schema_version = 1
[routes.echo]
name = "Echo"
driver = "example_echo"
api_operator = "me"
access_product = "local"

[models.echo__echo_small]
route = "echo"
upstream_id = "echo-small"
maker = "me"

[routes.login_echo]
name = "Echo with Codex login"
driver = "login_echo"
api_operator = "me"
access_product = "local"

[models.login_echo__echo_small]
route = "login_echo"
upstream_id = "echo-small"
maker = "me"
"""

TOOL_SERVERS = """
schema_version = 1
[tool_mcp_servers.tools]
transport = "stdio"
command = "/usr/bin/true"
env_vars = ["TOOLS_TOKEN"]
enabled_tools = ["echo", "add"]

[tool_mcp_servers.search]
transport = "streamable_http"
url = "https://example.invalid/mcp"
bearer_token_env_var = "SEARCH_TOKEN"
enabled_tools = ["query"]
"""

PROFILE = """
schema_version = 1
id = "echo-team"
root_agent = "lead"

[agents.lead]
model = "{lead_model}"
permissions = "workspace-write"
can_spawn = ["helper"]
{lead_extra}

[agents.helper]
model = "echo__echo_small"
permissions = "read-only"
{helper_extra}
"""

SCHEMA: dict[str, Any] = {"type": "object", "additionalProperties": False,
                          "required": ["summary"], "properties": {"summary": {"type": "string"}}}


@pytest.fixture
def install(mmo_env, monkeypatch):
    """``install(plugin, ...)``: the process's plugin system is the installed one plus these."""
    monkeypatch.syspath_prepend(str(FIXTURE))
    import mmo_example_route

    (mmo_env.config_dir / "catalog.d").mkdir(exist_ok=True)
    (mmo_env.config_dir / "catalog.d" / "echo.toml").write_text(ECHO_ROUTES)
    (mmo_env.config_dir / "tool-mcp.d").mkdir(exist_ok=True)
    (mmo_env.config_dir / "tool-mcp.d" / "tools.toml").write_text(TOOL_SERVERS)

    class LoginEcho(mmo_example_route.ExampleEchoRoute):
        name = "login_echo"
        uses_codex_login = True

    class LoginPlugin:
        @hookimpl
        def mmo_register_route_drivers(self, register):
            register(LoginEcho)

    def install(**plugins: object) -> None:
        system = plugin_manager.build_plugin_system(
            {"example_route": mmo_example_route, "login_route": LoginPlugin(), **plugins})
        monkeypatch.setattr(plugin_manager, "_system", system)

    install()
    return install


def compile_team(tmp_path: Path, *, lead_model: str = "echo__echo_small", lead_extra: str = "",
                 helper_extra: str = "", schema: dict[str, Any] | None = None) -> dict[str, Any]:
    from mmo_kernel.profiles.snapshots import compile_profile

    folder = tmp_path / "echo-team"
    (folder / "agents").mkdir(parents=True, exist_ok=True)
    (folder / "contracts").mkdir(exist_ok=True)
    (folder / "profile.toml").write_text(textwrap.dedent(PROFILE.format(
        lead_model=lead_model, lead_extra=lead_extra, helper_extra=helper_extra)))
    (folder / "skill.md").write_text("---\nname: mmo-orchestration\ndescription: Echo team.\n"
                                     "---\n\nDelegate with agent_spawn.\n")
    for agent in ("lead", "helper"):
        (folder / "agents" / f"{agent}.md").write_text(f"# {agent}\nDo the work.\n")
    (folder / "contracts" / "result.json").write_text(json.dumps(schema or SCHEMA))
    return compile_profile(folder)


def render_home(snapshot: dict[str, Any], agent: str, tmp_path: Path,
                **ctx: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """Write ``agent``'s home; returns its home record and its parsed config.toml."""
    from mmo_kernel.sessions.homes import HomeContext, materialize_home
    from mmo_kernel.tools.servers import load_tool_servers

    context = HomeContext(session_id="s1", run_id="r1", gateway_url="http://127.0.0.1:9",
                          tool_servers=load_tool_servers(), **ctx)
    record = materialize_home(snapshot, agent, tmp_path / "homes" / agent, context)
    return record, tomllib.loads(Path(record["config_toml"]).read_text())


# ---------------------------------------------------------------- routes ---


def test_a_home_renders_for_a_route_driver_without_a_fault_parameter(install, tmp_path):
    """The example driver implements the documented minimum `provider_config(route, model,
    gateway_url)`: its agents get homes, and only injecting a fault on its route is refused."""
    snapshot = compile_team(tmp_path)
    _, config = render_home(snapshot, "lead", tmp_path)
    assert config["model"] == "echo__echo_small"
    assert config["model_providers"]["mmo_echo"]["base_url"] == (
        "http://127.0.0.1:9/routes/echo/v1")

    with pytest.raises(ValueError, match=r"route fault 'rate_limit' cannot be injected on route "
                                         r"echo: its driver 'example_echo' does not support"):
        render_home(snapshot, "lead", tmp_path, route_faults={"echo": "rate_limit"})


def test_a_route_driver_declaring_codex_login_gets_the_users_auth_json(install, mmo_env,
                                                                       tmp_path):
    snapshot = compile_team(tmp_path, lead_model="login_echo__echo_small")
    render_home(snapshot, "lead", tmp_path)
    auth = tmp_path / "homes" / "lead" / "auth.json"
    assert auth.is_symlink() and auth.resolve() == (mmo_env.codex_home / "auth.json").resolve()
    render_home(snapshot, "helper", tmp_path)  # its route does not use Codex's login
    assert not (tmp_path / "homes" / "helper" / "auth.json").exists()

    (mmo_env.codex_home / "auth.json").unlink()
    with pytest.raises(RuntimeError, match=r"route login_echo uses Codex's own login and needs"):
        render_home(snapshot, "lead", tmp_path)


# ----------------------------------------------------------------- tools ---


class ProxyBridge(ToolBridge):
    """A third-party bridge: its opted servers reach Codex through a local proxy command."""

    name = "proxy"

    def render_servers(self, servers, opt_ins):
        return {name: {"command": "mcp-proxy", "args": [name], "enabled": True}
                for name in opt_ins}

    def alias_table(self, servers, opt_ins):
        return {f"proxy_{name}": f"{name}.{servers[name].enabled_tools[0]}" for name in opt_ins}


class ProxyPlugin:
    @hookimpl
    def mmo_register_tool_bridges(self, register):
        register(ProxyBridge)


def test_every_bridge_serves_the_opt_ins_that_name_it(install, tmp_path):
    from mmo_kernel.lifecycle.smoke import dynamic_aliases
    from mmo_kernel.profiles.snapshots import snapshot_profile
    from mmo_kernel.tools.servers import load_tool_servers

    install(proxy_bridge=ProxyPlugin())
    snapshot = compile_team(
        tmp_path,
        lead_extra='tool_mcp_servers.tools = { bridge = "proxy" }\n'
                   'tool_mcp_servers.search = { bridge = "switchyard" }',
        helper_extra='tool_mcp_servers.search = { bridge = "native_mcp" }')

    lead, config = render_home(snapshot, "lead", tmp_path)
    # the proxy's entry wins for the server opted in through it ...
    assert config["mcp_servers"]["tools"] == {"command": "mcp-proxy", "args": ["tools"],
                                              "enabled": True}
    # ... and native_mcp still lists the server bridged at run time, disabled
    assert config["mcp_servers"]["search"]["enabled"] is False
    # both bridges' servers get their credentials into the agent's environment
    assert lead["tool_mcp_envs"] == ["TOOLS_TOKEN"]
    assert lead["tool_mcp_http_envs"] == ["SEARCH_TOKEN"]

    helper, helper_config = render_home(snapshot, "helper", tmp_path)
    assert helper_config["mcp_servers"]["search"]["enabled"] is True
    assert helper_config["mcp_servers"]["tools"]["enabled"] is False  # native: not opted in
    assert (helper["tool_mcp_envs"], helper["tool_mcp_http_envs"]) == ([], ["SEARCH_TOKEN"])

    # smoke evidence maps run-time tool names back through each named bridge
    lead_spec = snapshot_profile(snapshot).agents["lead"]
    aliases = dynamic_aliases(lead_spec, load_tool_servers())
    assert aliases == {"proxy_tools": "tools.echo", "mmo_mcp__search__query": "search.query"}


# ------------------------------------------------------------- contracts ---


class TitledGrammar(ContractTransport):
    """Constrains generation harder than the built-ins, but only for titled schemas."""

    name = "titled_grammar"
    enforcements = frozenset({"strict"})
    priority = 20

    def fit(self, enforcement, schema):
        if "title" not in schema:
            return TransportFit(False, "titled_grammar needs a schema title")
        return TransportFit(True, f"{enforcement} contract with a titled schema")

    def turn_overrides(self, schema, *, final):
        return {"outputSchema": schema} if final else {}


class GrammarPlugin:
    @hookimpl
    def mmo_register_contract_transports(self, register):
        register(TitledGrammar)


def _worker_transport(snapshot: dict[str, Any]) -> tuple[str | None, str | None]:
    from mmo_kernel.profiles.snapshots import snapshot_profile

    helper = snapshot_profile(snapshot).agents["helper"]
    return helper.contract_transport, helper.contract_transport_reason


def test_a_transport_is_chosen_by_what_it_declares(install, tmp_path):
    contract = 'output_contract = "contracts/result.json"'
    assert _worker_transport(compile_team(tmp_path, helper_extra=contract)) == (
        "native_schema_projection", "strict contract with a projectable schema")

    install(grammar=GrammarPlugin())
    titled = compile_team(tmp_path, helper_extra=contract, schema={**SCHEMA, "title": "Result"})
    assert _worker_transport(titled) == ("titled_grammar", "strict contract with a titled schema")
    # refused: the next one that fits carries it, and the refusal is recorded as the reason
    assert _worker_transport(compile_team(tmp_path, helper_extra=contract)) == (
        "native_schema_projection", "titled_grammar needs a schema title")
    warn = compile_team(tmp_path, helper_extra=f'{contract}\ncontract_enforcement = "warn"')
    assert _worker_transport(warn) == (
        "validated_text", "warn enforcement never constrains generation")


def test_a_contract_no_installed_transport_serves_is_a_profile_problem(install, tmp_path,
                                                                      monkeypatch):
    monkeypatch.setenv("MMO_DISABLE_PLUGINS", "validated_text")
    install()
    with pytest.raises(DocumentError, match=r"agents.helper.output_contract: no installed "
                                            r"contract transport serves 'warn' contracts"):
        compile_team(tmp_path, helper_extra='output_contract = "contracts/result.json"\n'
                                            'contract_enforcement = "warn"')

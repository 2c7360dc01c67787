"""The built-in catalog and user catalog.d fragments (spec 02, "Catalog")."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from mmo_kernel import hookimpl
from mmo_kernel.config.catalog_load import load_catalog
from mmo_kernel.config.toml_input import DocumentError
from mmo_kernel.errors import DriverConfigError
from mmo_kernel.plugin import manager as plugins
from mmo_kernel.plugin.drivers import RouteDriver

SPEC_FRAGMENT = """\
schema_version = 1
[routes.header_route]
name = "Header-backed test route"
driver = "codex_custom"
api_operator = "example"
access_product = "example_api"
wire_protocol = "openai_responses"
billing_mode = "api"
base_url = "https://example.invalid/v1"
credential_env = "EXAMPLE_API_KEY"
transport_modalities = ["text", "image"]
preserves_tool_media = true
tool_result_modalities = ["text", "image"]
env_http_headers = { "X-Secret" = "EXAMPLE_HEADER_SECRET" }

[models.header_route__header_model]
route = "header_route"
upstream_id = "header-model"
maker = "example"
modalities = ["text", "image"]
reasoning_levels = ["high", "xhigh"]
default_reasoning = "xhigh"
"""


def fragment(config_dir: Path, name: str, text: str) -> Path:
    folder = config_dir / "catalog.d"
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def catalog_error(config_dir: Path) -> str:
    with pytest.raises(ValueError) as info:
        load_catalog(config_dir)
    return str(info.value)


def test_builtin_routes_have_contract_ids_drivers_and_credentials():
    catalog = load_catalog()
    expected = {
        "codex_chatgpt_builtin": ("codex_builtin", None),
        "openai_responses_api": ("codex_custom", "OPENAI_API_KEY"),
        "openrouter_openai_chat": ("codex_custom", "OPENROUTER_API_KEY"),
        "opencode_go_openai_chat": ("codex_custom", "OPENCODE_API_KEY"),
        "opencode_zen_anthropic_messages": ("codex_custom", "OPENCODE_API_KEY"),
        "zai_coding_openai_chat": ("codex_custom", "ZAI_CODING_API_KEY"),
        "local_scripted": ("scripted", None),
    }
    assert {rid: (r.driver, r.credential_env) for rid, r in catalog.routes.items()} == expected
    for rid, route in catalog.routes.items():
        if route.driver == "codex_custom":
            assert route.base_url.startswith("https://"), rid
    assert catalog.routes["opencode_zen_anthropic_messages"].wire_protocol == "anthropic_messages"
    assert catalog.routes["openrouter_openai_chat"].wire_protocol == "openai_chat"


def test_builtin_models_are_a_realistic_set_keyed_by_route():
    catalog = load_catalog()
    makers = {m.maker for m in catalog.models.values()}
    assert {"openai", "deepseek", "qwen", "zhipu", "anthropic"} <= makers
    for key, model in catalog.models.items():
        assert key == f"{model.route}__{model.slug}"
    assert any(not m.has_reasoning for m in catalog.models.values() if m.route != "local_scripted")
    claude = [
        m for m in catalog.models_of("opencode_zen_anthropic_messages") if m.maker == "anthropic"
    ]
    assert claude and all(m.upstream_id.startswith("claude-") for m in claude)
    assert all(m.maker == "openai" for m in catalog.models_of("codex_chatgpt_builtin"))


def test_openrouter_models_carry_provider_routing_policy():
    catalog = load_catalog()
    policies = {m.id: m.provider_routing for m in catalog.models_of("openrouter_openai_chat")}
    assert policies and all(p is not None and p.only for p in policies.values())
    assert {p.allow_fallbacks for p in policies.values()} == {True, False}


def test_local_scripted_is_always_available_with_one_default_model():
    catalog = load_catalog()
    route = catalog.route("local_scripted")
    assert route.credential_env is None and route.base_url is None
    model = catalog.default_model("local_scripted")
    assert model.id == "local_scripted__scripted"
    assert not model.has_reasoning and model.default_reasoning is None


def test_spec_fragment_adds_a_route_and_model(mmo_env):
    path = fragment(mmo_env.config_dir, "10-header.toml", SPEC_FRAGMENT)
    catalog = load_catalog(mmo_env.config_dir)
    route = catalog.route("header_route")
    assert route.env_http_headers == {"X-Secret": "EXAMPLE_HEADER_SECRET"}
    assert catalog.model("header_route__header_model").default_reasoning == "xhigh"
    assert catalog.sources["models.header_route__header_model"] == path
    assert catalog.default_model("header_route").id == "header_route__header_model"
    # without a config dir argument the environment's config dir is used
    assert "header_route" in load_catalog().routes


def test_bad_toml_names_file_and_line(mmo_env):
    path = fragment(mmo_env.config_dir, "broken.toml", "schema_version = 1\n[routes.x\nname = 1\n")
    message = catalog_error(mmo_env.config_dir)
    assert str(path) in message and "invalid TOML" in message and "line 2" in message


@pytest.mark.parametrize("value", ["true", '"1"', "2"])
def test_schema_version_is_strict(mmo_env, value):
    path = fragment(mmo_env.config_dir, "v.toml", f"schema_version = {value}\n")
    message = catalog_error(mmo_env.config_dir)
    assert f"{path}: schema_version: unsupported catalog schema version" in message


def test_schema_version_is_required(mmo_env):
    path = fragment(mmo_env.config_dir, "v.toml", "[routes]\n")
    assert f"{path}: schema_version: required key is missing" in catalog_error(mmo_env.config_dir)


def test_unknown_model_key_names_file_and_key(mmo_env):
    text = SPEC_FRAGMENT.replace('maker = "example"', 'maker = "example"\ncolour = "red"')
    path = fragment(mmo_env.config_dir, "f.toml", text)
    message = catalog_error(mmo_env.config_dir)
    assert f"{path}: models.header_route__header_model.colour: unknown key" in message


def test_unknown_route_key_names_file_and_key(mmo_env):
    text = SPEC_FRAGMENT.replace('billing_mode = "api"', 'billing_mode = "api"\nbase_ulr = "x"')
    path = fragment(mmo_env.config_dir, "f.toml", text)
    assert f"{path}: routes.header_route.base_ulr: unknown key" in catalog_error(mmo_env.config_dir)


def test_route_options_are_validated_by_the_route_driver(mmo_env):
    text = SPEC_FRAGMENT.replace(
        "[models.header_route__header_model]",
        '[routes.header_route.options]\ngreeting = "hi"\n\n[models.header_route__header_model]',
    )
    path = fragment(mmo_env.config_dir, "f.toml", text)
    message = catalog_error(mmo_env.config_dir)
    assert f"{path}: routes.header_route: greeting: Extra inputs are not permitted" in message


def test_route_defined_in_builtin_and_fragment_names_both_files(mmo_env):
    path = fragment(
        mmo_env.config_dir,
        "f.toml",
        """\
        schema_version = 1
        [routes.local_scripted]
        name = "mine"
        driver = "scripted"
        api_operator = "me"
        access_product = "mine"
        """,
    )
    message = catalog_error(mmo_env.config_dir)
    assert f"{path}: routes.local_scripted: already defined in" in message
    assert "catalog_builtin.toml" in message


def test_model_defined_in_two_fragments_names_both_in_sorted_order(mmo_env):
    first = fragment(mmo_env.config_dir, "a.toml", SPEC_FRAGMENT)
    model_only = "schema_version = 1\n" + SPEC_FRAGMENT.split("\n\n", 1)[1]
    second = fragment(mmo_env.config_dir, "b.toml", model_only)
    message = catalog_error(mmo_env.config_dir)
    assert f"{second}: models.header_route__header_model: already defined in {first}" in message


def test_model_with_unknown_route_is_an_error(mmo_env):
    text = SPEC_FRAGMENT.replace('route = "header_route"', 'route = "nowhere"').replace(
        "models.header_route__header_model", "models.nowhere__header_model"
    )
    path = fragment(mmo_env.config_dir, "f.toml", text)
    assert f"{path}: models.nowhere__header_model.route: unknown route 'nowhere'" in catalog_error(
        mmo_env.config_dir
    )


def test_model_key_must_belong_to_its_route(mmo_env):
    text = SPEC_FRAGMENT.replace("models.header_route__header_model", "models.other__header_model")
    path = fragment(mmo_env.config_dir, "f.toml", text)
    message = catalog_error(mmo_env.config_dir)
    assert f"{path}: models.other__header_model" in message and "'<route>__<slug>'" in message


def test_default_reasoning_must_be_a_listed_level(mmo_env):
    text = SPEC_FRAGMENT.replace('default_reasoning = "xhigh"', 'default_reasoning = "low"')
    fragment(mmo_env.config_dir, "f.toml", text)
    assert "default_reasoning 'low' must be one of reasoning_levels" in catalog_error(
        mmo_env.config_dir
    )


def test_secret_values_cannot_be_written_as_header_env_names(mmo_env):
    text = SPEC_FRAGMENT.replace('"EXAMPLE_HEADER_SECRET"', '"sk-live 123"')
    fragment(mmo_env.config_dir, "f.toml", text)
    assert "is not an environment variable name" in catalog_error(mmo_env.config_dir)


def test_unknown_route_driver_lists_installed_names(mmo_env):
    text = SPEC_FRAGMENT.replace('driver = "codex_custom"', 'driver = "teleport"')
    path = fragment(mmo_env.config_dir, "f.toml", text)
    message = catalog_error(mmo_env.config_dir)
    assert f"{path}: routes.header_route.driver: unknown route drivers driver 'teleport'" in message
    assert "codex_builtin, codex_custom, scripted" in message


def test_catalog_errors_change_nothing_and_report_every_problem(mmo_env):
    fragment(mmo_env.config_dir, "a.toml", "schema_version = true\n")
    fragment(mmo_env.config_dir, "b.toml", "schema_version = 1\nextra = 1\n")
    with pytest.raises(DocumentError) as info:
        load_catalog(mmo_env.config_dir)
    assert len(info.value.problems) == 2


class _PickyRoute(RouteDriver):
    """A route driver that only serves https endpoints and models from one maker."""

    name = "picky"

    def validate_route(self, route, where):
        if not (route.base_url or "").startswith("https://"):
            raise DriverConfigError(where, "picky routes need an https base_url")

    def validate_model(self, model, route, where):
        if model.maker != "picky":
            raise DriverConfigError(
                where, f"picky routes only serve picky models, not {model.maker}"
            )


class _PickyPlugin:
    @staticmethod
    @hookimpl
    def mmo_register_route_drivers(register):
        register(_PickyRoute)


@pytest.fixture
def picky_driver(monkeypatch):
    system = plugins.build_plugin_system({"picky_plugin": _PickyPlugin})
    monkeypatch.setattr(plugins, "_system", system)


def test_route_driver_validates_its_routes_and_models(mmo_env, picky_driver):
    text = SPEC_FRAGMENT.replace('driver = "codex_custom"', 'driver = "picky"').replace(
        "https://example.invalid/v1", "http://example.invalid/v1"
    )
    path = fragment(mmo_env.config_dir, "f.toml", text)
    assert f"{path}: routes.header_route: picky routes need an https base_url" in catalog_error(
        mmo_env.config_dir
    )
    path.write_text(text.replace("http://", "https://"), encoding="utf-8")
    assert (
        f"{path}: models.header_route__header_model: picky routes only serve picky models"
        in catalog_error(mmo_env.config_dir)
    )
    path.write_text(
        text.replace("http://", "https://").replace('maker = "example"', 'maker = "picky"'),
        encoding="utf-8",
    )
    assert load_catalog(mmo_env.config_dir).route("header_route").driver == "picky"

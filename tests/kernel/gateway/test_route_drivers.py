"""codex_custom and codex_builtin: validation, availability and rendered Codex config."""

from __future__ import annotations

import pytest
from support.gateway_harness import make_model, make_route

from mmo_kernel.config.catalog import Model, ProviderRouting, Route
from mmo_kernel.config.catalog_load import load_catalog
from mmo_kernel.errors import DriverConfigError
from mmo_kernel.plugin.manager import get_driver

GATEWAY = "http://127.0.0.1:4567"


def custom():
    return get_driver("route_drivers", "codex_custom")


def builtin():
    return get_driver("route_drivers", "codex_builtin")


def header_route(**fields) -> Route:
    return make_route("header_route", "openai_responses", "https://example.invalid/v1",
                      credential_env="EXAMPLE_API_KEY",
                      env_http_headers={"X-Secret": "EXAMPLE_HEADER_SECRET"}, **fields)


def test_provider_config_points_at_the_gateway_and_names_env_vars_only(mmo_env):
    route = header_route(options={"stream_max_retries": 2})
    model = make_model("header_route", "header_model")
    config = custom().provider_config(route, model, GATEWAY + "/")
    assert config == {
        "model": "header_route__header_model",
        "model_provider": "header_route",
        "model_providers": {"header_route": {
            "name": "header_route test route",
            "base_url": f"{GATEWAY}/routes/header_route/v1",
            "wire_api": "responses",
            "env_http_headers": {"X-Secret": "EXAMPLE_HEADER_SECRET"},
            "stream_max_retries": 2}}}
    faulted = custom().provider_config(route, model, GATEWAY, fault="timeout")
    assert faulted["model_providers"]["header_route"]["http_headers"] == {
        "X-MMO-Route-Fault": "timeout"}
    with pytest.raises(ValueError, match="must be one of"):
        custom().provider_config(route, model, GATEWAY, fault="flood")


def test_env_names_and_direct_header_envs():
    route = header_route()
    assert custom().env_names(route) == ["EXAMPLE_API_KEY", "EXAMPLE_HEADER_SECRET"]
    assert custom().direct_header_envs(route) == ["EXAMPLE_HEADER_SECRET"]


def test_availability_reports_the_missing_credential(mmo_env, monkeypatch):
    route = header_route()
    assert custom().availability(route, {}) == {
        "available": False, "reason": "missing credential EXAMPLE_API_KEY"}
    assert custom().availability(route, {"EXAMPLE_API_KEY": "k"}) == {
        "available": False, "reason": "missing credential EXAMPLE_HEADER_SECRET"}
    creds = mmo_env.config_dir / "credentials.env"
    creds.write_text("EXAMPLE_HEADER_SECRET=from-file\n")
    creds.chmod(0o600)
    assert custom().availability(route, {"EXAMPLE_API_KEY": "k"}) == {"available": True}
    open_route = make_route("local_llm", "openai_chat", "http://127.0.0.1:8080/v1")
    assert custom().availability(open_route, {}) == {"available": True}


@pytest.mark.parametrize(("fields", "message"), [
    ({"base_url": None}, "require base_url"),
    ({"base_url": "https://user:pw@example.invalid/v1"}, "must not embed credentials"),
    ({"base_url": "https://example.invalid/v1?key=1"}, "query or fragment"),
    ({"env_http_headers": {"Authorization": "TOKEN_ENV"}}, "not a header a route may set"),
    ({"options": {"bogus": 1}}, "bogus"),
    ({"options": {"max_output_tokens": 0}}, "max_output_tokens"),
])
def test_invalid_custom_routes_are_rejected(fields, message):
    base = {"base_url": "https://example.invalid/v1"} | fields
    route = Route(id="bad_route", name="Bad", driver="codex_custom", api_operator="x",
                  access_product="x", wire_protocol="openai_chat", **base)
    with pytest.raises(DriverConfigError, match=message):
        custom().validate_route(route, "catalog.d/x.toml: routes.bad_route")


def test_reserved_provider_id_and_model_checks():
    route = make_route("openai", "openai_chat", "https://x.invalid/v1")
    with pytest.raises(DriverConfigError, match="reserved"):
        custom().validate_route(route, "w")
    responses_route = header_route()
    routed = Model(id="header_route__m", route="header_route", upstream_id="m", maker="x",
                   provider_routing=ProviderRouting(only=["a"]))
    with pytest.raises(DriverConfigError, match="only sent on openai_chat"):
        custom().validate_model(routed, responses_route, "w")


def test_builtin_catalog_routes_validate_with_these_drivers(mmo_env):
    catalog = load_catalog()
    assert catalog.route("openrouter_openai_chat").driver == "codex_custom"
    assert catalog.route("codex_chatgpt_builtin").driver == "codex_builtin"


def test_codex_builtin_renders_no_provider_and_needs_auth_json(mmo_env):
    route = Route(id="codex_chatgpt_builtin", name="Codex login", driver="codex_builtin",
                  api_operator="openai", access_product="chatgpt", billing_mode="subscription")
    model = Model(id="codex_chatgpt_builtin__gpt_5_codex", route=route.id,
                  upstream_id="gpt-5-codex", maker="openai")
    assert builtin().provider_config(route, model, GATEWAY) == {"model": "gpt-5-codex"}
    faulted = builtin().provider_config(route, model, GATEWAY, fault="rate_limit")
    assert faulted["model_providers"][route.id]["http_headers"] == {
        "X-MMO-Route-Fault": "rate_limit"}
    assert builtin().availability(route, {}) == {"available": True}  # mmo_env wrote auth.json
    (mmo_env.codex_home / "auth.json").unlink()
    assert builtin().availability(route, {}) == {
        "available": False, "reason": "missing credential codex login (auth.json)"}
    assert builtin().env_names(route) == [] and builtin().direct_header_envs(route) == []
    with pytest.raises(DriverConfigError, match="no base_url"):
        builtin().validate_route(route.model_copy(update={"base_url": "https://x.invalid"}), "w")


def documented_fragment() -> str:
    """The catalog fragment docs/routes.md shows under "Adding a provider"."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[3] / "docs" / "routes.md").read_text()
    section = text.split("## Adding a provider with a catalog fragment", 1)[1]
    return re.search(r"```toml\n(.*?)```", section, re.S).group(1)


def test_the_documented_fragment_loads_and_its_options_reach_codex(mmo_env):
    folder = mmo_env.config_dir / "catalog.d"
    folder.mkdir()
    (folder / "acme.toml").write_text(documented_fragment(), encoding="utf-8")
    catalog = load_catalog()
    route = catalog.route("acme_chat")
    assert route.wire_protocol == "openai_chat" and route.env_http_headers == {
        "X-Acme-Org": "ACME_ORG_ID"}
    options = custom().validate_options(route.options, "routes.acme_chat.options")
    assert (options.stream_max_retries, options.request_max_retries) == (2, 2)
    assert options.static_headers == {"HTTP-Referer": "https://example.org"}
    model = catalog.model("acme_chat__coder")
    assert model.reasoning_levels == ["low", "high"]
    provider = custom().provider_config(route, model, GATEWAY)["model_providers"]["acme_chat"]
    assert (provider["stream_max_retries"], provider["request_max_retries"],
            provider["stream_idle_timeout_ms"]) == (2, 2, 300000)
    assert custom().availability(route, {"ACME_API_KEY": "sk-acme-0123456789",
                                         "ACME_ORG_ID": "org-1"}) == {"available": True}

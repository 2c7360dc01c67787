"""The ``scripted`` route driver as the catalog, agent homes and the gateway use it."""

from __future__ import annotations

import json

import pytest
import tomlkit
from mmo_scripted.codex_catalog import codex_model_catalog
from mmo_scripted.driver import ScriptedRoute
from plugins.scripted.transcript import recorded_body

from mmo_kernel.config.catalog import Model, Route
from mmo_kernel.errors import DriverConfigError
from mmo_kernel.gateway.errors import GatewayError
from mmo_kernel.plugin.manager import get_driver

ROUTE = {"id": "local_scripted", "name": "Local scripted", "driver": "scripted",
         "api_operator": "mmo", "access_product": "local", "billing_mode": "none"}
MODEL = Model(id="local_scripted__scripted", route="local_scripted", upstream_id="scripted",
              maker="mmo", modalities=["text", "image"], context_window=200000)


def frames(chunks) -> list[dict]:
    out = []
    for block in b"".join(chunks).decode().split("\n\n"):
        if block:
            out.append(json.loads(block.split("\n")[1][len("data: "):]))
    return out


def test_entry_point_resolves_to_the_driver():
    assert isinstance(get_driver("route_drivers", "scripted"), ScriptedRoute)


def test_builtin_route_is_valid_and_always_available():
    driver = ScriptedRoute()
    route = Route(**ROUTE)
    driver.validate_route(route, "catalog.toml: routes.local_scripted")
    assert driver.availability(route, {}) == {"available": True}
    assert driver.env_names(route) == []


@pytest.mark.parametrize(("extra", "phrase"), [
    ({"wire_protocol": "openai_chat"}, "wire_protocol must be 'openai_responses'"),
    ({"base_url": "http://x"}, "base_url is not used by the scripted driver"),
    ({"credential_env": "KEY"}, "credential_env is not used by the scripted driver"),
    ({"env_http_headers": {"X-A": "A"}}, "env_http_headers is not used"),
    ({"id": "openai"}, "route id 'openai' is reserved by Codex"),
])
def test_misconfigured_routes_are_rejected_with_where(extra, phrase):
    with pytest.raises(DriverConfigError) as info:
        ScriptedRoute().validate_route(Route(**{**ROUTE, **extra}), "cat.toml: routes.x")
    assert str(info.value).startswith("cat.toml: routes.x: ") and phrase in str(info.value)


def test_unknown_driver_options_are_rejected():
    with pytest.raises(DriverConfigError, match="cat.toml: routes.x: speed: Extra inputs"):
        ScriptedRoute.validate_options({"speed": 2}, "cat.toml: routes.x")


def test_provider_config_points_codex_at_the_gateway_route_without_secrets():
    config = ScriptedRoute().provider_config(Route(**ROUTE), MODEL, "http://127.0.0.1:4100/")
    assert config == {
        "model": "local_scripted__scripted",
        "model_provider": "local_scripted",
        "model_providers": {"local_scripted": {
            "name": "Local scripted",
            "base_url": "http://127.0.0.1:4100/routes/local_scripted/v1",
            "wire_api": "responses"}},
    }
    assert "env_key" not in tomlkit.dumps(config)


def test_serve_responses_streams_one_item_and_usage():
    body = recorded_body("plain_first")
    events = frames(ScriptedRoute().serve_responses(Route(**ROUTE), MODEL, body, {}))
    kinds = [e["type"] for e in events]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    done = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    assert [d["content"][0]["text"] for d in done] == ["local_scripted reply to: say hi"]
    usage = events[-1]["response"]["usage"]
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"] > 0


@pytest.mark.parametrize(("body", "phrase"), [
    ([1], "the request body must be a JSON object"),
    ({"model": "m"}, "input: Field required"),
    ({"model": "m", "input": "hi"}, "input: Input should be a valid list"),
])
def test_a_body_that_is_not_a_responses_request_is_a_400(body, phrase):
    with pytest.raises(GatewayError) as info:
        ScriptedRoute().serve_responses(Route(**ROUTE), MODEL, body, {})
    assert info.value.status == 400 and phrase in info.value.message


def test_codex_catalog_entry_carries_the_model():
    (entry,) = codex_model_catalog([MODEL])["models"]
    assert entry["slug"] == "local_scripted__scripted"
    assert entry["apply_patch_tool_type"] == "freeform" and entry["shell_type"] == "unified_exec"
    assert entry["input_modalities"] == ["text", "image"] and entry["context_window"] == 200000

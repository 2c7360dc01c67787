"""Gateway endpoints, refusals and injected faults at the HTTP level."""

from __future__ import annotations

import json

import pytest
from support.gateway_harness import make_model, make_route

from mmo_kernel.gateway import gateway_models
from mmo_kernel.gateway.faults import FAULT_HEADER, ROUTE_FAULTS

EXPECTED_FAULTS = {"rate_limit": (429, "usage_limit_reached"),
                   "auth_error": (401, "authentication_error"),
                   "server_error": (500, "server_error"),
                   "timeout": (504, "server_error"),
                   "transport": (502, "server_error")}


def body(model_id: str) -> dict:
    return {"model": model_id, "input": "hi", "stream": True}


def test_models_endpoints_list_gateway_model_ids(serve, upstream):
    routes = [make_route("ra", "openai_chat", upstream.url), make_route("rb", "openai_chat",
                                                                         upstream.url)]
    models = [make_model("ra", "x"), make_model("ra", "y"), make_model("rb", "z")]
    with serve(routes, models) as gw:
        everything = gw.request("GET", "/v1/models").json()
        per_route = gw.request("GET", "/routes/ra/v1/models").json()
        health = gw.request("GET", "/health").json()
    assert [m["id"] for m in everything["data"]] == ["ra__x", "ra__y", "rb__z"]
    assert everything["object"] == "list"
    assert [m["id"] for m in per_route["data"]] == ["ra__x", "ra__y"]
    assert health["service"] == "mmo-gateway"
    assert upstream.seen == []


def test_gateway_models_reads_the_snapshot_manifest(mmo_env):
    snap = mmo_env.state_dir / "snapshots" / "abc123"
    snap.mkdir(parents=True)
    (snap / "manifest.json").write_text(json.dumps({"route_ids": {
        "root": "local_scripted__scripted", "worker": "ra__x", "reviewer": "ra__x"}}))
    assert gateway_models("abc123") == {"object": "list", "data": [
        {"id": "local_scripted__scripted", "object": "model"}, {"id": "ra__x", "object": "model"}]}
    with pytest.raises(FileNotFoundError, match="unknown snapshot"):
        gateway_models("missing1")
    with pytest.raises(ValueError, match="alphanumeric"):
        gateway_models("../etc")


def test_unknown_route_model_and_bad_json_are_refused_without_upstream_calls(serve, upstream):
    route = make_route("ra", "openai_chat", upstream.url)
    with serve([route], [make_model("ra"), make_model("other")]) as gw:
        no_route = gw.responses("nope", body("ra__m1"))
        no_model = gw.responses("ra", body("ra__zzz"))
        wrong_route = gw.responses("ra", body("other__m1"))
        bad = gw.request("POST", "/routes/ra/v1/responses", None, {})
        raw = gw.request("GET", "/nowhere")
    assert no_route.status == 404 and "unknown route 'nope'" in no_route.json()["error"]["message"]
    assert no_model.status == 404
    assert "unknown model 'ra__zzz'" in no_model.json()["error"]["message"]
    assert wrong_route.status == 404
    assert bad.status == 400 and raw.status == 404
    assert upstream.seen == []


def test_missing_credential_fails_fast_as_terminal_auth_error(serve, upstream, monkeypatch):
    monkeypatch.delenv("ABSENT_KEY", raising=False)
    route = make_route("ra", "openai_chat", upstream.url, credential_env="ABSENT_KEY")
    with serve([route], [make_model("ra")]) as gw:
        res = gw.responses("ra", body("ra__m1"))
        [record] = gw.log()
    assert res.status == 401
    assert res.json()["error"]["message"] == "missing credential ABSENT_KEY"
    assert record["status"] == 401 and record["error"] == "missing credential ABSENT_KEY"
    assert upstream.seen == []


@pytest.mark.parametrize("fault", ROUTE_FAULTS)
def test_injected_fault_answers_without_touching_upstream(serve, upstream, monkeypatch, fault):
    monkeypatch.setenv("K", "sk-0123456789")
    route = make_route("ra", "openai_chat", upstream.url, credential_env="K")
    with serve([route], [make_model("ra")]) as gw:
        res = gw.responses("ra", body("ra__m1"), **{FAULT_HEADER: fault})
        [record] = gw.log()
    status, kind = EXPECTED_FAULTS[fault]
    assert (res.status, res.json()["error"]["type"]) == (status, kind)
    assert f"injected route fault: {fault}" in res.json()["error"]["message"]
    assert record["fault"] == fault and record["status"] == status
    assert upstream.seen == []


def test_unknown_fault_header_is_a_bad_request(serve, upstream):
    with serve([make_route("ra", "openai_chat", upstream.url)], [make_model("ra")]) as gw:
        res = gw.responses("ra", body("ra__m1"), **{FAULT_HEADER: "meteor"})
    assert res.status == 400 and "must be one of" in res.json()["error"]["message"]


def test_unreachable_upstream_is_a_retryable_502(serve, monkeypatch):
    monkeypatch.setenv("K", "sk-0123456789")
    route = make_route("ra", "openai_chat", "http://127.0.0.1:9/v1", credential_env="K")
    with serve([route], [make_model("ra")]) as gw:
        res = gw.responses("ra", body("ra__m1"))
    assert res.status == 502 and "cannot reach upstream" in res.json()["error"]["message"]

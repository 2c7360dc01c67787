"""route_telemetry reads both OpenRouter routing shapes (spec 08)."""

from __future__ import annotations

import json

from mmo_kernel.gateway import route_telemetry

USAGE = {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}


def test_routing_object_with_full_retry_telemetry():
    meta = {"routing": {"serving_provider_slug": "deepinfra",
                        "serving_endpoint_tag": "deepinfra/fp8",
                        "attempt": 2, "retry_count": 1, "fallback_index": 1}}
    assert route_telemetry(meta, USAGE, None) == {
        "complete": True, "actual_serving_provider_slugs": ["deepinfra"],
        "actual_serving_endpoint_tags": ["deepinfra/fp8"], "successful_attempt": 2,
        "retries": 1, "fallback_index": 1, "retry_telemetry_complete": True}


def test_only_an_attempt_number_gives_fallback_attempt_minus_one():
    meta = {"routing": {"serving_provider_slug": "together", "attempt": 3}}
    result = route_telemetry(meta, USAGE, None)
    assert result["fallback_index"] == 2 and result["retries"] is None
    assert result["retry_telemetry_complete"] is False and result["complete"] is True


def test_openrouter_metadata_shape():
    meta = {"openrouter_metadata": {
        "attempt": 2,
        "endpoints": {"available": [{"provider": "fireworks", "tag": "fireworks/a"},
                                    {"provider": "novita", "tag": "novita/b", "selected": True}]},
        "attempts": [{"provider": "fireworks", "status": 503}, {"provider": "novita",
                                                                "status": 200}]}}
    assert route_telemetry(meta, USAGE, None) == {
        "complete": True, "actual_serving_provider_slugs": ["novita"],
        "actual_serving_endpoint_tags": ["novita/b"], "successful_attempt": 2,
        "retries": None, "fallback_index": 1, "retry_telemetry_complete": False}


def test_without_a_serving_provider_nothing_is_complete(tmp_path):
    assert route_telemetry({}, USAGE, tmp_path / "missing.jsonl") == {
        "complete": False, "actual_serving_provider_slugs": [],
        "actual_serving_endpoint_tags": [], "successful_attempt": None, "retries": None,
        "fallback_index": None, "retry_telemetry_complete": False}
    meta = {"routing": {"attempt": 1}}
    result = route_telemetry(meta, USAGE, None)
    assert result["complete"] is False and result["actual_serving_provider_slugs"] == []


def test_metadata_recorded_in_a_request_log_is_read_from_events_path(tmp_path):
    log = tmp_path / "requests.jsonl"
    rows = [{"route": "r", "provider_metadata": {"routing": {
                "serving_provider_slug": "a", "serving_endpoint_tag": "a/1", "attempt": 1,
                "retry_count": 0, "fallback_index": 0}}},
            {"route": "r", "provider_metadata": None},
            {"route": "r", "provider_metadata": {"routing": {
                "serving_provider_slug": "b", "serving_endpoint_tag": "b/2", "attempt": 2,
                "retry_count": 1, "fallback_index": 1}}}]
    log.write_text("\n".join(json.dumps(r) for r in rows) + "\n{torn")
    result = route_telemetry(None, USAGE, log)
    assert result["actual_serving_provider_slugs"] == ["a", "b"]
    assert result["actual_serving_endpoint_tags"] == ["a/1", "b/2"]
    assert (result["successful_attempt"], result["retries"], result["fallback_index"]) == (2, 1, 1)
    assert result["retry_telemetry_complete"] is True

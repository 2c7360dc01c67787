"""The ``scripted`` route driver: the offline model ``local_scripted`` inside the gateway."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from mmo_kernel.errors import DriverConfigError
from mmo_kernel.gateway import bad_request, fault_headers
from mmo_kernel.plugin import RouteDriver

RESERVED_PROVIDER_IDS = frozenset({"openai", "ollama", "lmstudio", "amazon-bedrock"})
"""Codex keeps these ``model_providers`` ids for itself (codex-app-server.md §6)."""


class ScriptedRoute(RouteDriver):
    """The offline deterministic model ``local_scripted`` served by the gateway."""

    name = "scripted"
    codex_reads_model_catalog = True

    def validate_route(self, route: Any, where: str) -> None:
        """The model runs inside the gateway: no endpoint, no credential, Responses only."""
        if route.wire_protocol != "openai_responses":
            raise DriverConfigError(
                where,
                f"wire_protocol must be 'openai_responses' for the scripted driver, "
                f"got {route.wire_protocol!r}",
            )
        for key in ("base_url", "credential_env"):
            if getattr(route, key) is not None:
                raise DriverConfigError(
                    where, f"{key} is not used by the scripted driver (the model runs "
                    "inside the gateway); remove it"
                )
        if route.env_http_headers:
            raise DriverConfigError(where, "env_http_headers is not used by the scripted driver")
        if route.id in RESERVED_PROVIDER_IDS:
            raise DriverConfigError(
                where, f"route id {route.id!r} is reserved by Codex as a model provider id"
            )

    def availability(self, route: Any, credentials: Mapping[str, str]) -> dict[str, Any]:
        """Always available: no credential and no network are involved."""
        return {"available": True}

    def provider_config(self, route: Any, model: Any, gateway_url: str,
                        fault: str | None = None) -> dict[str, Any]:
        """Codex config keys selecting ``model`` through the gateway (no secrets, no env).

        An injected ``fault`` rides as a header the gateway answers itself.
        """
        base = gateway_url.rstrip("/")
        provider: dict[str, Any] = {
            "name": route.name,
            "base_url": f"{base}/routes/{route.id}/v1",
            "wire_api": "responses",
        }
        if fault is not None:
            provider["http_headers"] = fault_headers(fault)
        return {"model": model.id, "model_provider": route.id,
                "model_providers": {route.id: provider}}

    def model_catalog_entry(self, route: Any, model: Any) -> dict[str, Any]:
        """Listing the scripted slug gives it Codex's full tool set (``apply_patch``)."""
        from .codex_catalog import codex_model_info

        return codex_model_info(model)

    def env_names(self, route: Any) -> list[str]:
        return []

    def serve_responses(
        self, route: Any, model: Any, body: dict[str, Any], env: Mapping[str, str]
    ) -> Iterator[bytes]:
        """Answer one request; a body that is not a Responses request is a 400."""
        from .model import BadRequest, decide  # the model loads with the first request
        from .reply import reply_events

        try:
            reply = decide(body)
        except BadRequest as exc:
            raise bad_request(f"local_scripted: {exc}") from None
        model_id = getattr(model, "id", None) or str(body.get("model", ""))
        return reply_events(reply, model_id, body)

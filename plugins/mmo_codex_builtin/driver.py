"""The ``codex_builtin`` driver: Codex's own ChatGPT/OpenAI login.

Nothing provider-specific is rendered: the agent's home gets the user's
``auth.json`` (linked or copied by the session) and Codex talks to OpenAI
itself, so the gateway never serves these routes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mmo_kernel.errors import DriverConfigError
from mmo_kernel.gateway import GatewayError, error_body, fault_headers, user_codex_home
from mmo_kernel.plugin import RouteDriver

MISSING_LOGIN = "missing credential codex login (auth.json)"


class CodexBuiltinRoute(RouteDriver):
    """Codex's own ChatGPT/OpenAI login: the agent's home links the user's auth.json."""

    name = "codex_builtin"
    uses_codex_login = True

    def validate_route(self, route: Any, where: str) -> None:
        self.validate_options(route.options, f"{where}.options")
        if route.wire_protocol != "openai_responses":
            raise DriverConfigError(where, "codex_builtin routes speak openai_responses only")
        for key in ("base_url", "credential_env"):
            if getattr(route, key):
                raise DriverConfigError(where, f"codex_builtin routes take no {key}: Codex uses "
                                        "its own login")
        if route.env_http_headers:
            raise DriverConfigError(where, "codex_builtin routes take no env_http_headers")

    def validate_model(self, model: Any, route: Any, where: str) -> None:
        if model.provider_routing is not None:
            raise DriverConfigError(where, "provider_routing does not apply to codex_builtin")

    def availability(self, route: Any, credentials: Mapping[str, str]) -> dict[str, Any]:
        """Available when the user's ``CODEX_HOME/auth.json`` exists."""
        if (user_codex_home() / "auth.json").is_file():
            return {"available": True}
        return {"available": False, "reason": MISSING_LOGIN}

    def provider_config(self, route: Any, model: Any, gateway_url: str,
                        fault: str | None = None) -> dict[str, Any]:
        """Only the model slug: Codex's built-in ``openai`` provider and login.

        With an injected ``fault`` the agent is pointed at the gateway instead,
        which answers every request with that fault (nothing reaches OpenAI).
        """
        if fault is None:
            return {"model": model.upstream_id}
        base_url = f"{gateway_url.rstrip('/')}/routes/{route.id}/v1"
        provider = {"name": route.name, "base_url": base_url, "wire_api": "responses",
                    "http_headers": fault_headers(fault)}
        return {"model": model.id, "model_provider": route.id,
                "model_providers": {route.id: provider}}

    def model_catalog_entry(self, route: Any, model: Any) -> dict[str, Any]:
        """Codex knows these models by their upstream slug (the catalog is not read)."""
        return {**super().model_catalog_entry(route, model), "slug": model.upstream_id}

    def env_names(self, route: Any) -> list[str]:
        return []

    def direct_header_envs(self, route: Any) -> list[str]:
        return []

    def serve_responses(self, route: Any, model: Any, body: dict[str, Any],
                        env: Mapping[str, str]) -> Any:
        raise GatewayError(404, error_body(
            f"route {route.id!r} uses Codex's own login and is not served by the gateway",
            "not_found_error"))

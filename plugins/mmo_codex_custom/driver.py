"""The ``codex_custom`` driver: any external provider, reached by Codex through the gateway.

Decision (docs/routes.md): the agent never holds the upstream API key. Its
provider block has no ``env_key``; the gateway adds the credential
(``credential_env``, from the environment or credentials.env) to each
upstream request. ``env_http_headers`` do name env vars that reach the agent
(``direct_header_envs``): Codex sends those headers, the gateway forwards
them, and falls back to its own environment/credentials.env when absent.
"""

from __future__ import annotations

import copy
import re
from collections.abc import AsyncGenerator, Iterator, Mapping
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field

from mmo_kernel import gateway  # the kit's names load on first use
from mmo_kernel.errors import DriverConfigError
from mmo_kernel.plugin import RouteDriver

from .endpoints import ENDPOINTS

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
HEADER_NAME = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")
RESERVED_PROVIDER_IDS = frozenset({"openai", "ollama", "lmstudio", "amazon-bedrock"})
FORBIDDEN_HEADERS = frozenset({"authorization", "x-api-key", "host", "content-length",
                               "content-type", "connection", "transfer-encoding"})
_validated: dict[int, tuple[Any, CustomRouteOptions]] = {}


class CustomRouteOptions(BaseModel):
    """``[routes.<id>.options]`` of a ``codex_custom`` route."""

    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)

    auth_header: Literal["bearer", "x-api-key"] | None = None
    """How the credential is sent upstream; default bearer (x-api-key for anthropic_messages)."""
    max_output_tokens: int = Field(default=8192, gt=0)
    """``max_tokens`` for anthropic_messages when Codex sets none (the API requires it)."""
    upstream_timeout_seconds: float = Field(default=300.0, gt=0)
    static_headers: dict[str, str] = Field(default_factory=dict)
    """Non-secret headers sent upstream (e.g. OpenRouter's ``HTTP-Referer``)."""
    request_max_retries: int | None = Field(default=None, ge=0, le=100)
    stream_max_retries: int | None = Field(default=None, ge=0, le=100)
    stream_idle_timeout_ms: int | None = Field(default=None, gt=0)


class CodexCustomRoute(RouteDriver):
    """Any external provider, reached by Codex through the local gateway."""

    name = "codex_custom"
    Options = CustomRouteOptions

    # ----------------------------------------------------------- catalog --

    def validate_route(self, route: Any, where: str) -> None:
        options = self.validate_options(route.options, f"{where}.options")
        assert isinstance(options, CustomRouteOptions)
        if route.id in RESERVED_PROVIDER_IDS:
            raise DriverConfigError(where, f"route id {route.id!r} is reserved by Codex")
        if not route.base_url:
            raise DriverConfigError(where, "codex_custom routes require base_url")
        if route.wire_protocol not in ENDPOINTS:
            raise DriverConfigError(where, f"unsupported wire_protocol {route.wire_protocol!r}")
        _check_url(route.base_url, where)
        if route.credential_env is not None and not ENV_NAME.match(route.credential_env):
            raise DriverConfigError(where, f"credential_env {route.credential_env!r} is not an "
                                    "environment variable name")
        for header, env in route.env_http_headers.items():
            if not _settable(header):
                raise DriverConfigError(where, f"env_http_headers: {header!r} is not a header "
                                        "a route may set")
            if not ENV_NAME.match(env):
                raise DriverConfigError(where, f"env_http_headers.{header}: {env!r} is not an "
                                        "environment variable name")
        for header in options.static_headers:
            if not _settable(header):
                raise DriverConfigError(where, f"options.static_headers: {header!r} is not a "
                                        "header a route may set")

    def validate_model(self, model: Any, route: Any, where: str) -> None:
        if model.route != route.id:
            raise DriverConfigError(
                where, f"model belongs to route {model.route!r}, not {route.id!r}")
        if not model.upstream_id.strip():
            raise DriverConfigError(where, "upstream_id must not be empty")
        if model.provider_routing is not None and route.wire_protocol != "openai_chat":
            raise DriverConfigError(where, "provider_routing is only sent on openai_chat routes")
        if model.default_reasoning and model.default_reasoning not in model.reasoning_levels:
            raise DriverConfigError(where, f"default_reasoning {model.default_reasoning!r} is "
                                    "not one of reasoning_levels")

    # ------------------------------------------------------ availability --

    def availability(self, route: Any, credentials: Mapping[str, str]) -> dict[str, Any]:
        for name in self.env_names(route):
            if not (credentials.get(name) or gateway.credential_value(name, environ=credentials)):
                return {"available": False, "reason": f"missing credential {name}"}
        return {"available": True}

    def env_names(self, route: Any) -> list[str]:
        """The credential first, then the header env vars (sorted, no duplicates)."""
        names = [route.credential_env] if route.credential_env else []
        return names + [n for n in self.direct_header_envs(route) if n not in names]

    def direct_header_envs(self, route: Any) -> list[str]:
        """Env vars Codex itself reads for ``env_http_headers``: they must reach the agent."""
        return sorted(set(route.env_http_headers.values()))

    # ------------------------------------------------------ codex config --

    def provider_config(self, route: Any, model: Any, gateway_url: str,
                        fault: str | None = None) -> dict[str, Any]:
        """Codex config keys selecting ``model`` through the gateway; never a secret value."""
        options = self.validate_options(route.options, f"routes.{route.id}.options")
        provider: dict[str, Any] = {
            "name": route.name,
            "base_url": f"{gateway_url.rstrip('/')}/routes/{route.id}/v1",
            "wire_api": "responses",
        }
        if route.env_http_headers:
            provider["env_http_headers"] = dict(sorted(route.env_http_headers.items()))
        if fault is not None:
            provider["http_headers"] = gateway.fault_headers(fault)
        for key in ("request_max_retries", "stream_max_retries", "stream_idle_timeout_ms"):
            value = getattr(options, key)
            if value is not None:
                provider[key] = value
        return {"model": model.id, "model_provider": route.id,
                "model_providers": {route.id: provider}}

    # ----------------------------------------------------------- gateway --

    def serve_responses(self, route: Any, model: Any, body: dict[str, Any],
                        env: Mapping[str, str]) -> Iterator[Any]:
        """The blocking path (third-party embedders); the gateway uses the async one."""
        from .serving import serve_blocking  # the wires load with the first request

        return serve_blocking(route, model, body, self.options(route),
                              self.upstream_headers(route, env))

    def serve_responses_async(self, route: Any, model: Any, body: dict[str, Any],
                              env: Mapping[str, str]) -> AsyncGenerator[Any, None]:
        """The same answer on the gateway's event loop (no worker thread, pooled upstream)."""
        from .serving import serve_async

        return serve_async(route, model, body, self.options(route),
                           self.upstream_headers(route, env))

    def upstream_headers(self, route: Any, env: Mapping[str, str]) -> dict[str, str]:
        """The route's static headers and the secret ones the gateway adds from ``env``."""
        options = self.options(route)
        return {**options.static_headers, **self._secret_headers(route, options, env)}

    def options(self, route: Any) -> CustomRouteOptions:
        """Validated options, remembered per options mapping while its content is unchanged.

        Validation per request was measurable; comparing the mapping with a
        snapshot of it is not, and still notices a mapping edited in place.
        """
        raw = route.options
        cached = _validated.get(id(raw))
        if cached is not None and cached[0] == raw:
            return cached[1]
        options = self.validate_options(raw, f"routes.{route.id}.options")
        assert isinstance(options, CustomRouteOptions)
        if len(_validated) >= 256:
            _validated.clear()
        _validated[id(raw)] = (copy.deepcopy(raw), options)
        return options

    def _secret_headers(self, route: Any, options: CustomRouteOptions,
                        env: Mapping[str, str]) -> dict[str, str]:
        headers: dict[str, str] = {}
        for header, name in route.env_http_headers.items():
            value = env.get(name)
            if not value:
                raise _missing_credential(name)
            headers[header] = value
        if route.credential_env:
            key = env.get(route.credential_env)
            if not key:
                raise _missing_credential(route.credential_env)
            style = options.auth_header or (
                "x-api-key" if route.wire_protocol == "anthropic_messages" else "bearer")
            if style == "x-api-key":
                headers["x-api-key"] = key
            else:
                headers["Authorization"] = f"Bearer {key}"
        return headers


def _missing_credential(name: str) -> Exception:
    return gateway.GatewayError(401, gateway.error_body(
        f"missing credential {name}", "authentication_error", "missing_credential"))


def _settable(header: str) -> bool:
    """A header a route may send upstream: not the gateway's own, not MMO's ``X-MMO-*``."""
    return (bool(HEADER_NAME.match(header)) and header.lower() not in FORBIDDEN_HEADERS
            and not gateway.is_mmo_header(header))


def _check_url(url: str, where: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise DriverConfigError(where, f"base_url {url!r} must be an http(s) URL with a host")
    if parts.username or parts.password:
        raise DriverConfigError(where, "base_url must not embed credentials")
    if parts.query or parts.fragment:
        raise DriverConfigError(where, "base_url must not have a query or fragment")

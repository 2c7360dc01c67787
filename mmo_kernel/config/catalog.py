"""Catalog entries: routes (ways to reach a provider) and models (spec 02).

The entry models are the contract other parts build on (the gateway, agent
homes); ``catalog_load`` reads the built-in catalog and the user's
``catalog.d`` fragments into a ``Catalog``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

WireProtocol = Literal["openai_responses", "openai_chat", "anthropic_messages"]
Modality = Literal["text", "image"]

REASONING_EFFORTS: tuple[str, ...] = ("minimal", "low", "medium", "high", "xhigh", "max")
"""Every effort a model may list, weakest first; "none" is spelled as an empty list."""

ROUTE_ID_RE = re.compile(r"^[a-z0-9]+(?:_[a-z0-9]+)*$")
"""Route ids: lower snake case without ``__`` (that separates route and slug in model keys)."""
MODEL_SLUG_RE = re.compile(r"^[a-z0-9]+(?:_[a-z0-9]+)*$")
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
HEADER_NAME_RE = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")


def _text_only() -> list[Modality]:
    return ["text"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


def _unique(values: list[str], what: str) -> list[str]:
    if len(set(values)) != len(values):
        raise ValueError(f"{what} lists a value twice: {values}")
    return values


class ProviderRouting(_Strict):
    """OpenRouter provider-routing policy carried by a model entry."""

    only: list[str] = Field(default_factory=list)
    allow_fallbacks: bool = True


class Price(_Strict):
    """``[models.<key>.price]``: what the provider charges, in USD per million tokens.

    Absent on a model means the price is unknown: costs then show as unknown,
    never as a guess. ``cached_input`` is the rate for input tokens served from
    the provider's prompt cache; without it they cost ``input``.
    """

    input: float
    output: float
    cached_input: float | None = None

    @model_validator(mode="before")
    @classmethod
    def _table(cls, value: Any) -> Any:
        if not isinstance(value, (dict, Price)):
            raise ValueError(
                "must be a table of USD per million tokens, e.g. "
                "price = { input = 3.0, output = 15.0, cached_input = 0.3 }"
            )
        return value

    @field_validator("input", "output", "cached_input")
    @classmethod
    def _rate(cls, value: float | None) -> float | None:
        if value is not None and (not math.isfinite(value) or value < 0):
            raise ValueError(
                f"{value!r} is not a price (a non-negative number of USD per million tokens)"
            )
        return value


class Route(_Strict):
    """``[routes.<id>]``: one way to reach a model provider."""

    id: str
    name: str
    driver: str
    api_operator: str
    access_product: str
    wire_protocol: WireProtocol = "openai_responses"
    billing_mode: Literal["api", "subscription", "none"] = "api"
    base_url: str | None = None
    credential_env: str | None = None
    transport_modalities: list[Modality] = Field(default_factory=_text_only)
    preserves_tool_media: bool = False
    tool_result_modalities: list[Modality] = Field(default_factory=_text_only)
    env_http_headers: dict[str, str] = Field(default_factory=dict)
    default_model: str | None = None
    """Model key a binding to this route id selects when the route has several models."""
    options: dict[str, Any] = Field(default_factory=dict)
    """``[routes.<id>.options]``: driver-specific keys, validated by the driver's ``Options``."""

    @field_validator("id")
    @classmethod
    def _route_id(cls, value: str) -> str:
        if not ROUTE_ID_RE.match(value):
            raise ValueError(f"route id {value!r} must be lower snake case without '__'")
        return value

    @field_validator("base_url")
    @classmethod
    def _base_url(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"^https?://[^\s/]+", value):
            raise ValueError(f"base_url {value!r} must be an http(s) URL")
        return value

    @field_validator("credential_env")
    @classmethod
    def _credential_env(cls, value: str | None) -> str | None:
        if value is not None and not ENV_NAME_RE.match(value):
            raise ValueError(f"credential_env {value!r} is not an environment variable name")
        return value

    @field_validator("env_http_headers")
    @classmethod
    def _headers(cls, value: dict[str, str]) -> dict[str, str]:
        for header, env in value.items():
            if not HEADER_NAME_RE.match(header):
                raise ValueError(f"env_http_headers: {header!r} is not an HTTP header name")
            if not ENV_NAME_RE.match(env):
                raise ValueError(
                    f"env_http_headers.{header}: {env!r} is not an environment variable name "
                    "(the value names a variable, never the secret itself)"
                )
        return value

    @field_validator("transport_modalities", "tool_result_modalities")
    @classmethod
    def _modalities(cls, value: list[str]) -> list[str]:
        return _unique(value, "modalities")


class Model(_Strict):
    """``[models.<route>__<slug>]``: one model reachable through a route.

    The entry key is also the model's *gateway model id*: the ``model`` Codex
    sends to the gateway and that ``GET /v1/models`` lists.
    """

    id: str
    route: str
    upstream_id: str
    maker: str
    display_name: str | None = None
    modalities: list[Modality] = Field(default_factory=_text_only)
    reasoning_levels: list[str] = Field(default_factory=list)
    default_reasoning: str | None = None
    context_window: int | None = Field(default=None, gt=0)
    provider_routing: ProviderRouting | None = None
    price: Price | None = None
    """USD per million tokens; None = unknown (see ``config.pricing``)."""

    @property
    def has_reasoning(self) -> bool:
        """Models with no reasoning levels get no effort keys in Codex config."""
        return bool(self.reasoning_levels)

    @property
    def slug(self) -> str:
        return self.id.removeprefix(f"{self.route}__")

    @field_validator("reasoning_levels")
    @classmethod
    def _levels(cls, value: list[str]) -> list[str]:
        for level in value:
            if level not in REASONING_EFFORTS:
                raise ValueError(
                    f"reasoning level {level!r} is not one of {', '.join(REASONING_EFFORTS)} "
                    "(a model without reasoning has an empty list)"
                )
        return _unique(value, "reasoning_levels")

    @field_validator("modalities")
    @classmethod
    def _model_modalities(cls, value: list[str]) -> list[str]:
        if "text" not in value:
            raise ValueError("modalities must include 'text'")
        return _unique(value, "modalities")

    @model_validator(mode="after")
    def _key_and_default(self) -> Model:
        prefix = f"{self.route}__"
        if not self.id.startswith(prefix) or not MODEL_SLUG_RE.match(self.id[len(prefix) :]):
            raise ValueError(
                f"model key {self.id!r} must be '<route>__<slug>' of its own route "
                f"(e.g. {prefix}my_model)"
            )
        if self.reasoning_levels and self.default_reasoning not in self.reasoning_levels:
            raise ValueError(
                f"default_reasoning {self.default_reasoning!r} must be one of reasoning_levels "
                f"{self.reasoning_levels}"
            )
        if not self.reasoning_levels and self.default_reasoning is not None:
            raise ValueError(
                "default_reasoning is set but reasoning_levels is empty (reasoning none)"
            )
        return self


@dataclass(frozen=True)
class Catalog:
    """The merged catalog: routes and models by id, and the file each came from."""

    routes: Mapping[str, Route]
    models: Mapping[str, Model]
    sources: Mapping[str, Path] = field(default_factory=dict)
    """``routes.<id>`` / ``models.<key>`` -> the file that defined it."""
    disabled: Mapping[str, str] = field(default_factory=dict)
    """Routes left out of an isolated load (route id -> why); their models are left out too."""
    problems: tuple[str, ...] = ()
    """Every problem an isolated load left out (``<file>: <key>: <message>``)."""

    def route(self, route_id: str) -> Route:
        try:
            return self.routes[route_id]
        except KeyError:
            if route_id in self.disabled:
                raise ValueError(
                    f"route {route_id!r} is disabled: {self.disabled[route_id]}"
                ) from None
            raise ValueError(
                f"unknown route {route_id!r}; known routes: {', '.join(sorted(self.routes))}"
            ) from None

    def model(self, key: str) -> Model:
        try:
            return self.models[key]
        except KeyError:
            route_id = key.split("__", 1)[0]
            if route_id in self.disabled:
                raise ValueError(
                    f"model {key!r} is disabled with its route {route_id!r}: "
                    f"{self.disabled[route_id]}"
                ) from None
            raise ValueError(
                f"unknown model {key!r} (not in the catalog; see `mmo catalog models`)"
            ) from None

    def route_of(self, model_key: str) -> Route:
        """The route a model key is served through."""
        return self.route(self.model(model_key).route)

    def models_of(self, route_id: str) -> list[Model]:
        return [m for key, m in sorted(self.models.items()) if m.route == route_id]

    def default_model(self, route_id: str) -> Model | None:
        """The model a binding to ``route_id`` selects: its default, or its only model."""
        route = self.route(route_id)
        if route.default_model is not None:
            return self.models[route.default_model]
        candidates = self.models_of(route_id)
        return candidates[0] if len(candidates) == 1 else None

    def entries_for(self, model_keys: Iterable[str]) -> dict[str, Any]:
        """The catalog entries a snapshot needs: those models and their routes, as JSON data."""
        models = {key: self.model(key) for key in sorted(set(model_keys))}
        route_ids = sorted({m.route for m in models.values()})
        return {
            "routes": {rid: self.routes[rid].model_dump(mode="json") for rid in route_ids},
            "models": {key: model_entry(m) for key, m in models.items()},
        }


def model_entry(model: Model) -> dict[str, Any]:
    """A model as JSON data; an unknown price is left out, so a snapshot of an unpriced
    model has the same content (and hash) it had before prices existed."""
    return model.model_dump(mode="json", exclude=None if model.price is not None else {"price"})

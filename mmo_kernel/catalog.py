"""Catalog entries: routes (ways to reach a provider) and models (spec 02)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

WireProtocol = Literal["openai_responses", "openai_chat", "anthropic_messages"]
Modality = Literal["text", "image"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class ProviderRouting(_Strict):
    """OpenRouter provider-routing policy carried by a model entry."""

    only: list[str] = Field(default_factory=list)
    allow_fallbacks: bool = True


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
    transport_modalities: list[Modality] = Field(default_factory=lambda: ["text"])
    preserves_tool_media: bool = False
    tool_result_modalities: list[Modality] = Field(default_factory=lambda: ["text"])
    env_http_headers: dict[str, str] = Field(default_factory=dict)
    options: dict[str, Any] = Field(default_factory=dict)
    """Driver-specific options, validated by the route driver's ``Options`` model."""


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
    modalities: list[Modality] = Field(default_factory=lambda: ["text"])
    reasoning_levels: list[str] = Field(default_factory=list)
    default_reasoning: str | None = None
    context_window: int | None = None
    provider_routing: ProviderRouting | None = None

    @property
    def has_reasoning(self) -> bool:
        """Models with no reasoning levels get no effort keys in Codex config."""
        return bool(self.reasoning_levels)

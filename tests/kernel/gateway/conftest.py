"""Fixtures: a gateway serving routes that point at fake upstreams, in-process or as the real
shared gateway process."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support.fake_upstream import FakeUpstream
from support.gateway_harness import serve_gateway

from mmo_kernel.gateway import ensure_gateway, stop_gateway
from mmo_kernel.gateway.request_log import read_log

SDK_KEY = "sk-sdk-upstream-0123456789"


@pytest.fixture
def upstream() -> Iterator[FakeUpstream]:
    with FakeUpstream() as fake:
        yield fake


@pytest.fixture
def serve(mmo_env, tmp_path: Path):
    """``with serve(routes, models) as gw``: a running gateway logging into tmp."""
    return lambda routes, models: serve_gateway(routes, models, tmp_path / "requests.jsonl")


def sdk_fragment(upstream_url: str) -> str:
    """A catalog fragment: one route per wire protocol, all reaching ``upstream_url``."""
    text = "schema_version = 1\n"
    for route, wire in (("sdk_chat", "openai_chat"), ("sdk_anthropic", "anthropic_messages"),
                        ("sdk_responses", "openai_responses")):
        text += textwrap.dedent(f"""
            [routes.{route}]
            name = "{route}"
            driver = "codex_custom"
            api_operator = "test"
            access_product = "test"
            wire_protocol = "{wire}"
            base_url = "{upstream_url}/v1"
            credential_env = "SDK_KEY"

            [models.{route}__m1]
            route = "{route}"
            upstream_id = "upstream-m1"
            maker = "test"
            """)
    return text


@dataclass
class GatewayProcess:
    """The real shared gateway (``ensure_gateway``), as a client sees it."""

    url: str
    pid: int
    state_dir: Path

    def base_url(self, route: str) -> str:
        return f"{self.url}/routes/{route}/v1"

    def openai(self, route: str) -> Any:
        """The official ``openai`` SDK client pointed at ``route`` (no retries)."""
        import openai

        return openai.OpenAI(base_url=self.base_url(route), api_key="not-sent-upstream",
                             max_retries=0, timeout=30)

    def log(self) -> list[dict[str, Any]]:
        return read_log(self.state_dir / "gateway" / "requests.jsonl")

    def gateway_log(self) -> str:
        path = self.state_dir / "gateway" / "gateway.log"
        return path.read_text(encoding="utf-8") if path.exists() else ""


@pytest.fixture
def gateway_process(mmo_env, mmo_process_guard, upstream, monkeypatch) -> Iterator[GatewayProcess]:
    """The real gateway process; ``catalog.d/sdk.toml`` adds ``sdk_chat``, ``sdk_anthropic``
    and ``sdk_responses`` (model ``<route>__m1``) reaching ``upstream``."""
    monkeypatch.setenv("SDK_KEY", SDK_KEY)
    fragments = mmo_env.config_dir / "catalog.d"
    fragments.mkdir(exist_ok=True)
    (fragments / "sdk.toml").write_text(sdk_fragment(upstream.url), encoding="utf-8")
    record = ensure_gateway()
    try:
        yield GatewayProcess(record["url"], record["pid"], mmo_env.state_dir)
    finally:
        stop_gateway()

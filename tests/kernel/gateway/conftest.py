"""Fixtures: a gateway on a loopback port serving routes that point at fake upstreams."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.fake_upstream import FakeUpstream
from support.gateway_harness import serve_gateway


@pytest.fixture
def upstream() -> Iterator[FakeUpstream]:
    with FakeUpstream() as fake:
        yield fake


@pytest.fixture
def serve(mmo_env, tmp_path: Path):
    """``with serve(routes, models) as gw``: a running gateway logging into tmp."""
    return lambda routes, models: serve_gateway(routes, models, tmp_path / "requests.jsonl")

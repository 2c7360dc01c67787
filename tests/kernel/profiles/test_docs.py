"""docs/profiles.md and docs/catalog.md describe what the code actually accepts and ships."""

from __future__ import annotations

from pathlib import Path

import pytest

from mmo_kernel.config.catalog import Model, Route
from mmo_kernel.config.catalog_load import load_catalog
from mmo_kernel.profiles.loading import builtin_profile_ids
from mmo_kernel.profiles.schema import AgentSpec, Coordination, ProfileDoc, ToolMcpOptIn

DOCS = Path(__file__).resolve().parents[3] / "docs"


@pytest.mark.parametrize("model", [ProfileDoc, Coordination, AgentSpec, ToolMcpOptIn])
def test_every_profile_field_is_documented(model):
    text = (DOCS / "profiles.md").read_text()
    missing = [name for name in model.model_fields if f"`{name}`" not in text]
    assert missing == []


def test_every_builtin_profile_is_documented():
    text = (DOCS / "profiles.md").read_text()
    assert [pid for pid in builtin_profile_ids() if f"`{pid}`" not in text] == []


def test_every_builtin_route_model_and_catalog_key_is_documented():
    text = (DOCS / "catalog.md").read_text()
    catalog = load_catalog()
    keys = [*catalog.routes, *catalog.models]
    fields = [f for f in [*Route.model_fields, *Model.model_fields] if f != "id"]
    assert [k for k in [*keys, *fields] if f"`{k}`" not in text] == []

"""Catalog prices: validated like every catalog key, and costs that are exact or unknown."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from mmo_kernel.config.catalog import Price
from mmo_kernel.config.catalog_load import load_catalog
from mmo_kernel.config.pricing import cost_number, model_cost, usage_cost

ROUTE = """schema_version = 1
[routes.priced]
name = "Priced"
driver = "scripted"
api_operator = "mmo"
access_product = "test"
billing_mode = "none"
"""


def _model(slug: str, price: str | None) -> str:
    text = (f'\n[models.priced__{slug}]\nroute = "priced"\nupstream_id = "scripted"\n'
            f'maker = "mmo"\n')
    return text + (f"price = {price}\n" if price is not None else "")


def _fragment(config_dir: Path, *models: str) -> Path:
    folder = config_dir / "catalog.d"
    folder.mkdir(exist_ok=True)
    path = folder / "50-priced.toml"
    path.write_text(ROUTE + "".join(models))
    return path


def _problems(config_dir: Path) -> list[str]:
    with pytest.raises(ValueError) as caught:
        load_catalog(config_dir)
    return str(caught.value).splitlines()


def test_a_price_table_loads_and_reaches_the_model(mmo_env):
    _fragment(mmo_env.config_dir,
              _model("full", "{ input = 2.5, output = 10, cached_input = 0.25 }"),
              _model("plain", "{ input = 0, output = 1.5 }"),
              _model("unpriced", None))
    catalog = load_catalog(mmo_env.config_dir)
    assert catalog.model("priced__full").price == Price(input=2.5, output=10.0,
                                                        cached_input=0.25)
    assert catalog.model("priced__plain").price == Price(input=0.0, output=1.5)
    assert catalog.model("priced__unpriced").price is None
    assert catalog.model("local_scripted__scripted").price is None  # built-ins carry none


@pytest.mark.parametrize(("price", "key", "phrase"), [
    ("{ input = 1, output = 2, cache = 0.1 }", "price.cache", "unknown key"),
    ("{ input = 1 }", "price.output", "required key is missing"),
    ("{ input = -1, output = 2 }", "price.input", "is not a price (a non-negative number"),
    ("{ input = 1, output = inf }", "price.output", "is not a price"),
    ("{ input = 1, output = nan }", "price.output", "is not a price"),
    ("{ input = 1, output = 2, cached_input = -0.5 }", "price.cached_input", "is not a price"),
    ("{ input = true, output = 2 }", "price.input", "valid number"),
    ('{ input = "3", output = 2 }', "price.input", "valid number"),
    ("3.0", "price", "must be a table of USD per million tokens"),
])
def test_a_bad_price_is_one_line_naming_the_file_and_the_field(mmo_env, price, key, phrase):
    path = _fragment(mmo_env.config_dir, _model("bad", price))
    problems = _problems(mmo_env.config_dir)
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"{path}: models.priced__bad.{key}: "), problems
    assert phrase in problems[0]


def test_an_isolated_load_leaves_a_badly_priced_fragment_out_and_keeps_the_rest(mmo_env):
    path = _fragment(mmo_env.config_dir, _model("bad", "{ input = 1, output = 2, usd = 1 }"))
    catalog = load_catalog(mmo_env.config_dir, isolate_fragments=True)
    assert "priced" in catalog.disabled and "priced__bad" not in catalog.models
    assert catalog.problems == (f"{path}: models.priced__bad.price.usd: unknown key",)
    assert "local_scripted__scripted" in catalog.models


def test_snapshot_entries_keep_a_price_and_leave_out_an_unknown_one(mmo_env):
    _fragment(mmo_env.config_dir, _model("full", "{ input = 2.5, output = 10 }"),
              _model("unpriced", None))
    entries = load_catalog(mmo_env.config_dir).entries_for(["priced__full", "priced__unpriced"])
    assert entries["models"]["priced__full"]["price"] == {"input": 2.5, "output": 10.0,
                                                           "cached_input": None}
    assert "price" not in entries["models"]["priced__unpriced"]


PRICE = Price(input=2.5, output=10.0, cached_input=0.25)


def test_cost_is_tokens_times_the_price_per_million():
    usage = {"input_tokens": 1234, "output_tokens": 567, "total_tokens": 1801}
    expected = (Decimal(1234) * Decimal("2.5") + Decimal(567) * Decimal(10)) / 1_000_000
    assert usage_cost(usage, PRICE) == expected == Decimal("0.008755")
    assert cost_number(usage_cost(usage, PRICE)) == 0.008755
    # a price written as 0.1 costs exactly that, not its binary float
    assert usage_cost({"input_tokens": 3, "output_tokens": 0},
                      Price(input=0.1, output=0.2)) == Decimal("0.0000003")


def test_cached_input_tokens_cost_the_cached_rate_or_else_the_input_rate():
    usage = {"input_tokens": 10_000, "cached_input_tokens": 8_000, "output_tokens": 1_000}
    assert usage_cost(usage, PRICE) == Decimal("0.017")  # 2000*2.5 + 8000*0.25 + 1000*10
    no_cached_rate = Price(input=2.5, output=10.0)
    assert usage_cost(usage, no_cached_rate) == Decimal("0.035")  # all 10000 at 2.5
    assert usage_cost({**usage, "cached_input_tokens": 0}, PRICE) == Decimal("0.035")


@pytest.mark.parametrize("usage", [
    None,
    {},
    {"input_tokens": 100},                                   # output unknown
    {"output_tokens": 100},                                  # input unknown
    {"input_tokens": True, "output_tokens": 1},              # a bool is not a count
    {"input_tokens": "100", "output_tokens": 1},
    {"input_tokens": -1, "output_tokens": 1},
    {"input_tokens": 10, "output_tokens": 1, "cached_input_tokens": 11},  # more than input
    {"input_tokens": 10, "output_tokens": 1, "cached_input_tokens": 1.5},
    "1000 tokens",
])
def test_unknown_or_inconsistent_usage_costs_none(usage):
    assert usage_cost(usage, PRICE) is None


def test_no_price_or_no_model_costs_none_never_a_guess(mmo_env):
    usage = {"input_tokens": 1000, "output_tokens": 1000}
    assert usage_cost(usage, None) is None
    assert model_cost(None, usage) is None
    assert model_cost(load_catalog().model("local_scripted__scripted"), usage) is None
    assert cost_number(None) is None
    assert usage_cost({"input_tokens": 0, "output_tokens": 0}, PRICE) == 0

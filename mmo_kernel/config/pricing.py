"""The cost of recorded token usage at a catalog model's price (docs/catalog.md).

A cost is known only when both are: the model's ``price`` table and the
usage's input and output token counts. Anything missing or inconsistent gives
``None`` ("unknown"), never an estimate. Arithmetic is in ``Decimal`` so a
price written as ``0.1`` costs exactly that.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only: pricing reads a model's price table, never builds one
    from mmo_kernel.config.catalog import Model, Price

PER_TOKENS = Decimal(1_000_000)
"""Prices are in USD per million tokens."""
CACHED_INPUT_KEY = "cached_input_tokens"
"""Usage key for the part of ``input_tokens`` served from the provider's prompt cache."""


def _count(usage: Mapping[str, Any], key: str) -> int | None:
    value = usage.get(key)
    if type(value) is not int or value < 0:  # a bool is never a count
        return None
    return value


def _rate(value: float) -> Decimal:
    return Decimal(repr(value))  # the number as written in the catalog, not its binary float


def usage_cost(usage: Any, price: Price | None) -> Decimal | None:
    """USD for ``usage`` (``input_tokens``, ``output_tokens``, optional
    ``cached_input_tokens`` counted within the input) at ``price``; None when unknown.

    Cached input tokens cost ``cached_input`` when the price has it, else ``input``.
    """
    if price is None or not isinstance(usage, Mapping):
        return None
    given, taken = _count(usage, "input_tokens"), _count(usage, "output_tokens")
    if given is None or taken is None:
        return None
    cached = 0 if usage.get(CACHED_INPUT_KEY) is None else _count(usage, CACHED_INPUT_KEY)
    if cached is None or cached > given:
        return None
    cached_rate = price.input if price.cached_input is None else price.cached_input
    total = ((given - cached) * _rate(price.input) + cached * _rate(cached_rate)
             + taken * _rate(price.output))
    return total / PER_TOKENS


def model_cost(model: Model | None, usage: Any) -> Decimal | None:
    """``usage_cost`` at ``model``'s price (None for an unknown model or price)."""
    return None if model is None else usage_cost(usage, model.price)


def cost_number(cost: Decimal | None) -> float | None:
    """A cost as a JSON number (``cost_usd``), None staying null."""
    return None if cost is None else float(cost)

"""How a figure reads wherever MMO shows one (``mmo jobs``, ``mmo top``, ``mmo ui``):
one rule for token counts and one for money, so the views never disagree."""

from __future__ import annotations

from decimal import Decimal

UNKNOWN = "n/a"
"""A cost without a known price: shown as unknown, never guessed."""
SMALLEST = Decimal("0.0001")


def count(value: int | None) -> str:
    """``812``, ``4.2k``, ``1.3M``; ``—`` when there is no figure."""
    if value is None:
        return "—"
    if value >= 1_000_000:
        return f"{value / 1_000_000:.1f}M"
    if value >= 1000:
        return f"{value / 1000:.1f}k"
    return str(value)


def money(cost: Decimal | float | None) -> str:
    """``$0.0123`` under a dollar, ``$12.34`` from one, ``n/a`` when the cost is unknown.

    A float (a cost read back from JSON) is taken by its decimal text, as it was written.
    """
    if cost is None:
        return UNKNOWN
    if not isinstance(cost, Decimal):
        cost = Decimal(str(cost))
    if cost == 0:
        return "$0.00"
    if cost < SMALLEST:
        return f"<${SMALLEST}"
    return f"${cost:.4f}" if cost < 1 else f"${cost:,.2f}"

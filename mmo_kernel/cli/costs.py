"""Costs in the CLI's read commands: ``cost_usd`` in JSON, ``$0.0123`` or ``n/a`` in tables.

A cost is the recorded token usage at the price the session's snapshot gives
the agent's model (docs/catalog.md, "Prices and cost"); unknown stays unknown.
"""

from __future__ import annotations

from typing import Any

from mmo_kernel.config.pricing import cost_number
from mmo_kernel.profiles.costs import job_cost, root_cost
from mmo_kernel.state.records import is_unreadable
from mmo_kernel.views.text import money


def with_job_cost(job: dict[str, Any]) -> dict[str, Any]:
    """A job row plus ``cost_usd`` (a number, or null when unknown); unreadable rows as they are."""
    return job if is_unreadable(job) else {**job, "cost_usd": cost_number(job_cost(job))}


def with_root_cost(session: dict[str, Any]) -> dict[str, Any]:
    """A session row plus ``root_cost_usd``, the cost of its ``root_usage``."""
    if is_unreadable(session):
        return session
    return {**session, "root_cost_usd": cost_number(root_cost(session))}


def job_money(job: dict[str, Any]) -> str:
    return money(job_cost(job))


def root_money(session: dict[str, Any]) -> str:
    return money(root_cost(session))

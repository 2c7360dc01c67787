"""The ``validated_text`` contract transport."""

from __future__ import annotations

from typing import Any

from mmo_kernel.contracts import repair_prompt, with_contract
from mmo_kernel.plugin import ContractTransport, TransportFit


class ValidatedText(ContractTransport):
    """No ``outputSchema`` is ever sent: the final message is validated after the turn,
    and an invalid strict result gets exactly one repair turn on the same thread.

    Nothing constrains the model, so the schema travels as text: after the task and
    again in the repair turn, or no model could know what document to answer with.

    It carries any schema under either enforcement, at the lowest priority: the
    fallback when no transport that constrains generation fits.
    """

    name = "validated_text"
    enforcements = frozenset({"strict", "warn"})
    priority = 0
    repairs = True

    def fit(self, enforcement: str, schema: dict[str, Any]) -> TransportFit:
        if enforcement == "warn":
            return TransportFit(True, "warn enforcement never constrains generation")
        return TransportFit(True, f"{enforcement} contract validated after the turn")

    def turn_overrides(self, schema: dict[str, Any], *, final: bool) -> dict[str, Any]:
        return {}

    def task_text(self, task: str, schema: dict[str, Any]) -> str:
        return with_contract(task, schema)

    def repair_text(self, error: str, schema: dict[str, Any]) -> str:
        return repair_prompt(error, schema)

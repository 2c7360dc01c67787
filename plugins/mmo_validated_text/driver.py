"""The ``validated_text`` contract transport."""

from __future__ import annotations

from typing import Any

from mmo_kernel.plugin.drivers import ContractTransport


class ValidatedText(ContractTransport):
    """No ``outputSchema`` is ever sent: the final message is validated after the turn,
    and an invalid strict result gets exactly one repair turn on the same thread."""

    name = "validated_text"
    repairs = True

    def turn_overrides(self, schema: dict[str, Any], *, final: bool) -> dict[str, Any]:
        return {}

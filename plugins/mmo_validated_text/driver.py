"""The ``validated_text`` driver."""

from __future__ import annotations

from mmo_kernel.drivers import ContractTransport


class ValidatedText(ContractTransport):
    """Results validated after the turn, with one repair turn for strict contracts."""

    name = "validated_text"

"""MMO built-in plugin ``validated_text``.

Results validated after the turn, with one repair turn for strict contracts.
"""

from __future__ import annotations

from mmo_kernel import hookimpl

from .driver import ValidatedText


@hookimpl
def mmo_register_contract_transports(register):
    register(ValidatedText)

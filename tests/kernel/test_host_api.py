"""``mmo_kernel.host_api`` is a documented contract: each offered name resolves and is described."""

from __future__ import annotations

import mmo_kernel.host_api as host_api


def test_every_offered_name_resolves_and_the_docstring_describes_it():
    assert host_api.__doc__ is not None
    missing = [name for name in host_api.__all__ if not hasattr(host_api, name)]
    undocumented = [name for name in host_api.__all__ if f"``{name}``" not in host_api.__doc__]
    assert (missing, undocumented) == ([], [])


"""Whether the environment sends an upstream request through a proxy.

The standard variables (``HTTPS_PROXY``, ``HTTP_PROXY``, ``ALL_PROXY``,
``NO_PROXY``, either case) decide, read with the standard library's own
rules, so a target is proxied exactly when curl, pip or the SDKs would
proxy it. Deciding costs a dictionary lookup per request: the answer is
cached per target and per value of those variables.
"""

from __future__ import annotations

import functools
import os
import urllib.request

_PROXY_VARS = ("https_proxy", "http_proxy", "all_proxy", "no_proxy")


def _proxy_environment() -> tuple[tuple[str, str], ...]:
    found = []
    for name in _PROXY_VARS:
        for spelled in (name, name.upper()):
            value = os.environ.get(spelled)
            if value:
                found.append((spelled, value))
    return tuple(found)


@functools.lru_cache(maxsize=256)
def _proxied(scheme: str, host: str, port: int, environment: tuple[tuple[str, str], ...]) -> bool:
    if not environment:
        return False
    proxies = urllib.request.getproxies_environment()
    if scheme not in proxies and "all" not in proxies:
        return False
    return not urllib.request.proxy_bypass_environment(f"{host}:{port}", proxies)


FORCE_VARIABLE = "MMO_GATEWAY_UPSTREAM_CLIENT"


def uses_proxy(scheme: str, host: str, port: int) -> bool:
    """True when a proxy variable covers ``scheme://host:port`` and ``NO_PROXY`` does not.

    ``MMO_GATEWAY_UPSTREAM_CLIENT=httpx2`` sends every request the proxied way
    (for measuring the two clients side by side, ``benchmarks/gateway.py``).
    """
    if os.environ.get(FORCE_VARIABLE) == "httpx2":
        return True
    return _proxied(scheme, host, port, _proxy_environment())

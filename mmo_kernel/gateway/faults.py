"""Injected route faults: how a session tells the shared gateway to fail a route.

A session's faults are fixed when it is created (spec 03), while the gateway
is shared by every session. The session therefore carries its faults itself:
the agent's provider block gets ``http_headers = {"X-MMO-Route-Fault" =
"<fault>"}`` (see :func:`fault_headers`), Codex sends that header with every
request, and the gateway answers it without touching the upstream. Other
sessions send no header and are unaffected.

Each fault gets the HTTP answer real Codex classifies as that kind of failure
(verified against Codex 0.169.0; see docs/gateway.md).
"""

from __future__ import annotations

from mmo_kernel.gateway.errors import (
    GatewayError,
    error_body,
    server_error,
    unauthorized,
    usage_limited,
)

FAULT_HEADER = "X-MMO-Route-Fault"
ROUTE_FAULTS: tuple[str, ...] = ("rate_limit", "timeout", "server_error", "auth_error", "transport")


def fault_headers(fault: str | None) -> dict[str, str]:
    """The ``http_headers`` an agent's provider block carries for ``fault`` (none: ``{}``)."""
    if fault is None:
        return {}
    check_fault(fault)
    return {FAULT_HEADER: fault}


def check_fault(fault: str) -> str:
    if fault not in ROUTE_FAULTS:
        raise ValueError(f"route fault {fault!r} must be one of {', '.join(ROUTE_FAULTS)}")
    return fault


def fault_error(fault: str, route_id: str) -> GatewayError:
    """The answer for a request on a route with an injected fault."""
    check_fault(fault)
    message = f"injected route fault: {fault} (route {route_id})"
    if fault == "rate_limit":
        return usage_limited(message)
    if fault == "auth_error":
        return unauthorized(message)
    if fault == "timeout":
        return GatewayError(504, error_body(message, "server_error", "upstream_timeout"))
    if fault == "transport":
        return GatewayError(502, error_body(message, "server_error", "upstream_transport"))
    return server_error(message)

"""The local model gateway (one loopback HTTP server shared by every session, spec 08) and the
route SDK: everything a route driver imports to serve ``POST /routes/<id>/v1/responses``.

A route driver (``RouteDriver`` from :mod:`mmo_kernel.plugin`) turns Codex's
Responses request into a stream of Responses SSE events. Its public surface:

- errors: raise :class:`GatewayError` (or build one with :func:`bad_request`,
  :func:`unauthorized`, :func:`usage_limited`, :func:`server_error`,
  :func:`not_found`, :func:`error_body`) before the first chunk to answer
  with the HTTP status and body Codex classifies;
- route faults: :func:`fault_headers` gives the ``http_headers`` of a provider
  block for an injected fault (``ROUTE_FAULTS``, header ``FAULT_HEADER``); the
  gateway answers those requests itself;
- MMO's own headers (``X-MMO-*``: faults, the session/job/agent a request is
  attributed to) end at the gateway: :func:`is_mmo_header` tells a driver
  never to send one upstream;
- the stream: :class:`ResponsesStream` builds the events Codex parses
  (:func:`usage_block`, :func:`new_id`, :func:`sse_event`); yield a
  :class:`LogNote` to add usage or the upstream model to the request log;
- request bodies: a large body arrives as a :class:`RequestBody` (a ``dict``
  that remembers member spans, so a pass-through route can splice it);
- upstream HTTP: :func:`post_json` (blocking, for ``serve_responses``) and
  :func:`post_json_async` (for ``serve_responses_async`` on the gateway's
  loop) return :class:`UpstreamResponse` / :class:`AsyncUpstreamResponse` or
  raise :class:`GatewayError`; :class:`SseDecoder` (:class:`SseFrame`,
  :func:`iter_frames`) decodes an upstream event stream;
- credentials: the ``env`` a driver gets is a :class:`CredentialEnv`;
  :func:`credential_value` reads one name (environment, then
  ``credentials.env``); :func:`user_codex_home` is the user's Codex home.

The kernel's own entry points live here too: :func:`ensure_gateway`,
:func:`gateway_status`, :func:`stop_gateway`, :func:`gateway_models`,
:func:`route_telemetry`.

Every name loads on first use: this ``__init__`` runs whenever any gateway
module is imported, and the MCP server (``mmo mcp``, one per agent thread)
must not pay for the upstream clients.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mmo_kernel import lazy_exports

if TYPE_CHECKING:
    from mmo_kernel.gateway.attribution import is_mmo_header
    from mmo_kernel.gateway.errors import (
        GatewayError,
        bad_request,
        error_body,
        not_found,
        server_error,
        unauthorized,
        usage_limited,
    )
    from mmo_kernel.gateway.faults import FAULT_HEADER, ROUTE_FAULTS, fault_headers
    from mmo_kernel.gateway.json_body import RequestBody
    from mmo_kernel.gateway.listing import gateway_models
    from mmo_kernel.gateway.notes import LogNote
    from mmo_kernel.gateway.process import ensure_gateway, gateway_status, stop_gateway
    from mmo_kernel.gateway.responses_stream import (
        ResponsesStream,
        new_id,
        sse_event,
        usage_block,
    )
    from mmo_kernel.gateway.sources import CredentialEnv, credential_value
    from mmo_kernel.gateway.sse import SseDecoder, SseFrame, iter_frames
    from mmo_kernel.gateway.telemetry import route_telemetry
    from mmo_kernel.gateway.upstream import UpstreamResponse, post_json
    from mmo_kernel.gateway.upstream_async import AsyncUpstreamResponse, post_json_async
    from mmo_kernel.state.paths import user_codex_home

__all__ = [
    "FAULT_HEADER",
    "ROUTE_FAULTS",
    "AsyncUpstreamResponse",
    "CredentialEnv",
    "GatewayError",
    "LogNote",
    "RequestBody",
    "ResponsesStream",
    "SseDecoder",
    "SseFrame",
    "UpstreamResponse",
    "bad_request",
    "credential_value",
    "ensure_gateway",
    "error_body",
    "fault_headers",
    "gateway_models",
    "gateway_status",
    "is_mmo_header",
    "iter_frames",
    "new_id",
    "not_found",
    "post_json",
    "post_json_async",
    "route_telemetry",
    "server_error",
    "sse_event",
    "stop_gateway",
    "unauthorized",
    "usage_block",
    "usage_limited",
    "user_codex_home",
]

__getattr__ = lazy_exports(__name__, {
    "mmo_kernel.gateway.attribution": ("is_mmo_header",),
    "mmo_kernel.gateway.errors": (
        "GatewayError", "bad_request", "error_body", "not_found", "server_error", "unauthorized",
        "usage_limited",
    ),
    "mmo_kernel.gateway.faults": ("FAULT_HEADER", "ROUTE_FAULTS", "fault_headers"),
    "mmo_kernel.gateway.json_body": ("RequestBody",),
    "mmo_kernel.gateway.listing": ("gateway_models",),
    "mmo_kernel.gateway.notes": ("LogNote",),
    "mmo_kernel.gateway.process": ("ensure_gateway", "gateway_status", "stop_gateway"),
    "mmo_kernel.gateway.responses_stream": (
        "ResponsesStream", "new_id", "sse_event", "usage_block",
    ),
    "mmo_kernel.gateway.sources": ("CredentialEnv", "credential_value"),
    "mmo_kernel.gateway.sse": ("SseDecoder", "SseFrame", "iter_frames"),
    "mmo_kernel.gateway.telemetry": ("route_telemetry",),
    "mmo_kernel.gateway.upstream": ("UpstreamResponse", "post_json"),
    "mmo_kernel.gateway.upstream_async": ("AsyncUpstreamResponse", "post_json_async"),
    "mmo_kernel.state.paths": ("user_codex_home",),
})

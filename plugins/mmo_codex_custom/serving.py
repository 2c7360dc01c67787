"""Serving a request upstream: the wire translations and the HTTP client.

Kept apart from ``driver`` so that loading the plugin (every ``mmo`` command
that looks up a driver does) does not import the HTTP stack and the three
wires; the gateway imports this module with its first request on the route.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Iterator
from typing import Any, NamedTuple

from mmo_kernel.gateway import GatewayError, post_json, post_json_async

from .conversation import Conversation, read_conversation
from .endpoints import ENDPOINTS
from .wire_anthropic import (
    anthropic_request,
    classify_error,
    translate_anthropic_stream,
    translate_anthropic_stream_async,
)
from .wire_chat import chat_request, translate_chat_stream, translate_chat_stream_async
from .wire_responses import relay_responses_stream, relay_responses_stream_async, responses_request

ANTHROPIC_VERSION = "2023-06-01"


class UpstreamCall(NamedTuple):
    url: str
    payload: dict[str, Any] | bytes
    headers: dict[str, str]
    timeout: float
    conv: Conversation | None
    """The neutral conversation for translated wires; None for Responses pass-through."""


def serve_blocking(route: Any, model: Any, body: dict[str, Any], options: Any,
                   headers: dict[str, str]) -> Iterator[Any]:
    """``serve_responses``: one request upstream, its stream in Responses events."""
    call = upstream_call(route, model, body, options, headers)
    try:
        upstream = post_json(call.url, call.payload, call.headers, call.timeout)
    except GatewayError as err:
        raise _classified(route, err) from None
    if call.conv is None:
        return relay_responses_stream(upstream.iter_bytes())
    content_type = upstream.headers.get("content-type", "")
    translate = (translate_chat_stream if route.wire_protocol == "openai_chat"
                 else translate_anthropic_stream)
    return translate(call.conv, model.id, upstream.iter_bytes(), content_type, body)


async def serve_async(route: Any, model: Any, body: dict[str, Any], options: Any,
                      headers: dict[str, str]) -> AsyncGenerator[Any, None]:
    """``serve_responses_async``: the same on the gateway's loop, on its pooled client."""
    call = upstream_call(route, model, body, options, headers)
    try:
        upstream = await post_json_async(call.url, call.payload, call.headers, call.timeout)
    except GatewayError as err:
        raise _classified(route, err) from None
    if call.conv is None:
        items = relay_responses_stream_async(upstream.iter_bytes())
    else:
        content_type = upstream.headers.get("content-type", "")
        translate = (translate_chat_stream_async if route.wire_protocol == "openai_chat"
                     else translate_anthropic_stream_async)
        items = translate(call.conv, model.id, upstream.iter_bytes(), content_type, body)
    try:
        async for item in items:
            yield item
    finally:
        await items.aclose()
        upstream.close()


def upstream_call(route: Any, model: Any, body: dict[str, Any], options: Any,
                  headers: dict[str, str]) -> UpstreamCall:
    """Everything both paths send upstream: URL, translated payload, headers, timeout.

    ``options`` are the route's validated ``CustomRouteOptions``; ``headers`` its static
    and secret headers (the driver's)."""
    url = route.base_url.rstrip("/") + ENDPOINTS[route.wire_protocol]
    timeout = options.upstream_timeout_seconds
    if route.wire_protocol == "openai_responses":
        return UpstreamCall(url, responses_request(body, model), headers, timeout, None)
    images_ok = "image" in route.transport_modalities and "image" in model.modalities
    media_ok = route.preserves_tool_media and "image" in route.tool_result_modalities
    conv = read_conversation(body, images_ok, media_ok, route=route.id)
    if route.wire_protocol == "openai_chat":
        return UpstreamCall(url, chat_request(conv, model), headers, timeout, conv)
    headers.setdefault("anthropic-version", ANTHROPIC_VERSION)
    payload = anthropic_request(conv, model, options.max_output_tokens)
    return UpstreamCall(url, payload, headers, timeout, conv)


def _classified(route: Any, err: GatewayError) -> GatewayError:
    """An upstream HTTP error in the terms Codex classifies (codes the wire leaves implicit)."""
    return classify_error(err) if route.wire_protocol == "anthropic_messages" else err

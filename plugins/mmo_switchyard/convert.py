"""MCP tool results as app-server dynamic tool output (codex-app-server.md §4 ``item/tool/call``).

Images and audio travel as data URLs only when the agent's route preserves
tool media; otherwise the model gets a short text saying what was left out,
so it never mistakes a missing picture for an empty answer.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mmo_kernel.tools import McpToolResult


def text_item(text: str) -> dict[str, Any]:
    return {"type": "inputText", "text": text}


def failure(text: str) -> dict[str, Any]:
    """A dynamic tool answer that marks the item ``failed``; the text still reaches the model."""
    return {"contentItems": [text_item(text)], "success": False}


def _omitted(kind: str, mime: str) -> dict[str, Any]:
    return text_item(f"[{kind} omitted ({mime}): this agent's route does not preserve tool media]")


def _media(kind: str, mime: str, data: Any, preserve: bool) -> dict[str, Any]:
    if not isinstance(data, str) or not data:
        return text_item(f"[{kind} without data]")
    if not preserve:
        return _omitted(kind, mime)
    if kind == "image":
        return {"type": "inputImage", "imageUrl": f"data:{mime};base64,{data}"}
    return {"type": "inputAudio", "audioUrl": f"data:{mime};base64,{data}"}


def _resource(resource: Any, preserve: bool) -> list[dict[str, Any]]:
    """An embedded resource keeps its ``uri`` and ``mimeType``: a line naming them, then the
    content (text as is, a picture or sound as media where the route preserves it)."""
    if not isinstance(resource, dict):
        return [text_item("[malformed embedded resource]")]
    uri = str(resource.get("uri") or "")
    if isinstance(resource.get("text"), str):
        mime = str(resource.get("mimeType") or "text/plain")
        return [text_item(f"[resource {uri} ({mime})]\n{resource['text']}")]
    mime = str(resource.get("mimeType") or "application/octet-stream")
    if mime.startswith(("image/", "audio/")):
        return [text_item(f"[resource {uri} ({mime})]"),
                _media(mime.split("/")[0], mime, resource.get("blob"), preserve)]
    return [text_item(f"[binary resource {uri} ({mime}) omitted]")]


def content_items(content: dict[str, Any], preserve_media: bool) -> list[dict[str, Any]]:
    """One MCP content block as dynamic tool content items (an embedded resource takes two)."""
    kind = content.get("type")
    if kind == "text":
        return [text_item(str(content.get("text", "")))]
    if kind in ("image", "audio"):
        default = "image/png" if kind == "image" else "audio/wav"
        return [_media(kind, str(content.get("mimeType") or default), content.get("data"),
                       preserve_media)]
    if kind == "resource":
        return _resource(content.get("resource"), preserve_media)
    if kind == "resource_link":
        mime = f" ({content['mimeType']})" if content.get("mimeType") else ""
        return [text_item(f"resource link: {content.get('name') or ''} "
                          f"<{content.get('uri', '')}>{mime}")]
    return [text_item(f"[unsupported MCP content type {kind!r}]")]


def dynamic_output(result: McpToolResult, preserve_media: bool) -> dict[str, Any]:
    """``{"contentItems": [...], "success": bool}``; ``isError`` becomes ``success: false``."""
    items = [item for c in result.content for item in content_items(c, preserve_media)]
    if not items and result.structuredContent is not None:
        items.append(text_item(json.dumps(result.structuredContent, ensure_ascii=False)))
    if not items:
        items.append(text_item("(the tool returned no content)"))
    return {"contentItems": items, "success": not result.isError}

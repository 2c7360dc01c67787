"""``FAKE_MCP_CALL <server>.<tool> <json-args>``: call a configured MCP server like real Codex.

Real Codex starts the servers of ``CODEX_HOME/config.toml`` ``[mcp_servers.*]``
(``command``/``args``/``cwd``, fixed ``env``, ``env_vars`` forwarded from its
own environment) and records each tool call as an ``mcpToolCall`` item. The
stand-in does the same, through the project's MCP client, so a test can drive
an agent that delegates through the real ``mmo_mesh`` server. A server is
started on the first call of a turn that names it and closed when the turn's
calls are done (real Codex keeps it for the thread; nothing observable here
depends on that). Later calls may use earlier results: ``{{N.a.b}}`` is
replaced by field ``a.b`` of call N's ``structuredContent`` (N counts from 1
within the turn).
"""

from __future__ import annotations

import json
import re
import time
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

NEEDS_APPROVAL = "MCP tool call requires approval, but approval policy is never"
"""Real Codex's refusal when the entry does not set ``default_tools_approval_mode = "approve"``."""
PLACEHOLDER = re.compile(r"\{\{(\d+)((?:\.[^.{}\s]+)+)\}\}")


class McpCallError(Exception):
    """The call could not be made (config, placeholder, server); becomes the item's ``error``."""


def server_entry(codex_home: Path, name: str) -> dict[str, Any]:
    """The ``[mcp_servers.<name>]`` table of ``codex_home/config.toml``."""
    path = Path(codex_home) / "config.toml"
    try:
        config = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise McpCallError(f"no {path} declares MCP server {name!r}") from None
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise McpCallError(f"cannot read {path}: {exc}") from None
    entry = (config.get("mcp_servers") or {}).get(name)
    if not isinstance(entry, dict):
        raise McpCallError(f"MCP server {name!r} is not configured in {path}")
    if entry.get("enabled") is False:
        raise McpCallError(f"MCP server {name!r} is disabled in {path}")
    return entry


def tool_server(name: str, entry: Mapping[str, Any], environ: Mapping[str, str]):
    """``(ToolServer, env source)`` for a Codex ``mcp_servers`` entry.

    The fixed ``env`` table wins over the process environment; its names are
    forwarded together with ``env_vars``, as Codex does.
    """
    from pydantic import ValidationError

    from mmo_kernel.tools import ToolServer

    fixed = {str(k): str(v) for k, v in (entry.get("env") or {}).items()}
    fields: dict[str, Any] = {
        "name": name,
        "transport": "streamable_http" if entry.get("url") else "stdio",
        "env_vars": [*entry.get("env_vars", []), *fixed],
        "enabled_tools": list(entry.get("enabled_tools") or ["*"]),
        "default_tools_approval_mode": entry.get("default_tools_approval_mode", "prompt"),
    }
    for key in ("url", "bearer_token_env_var", "command", "args", "cwd"):
        if entry.get(key) is not None:
            fields[key] = entry[key]
    for key in ("startup_timeout_sec", "tool_timeout_sec"):
        if entry.get(key) is not None:
            fields[key] = int(entry[key]) if key == "startup_timeout_sec" else float(entry[key])
    try:
        server = ToolServer.model_validate(fields)
    except ValidationError as exc:
        raise McpCallError(f"MCP server {name!r}: {exc.errors()[0]['msg']}") from None
    return server, {**environ, **fixed}


def _field(value: Any, path: list[str], placeholder: str) -> Any:
    for part in path:
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            raise McpCallError(f"placeholder {placeholder}: no field {part!r}")
    return value


def _lookup(match: re.Match, results: list[dict[str, Any] | None]) -> Any:
    placeholder = match.group(0)
    index = int(match.group(1))
    if not 1 <= index <= len(results):
        raise McpCallError(f"placeholder {placeholder}: there is no earlier call {index}")
    source = results[index - 1]
    if source is None:
        raise McpCallError(f"placeholder {placeholder}: call {index} has no structured result")
    return _field(source, match.group(2)[1:].split("."), placeholder)


def substitute(value: Any, results: list[dict[str, Any] | None]) -> Any:
    """Fill ``{{N.field}}`` placeholders; a string that is one placeholder takes its JSON type."""
    if isinstance(value, dict):
        return {k: substitute(v, results) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, results) for v in value]
    if not isinstance(value, str):
        return value
    whole = PLACEHOLDER.fullmatch(value)
    if whole:
        return _lookup(whole, results)

    def text(match: re.Match) -> str:
        found = _lookup(match, results)
        return found if isinstance(found, str) else json.dumps(found)

    return PLACEHOLDER.sub(text, value)


class Session:
    """The MCP servers one turn has started; ``close`` stops them all."""

    def __init__(self, codex_home: Path, environ: Mapping[str, str],
                 approval_policy: Any = None) -> None:
        self.codex_home = codex_home
        self.environ = environ
        self.approval_policy = approval_policy
        self.clients: dict[str, Any] = {}

    def client(self, name: str, entry: Mapping[str, Any]) -> Any:
        from mmo_kernel.tools import McpError, connect

        if name not in self.clients:
            server, source = tool_server(name, entry, self.environ)
            try:
                self.clients[name] = connect(server, source)
            except McpError as exc:
                raise McpCallError(str(exc)) from None
        return self.clients[name]

    def _check_allowed(self, server: str, tool: str, entry: Mapping[str, Any]) -> None:
        allowed = entry.get("enabled_tools")
        if tool in (entry.get("disabled_tools") or []) or (allowed is not None
                                                           and tool not in allowed):
            raise McpCallError(f"unsupported call: tool {tool!r} is not enabled on MCP server "
                               f"{server!r}")
        per_tool = ((entry.get("tools") or {}).get(tool) or {}).get("approval_mode")
        mode = per_tool or entry.get("default_tools_approval_mode")
        if self.approval_policy == "never" and mode != "approve":
            raise McpCallError(NEEDS_APPROVAL)

    def call(self, server: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """One ``tools/call``; returns the raw MCP result (raises McpCallError)."""
        from mmo_kernel.tools import McpError

        entry = server_entry(self.codex_home, server)
        self._check_allowed(server, tool, entry)
        client = self.client(server, entry)
        try:
            result = client.call_tool(tool, arguments)
        except McpError as exc:
            raise McpCallError(str(exc)) from None
        return result.model_dump(exclude_none=True)

    def close(self) -> None:
        for client in self.clients.values():
            client.close()
        self.clients.clear()


def item_for(call_id: str, server: str, tool: str, arguments: Any,
             outcome: dict[str, Any] | None, error: str | None, started: float) -> dict[str, Any]:
    """The ``mcpToolCall`` item; a result with ``isError`` makes the call ``failed``."""
    result = None
    if outcome is not None:
        result = {"content": outcome.get("content", [])}
        if outcome.get("structuredContent") is not None:
            result["structuredContent"] = outcome["structuredContent"]
    status = "failed" if error is not None or (outcome or {}).get("isError") else "completed"
    return {
        "type": "mcpToolCall",
        "id": call_id,
        "server": server,
        "tool": tool,
        "status": status,
        "arguments": arguments,
        "result": result,
        "error": None if error is None else {"message": error},
        "durationMs": None if started < 0 else int((time.monotonic() - started) * 1000),
    }


def summary(item: dict[str, Any]) -> str:
    """A short note for the turn's final message: status and the first text of the answer."""
    label = f"mcp {item['server']}.{item['tool']}"
    if item["error"] is not None:
        return f"({label}: failed: {item['error']['message'][:300]})"
    texts = [c.get("text", "") for c in item["result"]["content"] if isinstance(c, dict)]
    first = " ".join(texts)[:300]
    return f"({label}: {item['status']}{': ' + first if first else ''})"

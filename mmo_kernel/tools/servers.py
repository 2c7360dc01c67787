"""Third-party tool MCP servers declared in ``tool-mcp.d/*.toml`` (spec 09)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from mmo_kernel.config.credentials import has_control_character, valid_env_name
from mmo_kernel.errors import format_validation_error
from mmo_kernel.state.paths import config_dir
from mmo_kernel.state.records import check_schema_version


class ToolServer(BaseModel):
    """``[tool_mcp_servers.<name>]``: how to reach one MCP server and what it may expose."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    name: str
    transport: Literal["streamable_http", "stdio"]
    url: str | None = None
    bearer_token_env_var: str | None = None
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    cwd: str | None = None
    env_vars: list[str] = Field(default_factory=list)
    enabled_tools: list[str] = Field(min_length=1)
    default_tools_approval_mode: Literal["auto", "writes", "prompt", "approve"] = "prompt"
    startup_timeout_sec: int | None = Field(default=None, gt=0)
    tool_timeout_sec: float | None = Field(default=None, gt=0)
    source: str = ""

    @model_validator(mode="after")
    def _shape(self) -> ToolServer:
        if self.transport == "stdio":
            if not self.command:
                raise ValueError("a stdio server needs `command`")
            if self.url or self.bearer_token_env_var:
                raise ValueError("a stdio server takes no `url` or `bearer_token_env_var`")
        else:
            if not self.url or not self.url.startswith(("http://", "https://")):
                raise ValueError("a streamable_http server needs an http(s) `url`")
            if self.command or self.args:
                raise ValueError("a streamable_http server takes no `command` or `args`")
        for name in [*self.env_vars, *filter(None, [self.bearer_token_env_var])]:
            if not valid_env_name(name):
                raise ValueError(f"{name!r} is not an environment variable name")
        return self

    @property
    def http_env_names(self) -> list[str]:
        return [self.bearer_token_env_var] if self.bearer_token_env_var else []


def _load_fragment(path: Path) -> dict[str, ToolServer]:
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: invalid TOML: {exc}") from None
    check_schema_version(doc, str(path), "tool servers")
    unknown = sorted(set(doc) - {"schema_version", "tool_mcp_servers"})
    if unknown:
        raise ValueError(f"{path}: unknown keys: {', '.join(unknown)}")
    servers = {}
    for name, body in (doc.get("tool_mcp_servers") or {}).items():
        if not isinstance(body, dict):
            raise ValueError(f"{path}: tool_mcp_servers.{name}: must be a table")
        try:
            servers[name] = ToolServer.model_validate({**body, "name": name, "source": str(path)})
        except ValidationError as exc:
            raise ValueError(
                f"{path}: tool_mcp_servers.{name}: {format_validation_error(exc)}") from None
    return servers


def load_tool_servers(directory: Path | None = None) -> dict[str, ToolServer]:
    """Every declared server; a name declared in two files is an error naming both."""
    root = directory if directory is not None else config_dir() / "tool-mcp.d"
    found: dict[str, ToolServer] = {}
    if not root.is_dir():
        return found
    for path in sorted(root.glob("*.toml")):
        for name, server in _load_fragment(path).items():
            if name in found:
                raise ValueError(
                    f"tool MCP server {name!r} is declared twice: {found[name].source} and {path}")
            found[name] = server
    return dict(sorted(found.items()))


def check_http_header_value(name: str, value: str) -> str:
    """Bearer tokens travel as HTTP headers: control characters are refused by name."""
    if has_control_character(value):
        raise RuntimeError(
            f"tool MCP HTTP environment variable {name} contains a control character and "
            "cannot be sent as an HTTP header value")
    return value

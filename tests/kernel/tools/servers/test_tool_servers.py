"""Declaring third-party tool MCP servers and rendering them for Codex with native_mcp."""

from __future__ import annotations

import re

import pytest

from mmo_kernel.plugin.manager import get_driver
from mmo_kernel.tools.servers import check_http_header_value, load_tool_servers

FRAGMENT = """
schema_version = 1
[tool_mcp_servers.firecrawl]
transport = "streamable_http"
url = "https://example.invalid/mcp"
bearer_token_env_var = "FIRECRAWL_API_KEY"
enabled_tools = ["search", "scrape"]
default_tools_approval_mode = "writes"

[tool_mcp_servers.ida_pro]
transport = "stdio"
command = "/usr/local/bin/ida-mcp"
env_vars = ["IDA_MCP_TOKEN"]
enabled_tools = ["inspect", "decompile"]
"""


class OptIn:
    def __init__(self, enabled_tools=None, required=True):
        self.enabled_tools = enabled_tools
        self.required = required


@pytest.fixture
def servers(tmp_path):
    (tmp_path / "a.toml").write_text(FRAGMENT)
    return load_tool_servers(tmp_path)


def test_every_server_is_rendered_but_enabled_only_for_opt_ins(servers):
    bridge = get_driver("tool_bridges", "native_mcp")
    rendered = bridge.render_servers(servers, {"firecrawl": OptIn(["search"])})
    assert rendered["firecrawl"] == {
        "url": "https://example.invalid/mcp", "bearer_token_env_var": "FIRECRAWL_API_KEY",
        "enabled": True, "required": True, "enabled_tools": ["search", "scrape"],
        "disabled_tools": ["scrape"], "default_tools_approval_mode": "writes",
    }
    assert rendered["ida_pro"]["enabled"] is False and rendered["ida_pro"]["required"] is False
    assert rendered["ida_pro"]["command"] == "/usr/local/bin/ida-mcp"
    all_tools = bridge.render_servers(servers, {"ida_pro": OptIn(required=False)})["ida_pro"]
    assert all_tools["disabled_tools"] == [] and all_tools["required"] is False
    assert bridge.env_names(servers, {"firecrawl": OptIn(), "ida_pro": OptIn()}) == (
        ["IDA_MCP_TOKEN"], ["FIRECRAWL_API_KEY"])


@pytest.mark.parametrize("body, message", [
    ('transport = "stdio"\nenabled_tools = ["a"]', "needs `command`"),
    ('transport = "streamable_http"\nurl = "ftp://x"\nenabled_tools = ["a"]', "http(s) `url`"),
    ('transport = "stdio"\ncommand = "x"\nenabled_tools = ["a"]\ncolour = 1', "colour"),
    ('transport = "stdio"\ncommand = "x"\nenabled_tools = ["a"]\nenv_vars = ["1BAD"]',
     "not an environment variable name"),
])
def test_bad_declarations_name_file_and_server(tmp_path, body, message):
    (tmp_path / "bad.toml").write_text(f"schema_version = 1\n[tool_mcp_servers.s]\n{body}\n")
    with pytest.raises(ValueError, match=re.escape(message)) as err:
        load_tool_servers(tmp_path)
    assert "bad.toml" in str(err.value) and "tool_mcp_servers.s" in str(err.value)


def test_a_server_declared_twice_names_both_files(tmp_path):
    (tmp_path / "a.toml").write_text(FRAGMENT)
    (tmp_path / "b.toml").write_text(FRAGMENT)
    with pytest.raises(ValueError, match="declared twice.*a.toml.*b.toml"):
        load_tool_servers(tmp_path)


def test_http_bearer_values_with_control_characters_are_refused_by_name():
    with pytest.raises(RuntimeError, match="tool MCP HTTP environment variable FIRECRAWL_API_KEY"):
        check_http_header_value("FIRECRAWL_API_KEY", "abc\r\nX-Injected: 1")
    assert check_http_header_value("K", "plain") == "plain"

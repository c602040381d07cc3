"""MCP server tools, the parts that need no server: the config file, the tool names offered to
the model, and a tool result as the model sees it. Connecting, listing and calling real stdio and
HTTP servers is in tests/integration/test_mcp_tools.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import mcp_types
import pytest

from gateway.engine.tools.mcp import (
    McpConnection,
    McpStartupError,
    McpToolError,
    ServerConfig,
    _specs,
    load_config,
    result_output,
    tool_name,
)


def config_file(tmp_path: Path, servers: Any) -> str:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}))
    return str(path)


def test_a_config_file_gives_one_server_per_enabled_entry(tmp_path: Path) -> None:
    [files, weather] = load_config(config_file(tmp_path, {
        "files": {"command": "npx", "args": ["-y", "server-files"], "env": {"TOKEN": "s3cret"},
                  "cwd": "data"},
        "weather": {"url": "https://weather.example/mcp",
                    "headers": {"Authorization": "Bearer abc"}},
        "off": {"command": "nothing", "disabled": True},
    }))
    assert files.stdio is not None and files.url is None
    assert (files.stdio.command, files.stdio.args) == ("npx", ["-y", "server-files"])
    assert files.stdio.cwd == str(tmp_path / "data")  # relative to the config file
    assert "s3cret" in files.secrets
    assert (weather.url, weather.headers) == ("https://weather.example/mcp",
                                              {"Authorization": "Bearer abc"})
    assert "Bearer abc" in weather.secrets


@pytest.mark.parametrize(("entry", "says"), [
    ({"command": "a", "url": "https://x"}, "exactly one of"),
    ({"url": "ftp://x"}, "http(s) URL"),
    ({"command": "a", "args": [1]}, "list of strings"),
    ({"url": "https://x", "type": "sse"}, "not supported"),
])
def test_a_mistake_in_an_entry_names_the_server(tmp_path: Path, entry: dict[str, Any],
                                                says: str) -> None:
    with pytest.raises(McpStartupError, match="'broken'") as refused:
        load_config(config_file(tmp_path, {"broken": entry}))
    assert says in str(refused.value)


def test_tool_names_are_made_valid_for_function_calling() -> None:
    assert tool_name("read_file") == "read_file"
    assert tool_name("files.read file!") == "files_read_file_"
    assert tool_name("x" * 100) == "x" * 64


def tool(name: str) -> mcp_types.Tool:
    return mcp_types.Tool(name=name, description=f"The {name} tool",
                          input_schema={"type": "object", "properties": {}})


def test_a_name_two_servers_offer_is_prefixed_with_each_server() -> None:
    files, docs = (McpConnection(ServerConfig(name, url="https://x")) for name in ("files", "docs"))
    specs = _specs([(files, [tool("search"), tool("read.file")]), (docs, [tool("search")])])
    assert set(specs) == {"files__search", "docs__search", "read_file"}
    assert specs["read_file"].description == "The read.file tool"
    assert specs["read_file"].parameters == {"type": "object", "properties": {}}


def test_a_result_is_its_structured_content_or_its_text() -> None:
    text = mcp_types.TextContent(type="text", text="21 °C")
    assert result_output(mcp_types.CallToolResult(content=[text])) == "21 °C"
    structured = mcp_types.CallToolResult(content=[text], structured_content={"celsius": 21})
    assert result_output(structured) == {"celsius": 21}
    with pytest.raises(McpToolError, match="no such city"):
        result_output(mcp_types.CallToolResult(
            content=[mcp_types.TextContent(type="text", text="no such city")], is_error=True))

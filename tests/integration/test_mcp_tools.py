"""MCP servers as server tools: real MCP servers (stdio subprocess, streamable HTTP on loopback)
reached through `open_mcp_tools`, then one run through a real gateway process."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.engine.loop import ServerToolSpec
from gateway.engine.tools.context import ToolContext, bind_tool_call, bind_tool_context
from gateway.engine.tools.mcp import McpStartupError, McpToolError, open_mcp_tools
from tests.conftest import scripted_env
from tests.support.gateway_server import ROOT, USER, free_port
from tests.support.inprocess_app import InProcessGateway
from tests.support.mcp_server import HttpMcpServer
from tests.support.scripted_model import ScriptedModel
from tests.support.sse import run_events, text_of

TOKEN = "mcp-secret-token-5678"


def stdio_entry(*args: str, **extra: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": ["-m", "tests.support.mcp_server", *args],
            "cwd": str(ROOT), **extra}


def write_config(tmp_path: Path, servers: dict[str, Any]) -> str:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}))
    return str(path)


@contextlib.asynccontextmanager
async def mcp_tools(tmp_path: Path, servers: dict[str, Any], **kwargs: Any
                    ) -> AsyncIterator[dict[str, ServerToolSpec]]:
    async with contextlib.AsyncExitStack() as stack:
        yield await open_mcp_tools(write_config(tmp_path, servers), stack, **kwargs)


@pytest.fixture(scope="module")
def http_server() -> Iterator[HttpMcpServer]:
    server = HttpMcpServer("--token", TOKEN).start()
    yield server
    server.stop()


@pytest.mark.sqlite_only  # the MCP client alone: no gateway, no store
async def test_stdio_server_tools_are_listed_and_called(tmp_path: Path):
    async with mcp_tools(tmp_path, {"local": stdio_entry()}) as tools:
        assert {"add", "lookup_city", "explode"} <= set(tools)
        add = tools["add"]
        assert add.description == "Add two integers and return the sum as text."
        assert add.parameters["properties"].keys() == {"a", "b"}
        assert add.parameters["required"] == ["a", "b"]

        assert await add.call({"a": 2, "b": 40}) == "42"  # text content
        assert await tools["lookup_city"].call({"name": "paris"}) == {  # structuredContent
            "name": "Paris", "country": "France", "population": 2102650}


@pytest.mark.sqlite_only  # the MCP client alone: no gateway, no store
async def test_an_mcp_tool_gets_its_calls_id_and_idempotency_key_in_meta(tmp_path: Path):
    """Inside a call, the request's `_meta` names the call, so an MCP tool can make its
    effect idempotent (docs/human-in-the-loop.md, "Exactly once")."""
    async def in_a_call(tools: dict[str, ServerToolSpec]) -> Any:
        bind_tool_context(ToolContext("p1", "thr_1", "run_1", "alice"))
        bind_tool_call("call_9")
        return await tools["call_meta"].call({})

    async with mcp_tools(tmp_path, {"local": stdio_entry()}) as tools:
        meta = await asyncio.create_task(in_a_call(tools))
    assert meta == {"gateway/projectId": "p1", "gateway/userScope": "alice",
                    "gateway/signedIn": False, "gateway/threadId": "thr_1",
                    "gateway/runId": "run_1", "gateway/toolCallId": "call_9",
                    "gateway/idempotencyKey": "thr_1:call_9"}


@pytest.mark.sqlite_only  # the MCP client alone: no gateway, no store
async def test_error_results_raise_with_the_tools_text(tmp_path: Path):
    async with mcp_tools(tmp_path, {"local": stdio_entry()}) as tools:
        with pytest.raises(McpToolError, match="exploded: kaboom"):
            await tools["explode"].call({"reason": "kaboom"})
        with pytest.raises(McpToolError, match="unknown city: Atlantis"):
            await tools["lookup_city"].call({"name": "Atlantis"})
        with pytest.raises(McpToolError, match="validation error"):
            await tools["add"].call({"a": "two"})
        assert await tools["add"].call({"a": 1, "b": 1}) == "2"  # the session is still usable


@pytest.mark.sqlite_only  # the MCP client alone: no gateway, no store
async def test_streamable_http_server_with_headers(tmp_path: Path, http_server: HttpMcpServer):
    entry = {"url": http_server.url, "headers": {"Authorization": f"Bearer {TOKEN}"}}
    async with mcp_tools(tmp_path, {"remote": entry}) as tools:
        assert await tools["add"].call({"a": 3, "b": 4}) == "7"
        assert (await tools["lookup_city"].call({"name": "Lima"}))["country"] == "Peru"


@pytest.mark.sqlite_only  # the MCP client alone: no gateway, no store
async def test_rejected_http_server_fails_start_up_without_leaking_the_token(
        tmp_path: Path, http_server: HttpMcpServer):
    entry = {"url": http_server.url, "headers": {"Authorization": f"Bearer {TOKEN}-wrong"}}
    with pytest.raises(McpStartupError) as failure:
        async with mcp_tools(tmp_path, {"remote": entry}):
            pass
    message = str(failure.value)
    assert "'remote'" in message and "failed to start" in message and "HTTP 401" in message
    assert TOKEN not in message


@pytest.mark.sqlite_only  # the MCP client alone: no gateway, no store
async def test_unreachable_servers_fail_start_up_naming_each(tmp_path: Path):
    servers = {
        "good": stdio_entry(),
        "closed-port": {"url": f"http://127.0.0.1:{free_port()}/mcp"},
        "no-binary": {"command": str(tmp_path / "no-such-server")},
    }
    with pytest.raises(McpStartupError) as failure:
        async with mcp_tools(tmp_path, servers):
            pass
    message = str(failure.value)
    assert "'closed-port' (streamable HTTP) failed to start" in message
    assert "'no-binary'" in message and "No such file" in message
    assert "'good'" not in message


@pytest.mark.sqlite_only  # the MCP client alone: no gateway, no store
async def test_silent_server_times_out(tmp_path: Path):
    mute = {"command": sys.executable, "args": ["-c", "import time; time.sleep(60)"]}
    with pytest.raises(McpStartupError, match="'mute'.*no answer within 1 s"):
        async with mcp_tools(tmp_path, {"mute": mute}, connect_timeout=1):
            pass


@pytest.mark.parametrize(("document", "expected"), [
    ('{"servers": {}}', 'needs an object "mcpServers"'),
    ("{not json", "is not valid JSON"),
    ('{"mcpServers": {"x": {"command": "a", "url": "http://h/mcp"}}}', "exactly one of"),
    ('{"mcpServers": {"x": {"url": "ftp://h/mcp"}}}', "must be an http"),
    ('{"mcpServers": {"x": {"url": "http://h/sse", "type": "sse"}}}', "'sse' is not supported"),
    ('{"mcpServers": {"x": {"command": "a", "args": "b"}}}', '"args" must be a list'),
])
@pytest.mark.sqlite_only  # the MCP client alone: no gateway, no store
async def test_invalid_config_is_refused(tmp_path: Path, document: str, expected: str):
    path = tmp_path / "mcp.json"
    path.write_text(document)
    with pytest.raises(McpStartupError, match=expected):
        await open_mcp_tools(str(path), contextlib.AsyncExitStack())


@pytest.mark.sqlite_only  # the MCP client alone: no gateway, no store
async def test_missing_config_file_is_refused(tmp_path: Path):
    with pytest.raises(McpStartupError, match="cannot read MCP config"):
        await open_mcp_tools(str(tmp_path / "absent.json"), contextlib.AsyncExitStack())


@pytest.mark.sqlite_only  # the MCP client alone: no gateway, no store
async def test_colliding_names_get_server_prefixes_and_reach_their_server(tmp_path: Path):
    servers = {
        "alpha": stdio_entry(env={"WHO": "alpha"}),
        "beta": stdio_entry("--prefix", "beta_", env={"WHO": "beta"}),
        "off": {**stdio_entry(), "disabled": True},
    }
    async with mcp_tools(tmp_path, servers) as tools:
        assert {"alpha__add", "beta__add", "alpha__read_env", "beta__read_env"} <= set(tools)
        assert "add" not in tools and "read_env" not in tools
        assert {"lookup_city", "beta_lookup_city"} <= set(tools)  # distinct names stay as-is
        assert all(not name.startswith("off__") for name in tools)
        assert await tools["alpha__read_env"].call({"variable": "WHO"}) == "alpha"
        assert await tools["beta__read_env"].call({"variable": "WHO"}) == "beta"


@pytest.mark.sqlite_only  # the MCP client alone: no gateway, no store
async def test_stdio_server_gets_its_env_but_not_the_gateways(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("GATEWAY_MODEL_API_KEY", "sk-must-not-leak")
    async with mcp_tools(tmp_path, {"local": stdio_entry(env={"REGION": "eu"})}) as tools:
        assert await tools["read_env"].call({"variable": "REGION"}) == "eu"
        assert await tools["read_env"].call({"variable": "GATEWAY_MODEL_API_KEY"}) == "<unset>"


@pytest.mark.sqlite_only  # the MCP client alone: no gateway, no store
async def test_calls_from_other_tasks_and_closing_from_the_opener(tmp_path: Path):
    """The lifespan task opens and closes; run tasks call concurrently."""
    stack = contextlib.AsyncExitStack()
    tools = await open_mcp_tools(write_config(tmp_path, {"local": stdio_entry()}), stack)
    add = tools["add"]
    results = await asyncio.gather(*(asyncio.create_task(add.call({"a": i, "b": i}))
                                     for i in range(8)))
    assert results == [str(2 * i) for i in range(8)]
    await stack.aclose()
    with pytest.raises(McpToolError, match="'local' is not connected"):
        await add.call({"a": 1, "b": 2})


@pytest.mark.sqlite_only  # the MCP client alone: no gateway, no store
async def test_a_call_cut_by_the_loops_timeout_leaves_the_session_usable(tmp_path: Path):
    async with mcp_tools(tmp_path, {"local": stdio_entry()}) as tools:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.5):  # as `run_agent` bounds every server tool
                await tools["slow"].call({"seconds": 30})
        assert await tools["slow"].call({"seconds": 0}) == "waited 0.0 s"
        assert await tools["add"].call({"a": 5, "b": 5}) == "10"


@pytest.mark.sqlite_only  # the MCP client alone: no gateway, no store
async def test_a_server_that_dies_turns_calls_into_errors(tmp_path: Path):
    async with mcp_tools(tmp_path, {"local": stdio_entry()}) as tools:
        with pytest.raises(McpToolError, match="'local'"):
            await asyncio.create_task(tools["crash"].call({}))
        with pytest.raises(McpToolError, match="'local'"):
            await asyncio.create_task(tools["add"].call({"a": 1, "b": 2}))
        await asyncio.sleep(0.2)  # the dead session must not cancel this (the opening) task
    # leaving the block closed the dead session without hanging or raising


@pytest.fixture(scope="module")
def mcp_client(scripted_model: ScriptedModel, tmp_path_factory: pytest.TempPathFactory
               ) -> Iterator[httpx.Client]:
    """A gateway app whose server tools come from the stdio MCP test server."""
    workdir = tmp_path_factory.mktemp("mcp-gateway")
    config = write_config(workdir, {"local": stdio_entry()})
    server = InProcessGateway(workdir, scripted_env(
        scripted_model, GATEWAY_MCP_SERVERS=config, GATEWAY_MAX_ATTACHMENT_BYTES="100000",
        GATEWAY_MAX_EMBEDDED_RESOURCES="2"))
    server.start()
    try:
        with server.client(event_hooks=USER, timeout=30,
                           headers={"x-api-key": "test-key"}) as client:
            yield client
    finally:
        server.stop()


def ask(client: httpx.Client, text: str) -> list[Any]:
    return run_events(client, "POST", "/v1/threads/runs", json={
        "message": {"role": "user", "content": [{"type": "text", "text": text}]}})


def test_run_calls_an_mcp_tool_and_continues(mcp_client: httpx.Client,
                                             scripted_model: ScriptedModel):
    scripted_model.enqueue(
        [{"tool_call": {"index": 0, "id": "call_city", "name": "lookup_city",
                        "arguments": '{"name": '}},
         {"tool_call": {"index": 0, "arguments": '"Paris"}'}}],
        [{"content": "Paris is in France."}])
    events = ask(mcp_client, "Where is Paris?")

    types = [e.type for e in events]
    assert types[0] == "RUN_STARTED" and types[-1] == "RUN_FINISHED"
    start = next(e for e in events if e.type == "TOOL_CALL_START")
    assert start.data["toolCallName"] == "lookup_city"
    assert start.data["toolCallId"] == "call_city"
    call_events = [e.type for e in events if e.type.startswith("TOOL_CALL")
                   and e.data.get("toolCallId") == "call_city"]
    assert call_events[0] == "TOOL_CALL_START"
    assert call_events.index("TOOL_CALL_ARGS") < call_events.index("TOOL_CALL_END")
    assert call_events[-1] == "TOOL_CALL_RESULT"
    result = next(e for e in events if e.type == "TOOL_CALL_RESULT")
    assert result.data["messageId"] == start.data["parentMessageId"]
    assert json.loads(result.data["content"]) == {
        "name": "Paris", "country": "France", "population": 2102650}
    assert types.index("TOOL_CALL_RESULT") < types.index("TEXT_MESSAGE_START")
    assert text_of(events) == "Paris is in France."

    assert len(scripted_model.requests) == 2  # one run, two model turns
    offered = [t["function"]["name"] for t in scripted_model.requests[0]["tools"]]
    assert "lookup_city" in offered and "add" in offered
    tool_messages = [m for m in scripted_model.requests[-1]["messages"] if m["role"] == "tool"]
    assert len(tool_messages) == 1
    assert tool_messages[0]["tool_call_id"] == "call_city"
    assert json.loads(tool_messages[0]["content"])["country"] == "France"

    thread_id = events[0].data["threadId"]
    messages = mcp_client.get(f"/v1/threads/{thread_id}/messages").json()["messages"]
    blocks = [b for m in messages for b in m["content"]]
    tool_use = next(b for b in blocks if b["type"] == "tool_use")
    assert tool_use == {"type": "tool_use", "id": "call_city", "name": "lookup_city",
                        "input": {"name": "Paris"}}
    tool_result = next(b for b in blocks if b["type"] == "tool_result")
    assert tool_result["toolUseId"] == "call_city"
    assert "isError" not in tool_result
    assert json.loads(tool_result["content"][0]["text"])["population"] == 2102650


def test_failing_mcp_tool_is_an_error_result_and_the_run_goes_on(
        mcp_client: httpx.Client, scripted_model: ScriptedModel):
    scripted_model.enqueue(
        [{"tool_call": {"index": 0, "id": "call_x", "name": "explode",
                        "arguments": '{"reason": "no fuel"}'}}],
        [{"content": "The tool failed."}])
    events = ask(mcp_client, "Explode, please.")

    assert events[-1].type == "RUN_FINISHED"
    result = next(e for e in events if e.type == "TOOL_CALL_RESULT")
    assert "exploded: no fuel" in result.data["content"]
    assert text_of(events) == "The tool failed."
    tool_message = next(m for m in scripted_model.requests[-1]["messages"] if m["role"] == "tool")
    assert "exploded: no fuel" in tool_message["content"]
    thread_id = events[0].data["threadId"]
    messages = mcp_client.get(f"/v1/threads/{thread_id}/messages").json()["messages"]
    tool_result = next(b for m in messages for b in m["content"] if b["type"] == "tool_result")
    assert tool_result["isError"] is True


def with_resources(text: str, *uris: str, embed: bool = True) -> dict[str, Any]:
    content = [{"type": "text", "text": text},
               *({"type": "resource", "resource": {"uri": uri}} for uri in uris)]
    return {"message": {"role": "user", "content": content}, "embedResources": embed}


def test_embed_resources_reads_the_agents_mcp_server_for_the_model(
        mcp_client: httpx.Client, scripted_model: ScriptedModel):
    """`embedResources`: a resource the message references by URI is read from the MCP server
    that lists it, and the model gets its text; without the option, only the URI."""
    scripted_model.enqueue([{"content": "Read it."}], [{"content": "Only the name."}])
    events = run_events(mcp_client, "POST", "/v1/threads/runs",
                        json=with_resources("Summarise", "test://notes/welcome"))
    assert text_of(events) == "Read it."
    [asked] = [m for m in scripted_model.requests[-1]["messages"] if m["role"] == "user"]
    assert {"type": "text", "text": "Resource test://notes/welcome:\nWelcome to the test "
            "server."} in asked["content"]
    thread_id = events[0].data["threadId"]
    stored = mcp_client.get(f"/v1/threads/{thread_id}/messages").json()["messages"][0]
    assert stored["content"][1] == {"type": "resource", "resource": {
        "uri": "test://notes/welcome", "mimeType": "text/plain",
        "text": "Welcome to the test server."}}

    run_events(mcp_client, "POST", "/v1/threads/runs",
               json=with_resources("Summarise", "test://notes/welcome", embed=False))
    assert "Welcome to the test server" not in json.dumps(scripted_model.requests[-1])


@pytest.mark.parametrize(("uris", "status", "code"), [
    (["file:///etc/passwd"], 400, "UNKNOWN_RESOURCE"),
    (["https://example.com/notes/welcome"], 400, "UNKNOWN_RESOURCE"),
    (["test://notes/welcome"] * 3, 400, "TOO_MANY_RESOURCES"),
    (["test://notes/big"], 413, "RESOURCE_TOO_LARGE"),
])
def test_embed_resources_refuses_before_the_run(mcp_client: httpx.Client,
                                                scripted_model: ScriptedModel,
                                                uris: list[str], status: int, code: str):
    """Only what the agent's MCP servers list is read, within the count and size bounds;
    anything else is a problem+json answer and no run starts."""
    asked = len(scripted_model.requests)
    response = mcp_client.post("/v1/threads/runs", json=with_resources("Read", *uris))
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    assert response.json()["code"] == code
    assert len(scripted_model.requests) == asked

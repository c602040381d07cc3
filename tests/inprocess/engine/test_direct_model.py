"""The direct adapter against a real OpenAI-compatible upstream on loopback (the scripted
model): what it sends, the deltas it reads, and its errors worded as litellm's.

The full comparison with the litellm adapter, recorded provider streams and disconnects are
in tests/integration/test_model_adapters.py; these are the core cases, one adapter, fast.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from gateway.engine.deltas import (
    Finish,
    ModelError,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    Usage,
)
from gateway.engine.models import socket_model
from gateway.engine.models.adapters import model_adapter
from gateway.engine.models.direct import DirectModel
from gateway.engine.models.litellm_model import ModelRequest
from gateway.services import load_litellm
from tests.support.gateway_server import free_port
from tests.support.model_stream import HI, outcome
from tests.support.scripted_model import ScriptedModel

load_litellm()
KEY = "sk-test-secret-key-1234"


def direct(base_url: str) -> DirectModel:
    model = model_adapter("openai/scripted", base_url, KEY, "direct")
    assert isinstance(model, DirectModel)
    return model


async def closed_outcome(model: DirectModel, request: ModelRequest | None = None) -> list[Any]:
    try:
        return await outcome(model, request)
    finally:
        await model.aclose()


async def test_runs_one_after_another_reuse_one_connection(scripted_model: ScriptedModel) -> None:
    """A stream is read to its end after `[DONE]`, so its connection goes back to the pool: a
    new connection per run would cost a hosted provider's TLS handshake each time."""
    scripted_model.enqueue([{"content": "one"}], [{"content": "two"}], [{"content": "three"}])
    model = direct(scripted_model.base_url)
    try:
        texts = [await outcome(model) for _ in range(3)]
    finally:
        await model.aclose()
    assert [seen[0] for seen in texts] == [TextDelta("one"), TextDelta("two"), TextDelta("three")]
    ports = scripted_model.peers
    assert len(ports) == 3 and len(set(ports)) == 1


async def test_it_streams_reasoning_text_tool_calls_and_usage(
        scripted_model: ScriptedModel) -> None:
    scripted_model.enqueue([
        {"reasoning": "Look it up."}, {"content": "Checking."},
        {"tool_call": {"index": 0, "id": "call_1", "name": "get_weather",
                       "arguments": '{"city"'}},
        {"tool_call": {"index": 0, "arguments": ': "Paris"}'}},
        {"usage": {"prompt_tokens": 11, "completion_tokens": 4,
                   "completion_tokens_details": {"reasoning_tokens": 3},
                   "prompt_tokens_details": {"cached_tokens": 8}}}])
    tool = {"type": "function", "function": {"name": "get_weather", "parameters": {}}}

    seen = await closed_outcome(direct(scripted_model.base_url),
                                ModelRequest(messages=HI, tools=[tool], max_tokens=50))

    assert seen == [ReasoningDelta("Look it up."), TextDelta("Checking."),
                    ToolCallDelta(0, "call_1", "get_weather", '{"city"'),
                    ToolCallDelta(0, None, None, ': "Paris"}'), Finish("tool_calls"),
                    Usage(11, 4, reasoning_tokens=3, cached_input_tokens=8)]
    [sent] = scripted_model.requests
    assert (sent["model"], sent["stream"], sent["max_tokens"]) == ("scripted", True, 50)
    assert sent["messages"] == HI and sent["tools"] == [tool]


async def test_another_model_of_the_same_upstream_is_streamed_directly_by_its_name(
        scripted_model: ScriptedModel) -> None:
    scripted_model.enqueue([{"content": "From the other one."}])
    seen = await closed_outcome(direct(scripted_model.base_url),
                                ModelRequest(messages=HI, model="openai/other"))
    assert TextDelta("From the other one.") in seen
    assert [r["model"] for r in scripted_model.requests] == ["other"]


@pytest.mark.parametrize(("status", "code", "retryable"), [
    (429, "LLM_RATE_LIMITED", True), (401, "LLM_AUTHENTICATION_ERROR", False),
    (400, "LLM_CLIENT_ERROR", False), (503, "LLM_SERVER_ERROR", True)])
async def test_an_error_answer_is_classified_without_the_key(
        scripted_model: ScriptedModel, status: int, code: str, retryable: bool) -> None:
    scripted_model.enqueue([{"error": status, "message": f"refused for key {KEY}"}])
    [error] = await closed_outcome(direct(scripted_model.base_url))
    assert isinstance(error, ModelError)
    assert (error.code, error.retryable, error.status) == (code, retryable, status)
    assert KEY not in error.message


async def test_a_stream_cut_after_content_keeps_the_content_then_fails(
        scripted_model: ScriptedModel) -> None:
    scripted_model.enqueue([{"content": "Partial "}, {"error": 500, "message": "cut"}])
    seen = await closed_outcome(direct(scripted_model.base_url))
    assert seen[0] == TextDelta("Partial ")
    assert isinstance(seen[-1], ModelError) and seen[-1].code == "LLM_SERVER_ERROR"


async def test_an_upstream_nothing_listens_on_is_unreachable() -> None:
    [error] = await closed_outcome(direct(f"http://127.0.0.1:{free_port()}/v1"))
    assert isinstance(error, ModelError)
    assert (error.code, error.retryable, error.status) == ("LLM_UNREACHABLE", True, 502)


def chunk(text: str) -> str:
    payload = {"choices": [{"index": 0, "delta": {"content": text}}]}
    return f"data: {json.dumps(payload)}\n\n"


async def test_an_event_in_many_pieces_is_read_whole(scripted_model: ScriptedModel) -> None:
    """A large chunk (a tool call's arguments sent at once) arrives in many reads."""
    text = "x" * 20_000
    scripted_model.enqueue([{"raw": {"body": chunk(text) + "data: [DONE]\n\n", "piece": 100}}])
    seen = await closed_outcome(direct(scripted_model.base_url))
    assert seen == [TextDelta(text)]


async def test_an_upstream_that_never_ends_an_event_fails_the_stream_not_the_memory(
        scripted_model: ScriptedModel, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """Past `MAX_EVENT_BYTES` without an event's end (here: without a newline at all) the
    stream fails as a cut stream does, after what came before it."""
    monkeypatch.setattr(socket_model, "MAX_EVENT_BYTES", 4096)
    body = chunk("Before ") + "data: " + "y" * 10_000
    scripted_model.enqueue([{"raw": {"body": body, "piece": 500}}])
    seen = await closed_outcome(direct(scripted_model.base_url))
    assert seen[0] == TextDelta("Before ")
    assert isinstance(seen[-1], ModelError) and seen[-1].code == "LLM_SERVER_ERROR"
    assert "an event larger than 4096 bytes" in caplog.text


async def test_an_error_answer_that_never_ends_is_read_only_in_part() -> None:
    """Only an error answer's message is used: the gateway reads at most `MAX_ERROR_BYTES` of
    it, so an upstream (or a proxy before it) whose error body never ends still fails the call
    at once instead of holding it and filling memory."""
    async def endless_503(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n")
        try:
            while True:
                writer.write(b"1000\r\n" + b"busy " * 819 + b"b\r\n")
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            writer.close()

    server = await asyncio.start_server(endless_503, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with asyncio.timeout(30):
            [error] = await closed_outcome(direct(f"http://127.0.0.1:{port}/v1"))
    finally:
        server.close()
    assert isinstance(error, ModelError)
    assert (error.code, error.status) == ("LLM_SERVER_ERROR", 503)


@pytest.mark.parametrize("exempt", [False, True])
async def test_the_proxy_environment_applies_as_with_httpx(
        scripted_model: ScriptedModel, monkeypatch: pytest.MonkeyPatch, exempt: bool) -> None:
    """HTTP_PROXY sends the model call through the proxy (here the scripted model, answering
    the proxied request for a host that does not exist), and NO_PROXY exempts a host from it,
    read once when the adapter's pool is made (`upstream_pool.env_proxy`)."""
    monkeypatch.setenv("HTTP_PROXY", scripted_model.base_url.removesuffix("/v1"))
    monkeypatch.setenv("NO_PROXY", "upstream.invalid" if exempt else "")
    scripted_model.enqueue([{"content": "proxied"}])
    seen = await closed_outcome(direct("http://upstream.invalid/v1"))
    if exempt:
        assert isinstance(seen[0], ModelError) and seen[0].code == "LLM_UNREACHABLE"
    else:
        assert seen[0] == TextDelta("proxied")

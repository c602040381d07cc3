"""A non-streamed call (thread names, suggestions) survives a connection the upstream drops
before answering: litellm's pooled keep-alive connection can be closed by the upstream at the
moment it is reused, which the user would otherwise see as a failed suggestion."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest

from gateway.engine.deltas import ModelError
from gateway.engine.models.litellm_model import LiteLLMModel
from gateway.services import load_litellm

load_litellm()

ANSWER = {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "m",
          "choices": [{"index": 0, "finish_reason": "stop",
                       "message": {"role": "assistant", "content": "Trip to Paris"}}],
          "usage": {"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6}}


class DroppingUpstream:
    """Closes the first `drops` connections as soon as a request arrives, answers the rest."""

    def __init__(self, drops: int) -> None:
        self.drops, self.requests = drops, 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                       if line.lower().startswith(b"content-length:")), 0)
        await reader.readexactly(length)
        self.requests += 1
        if self.requests <= self.drops:
            writer.close()
            return
        body = json.dumps(ANSWER).encode()
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                     + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body)
        await writer.drain()
        writer.close()


@pytest.fixture
async def upstream(request: pytest.FixtureRequest) -> AsyncIterator[tuple[DroppingUpstream, str]]:
    dropping = DroppingUpstream(request.param)
    server = await asyncio.start_server(dropping.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        yield dropping, f"http://127.0.0.1:{port}/v1"


@pytest.mark.parametrize("upstream", [1], indirect=True)
async def test_a_dropped_connection_is_retried_once(upstream: tuple[DroppingUpstream, str]) -> None:
    dropping, base = upstream
    model = LiteLLMModel("openai/m", base, "sk-1")
    answer = await model.complete([{"role": "user", "content": "name this"}])
    assert (answer, dropping.requests) == ("Trip to Paris", 2)


@pytest.mark.parametrize("upstream", [2], indirect=True)
async def test_only_once(upstream: tuple[DroppingUpstream, str]) -> None:
    dropping, base = upstream
    model = LiteLLMModel("openai/m", base, "sk-1")
    with pytest.raises(ModelError) as failed:
        await model.complete([{"role": "user", "content": "name this"}])
    assert failed.value.status >= 500 and dropping.requests == 2

"""What the adapters that read a provider's stream off the socket share: `direct.py` (an
OpenAI-compatible chat-completions stream) and `native.py` (Anthropic's and Gemini's own
formats).

Both keep of litellm what is not per token, so this holds the parts that make the two paths
one to a client and to an operator: the connection pool's life (one aiohttp pool per upstream,
made at start-up: `upstream_pool`), the non-streamed calls (litellm's, unchanged), the error
mapping (litellm's exception mapping for the provider, then `LiteLLMModel.failed`, which
classifies and logs once), and the reading of an SSE body as bytes, with bounds on what an
upstream can make the gateway hold.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import httpx
import orjson

from ..deltas import ModelError
from .litellm_model import LiteLLMModel, UsageSink
from .upstream_pool import UpstreamPool

# litellm's defaults for a request: 600 s between bytes, no overall deadline (the run's own
# deadline is the caller's business).
READ_TIMEOUT_SECONDS = 600.0
CONNECT_TIMEOUT_SECONDS = 10.0
DRAIN_SECONDS = 1.0  # reading what follows the stream's end, at most (`drain`)
# Bounds on what an upstream can make the gateway hold: one SSE event (a chunk; a provider may
# send a whole tool call's arguments in one) and an error answer's body, which only its message
# is read from.
MAX_EVENT_BYTES = 8 * 1024 * 1024
MAX_ERROR_BYTES = 64 * 1024
# What a transport failure is: a timeout (aiohttp's read and connect timeouts are
# TimeoutErrors), a refused or cut connection, or a garbled stream.
TRANSPORT_FAILURES = (TimeoutError, aiohttp.ClientError, orjson.JSONDecodeError)


@dataclass(kw_only=True)
class SocketModel:
    """An upstream streamed by the gateway itself, its connections in one pool.

    `model` is the name the upstream knows (litellm's provider prefix removed), `litellm_model`
    the full litellm string, used for the non-streamed calls and the error mapping; `fallback`
    is litellm's path for them (and for a run's model that this upstream does not serve).
    """

    model: str
    api_key: str | None
    provider: str
    litellm_model: str
    fallback: LiteLLMModel
    _pool: UpstreamPool | None = field(default=None, repr=False)
    _names: dict[str, str | None] = field(default_factory=dict, repr=False)

    @property
    def client(self) -> UpstreamPool:
        if self._pool is None:
            self._pool = self.new_pool()
        return self._pool

    def new_pool(self) -> UpstreamPool:
        """The pool of connections to the upstream."""
        raise NotImplementedError

    def open(self) -> None:
        """Make the upstream's pool now: its TLS context is costly to load, better paid at
        start-up than in the first run's model call."""
        self.client  # noqa: B018 (made on first access)

    async def aclose(self) -> None:
        if self._pool is not None:
            await self._pool.aclose()
            self._pool = None

    async def complete(self, messages: list[dict[str, Any]], max_tokens: int = 200,
                       task: str | None = None, usage: UsageSink | None = None) -> str:
        """Non-streamed calls are rare and not on the token path: litellm's, unchanged."""
        return await self.fallback.complete(messages, max_tokens, task, usage)

    def upstream_error(self, status: int, text: str,
                       headers: httpx.Headers | None = None) -> Exception:
        """An error answer (or a transport failure, as a 500) as litellm's adapter for the
        provider raises it."""
        raise NotImplementedError

    async def answered_error(self, response: aiohttp.ClientResponse) -> ModelError:
        """The error an HTTP error answer is, from at most `MAX_ERROR_BYTES` of its body."""
        text = (await read_at_most(response, MAX_ERROR_BYTES)).decode(errors="replace")
        return self.mapped(self.upstream_error(response.status, text,
                                               httpx.Headers(list(response.headers.items()))))

    def transport_failure(self, exc: Exception) -> ModelError:
        """One of `TRANSPORT_FAILURES` as litellm reports it: a timeout as its `Timeout`,
        anything else as a 500."""
        if isinstance(exc, TimeoutError):
            from litellm.exceptions import Timeout

            timeout: Exception = Timeout(message=f"Request timed out: {exc}",
                                         model=self.litellm_model, llm_provider=self.provider)
            return self.mapped(timeout, exc)
        return self.mapped(self.upstream_error(500, str(exc) or type(exc).__name__), exc)

    def mapped(self, error: Exception, transport: Exception | None = None) -> ModelError:
        """Through litellm's exception mapping for the provider, then the gateway's
        classification (which also logs the failure once, with `transport`: the connection
        error, if that was the cause)."""
        from litellm.litellm_core_utils.exception_mapping_utils import exception_type

        try:
            mapped = exception_type(model=self.litellm_model, original_exception=error,
                                    custom_llm_provider=self.provider)
        except Exception as exc:  # exception_type raises the mapped exception
            mapped = exc
        return self.fallback.failed(mapped, transport)


async def drain(rest: AsyncIterator[bytes]) -> None:
    """Read a response to its end after the stream said it is over (what is left is the
    body's last bytes), so that its connection goes back to the pool: one whose response was
    left unread is closed, and the next run would pay for a new one (with a hosted provider, a
    TLS handshake: CPU here and round trips before the first token). Not for long, though: an
    upstream that keeps the stream open after its end loses its connection instead."""
    try:
        async with asyncio.timeout(DRAIN_SECONDS):
            async for _ in rest:
                pass
    except (TimeoutError, aiohttp.ClientError):
        pass


async def read_at_most(response: aiohttp.ClientResponse, limit: int) -> bytes:
    """The first `limit` bytes of `response`'s body; a longer body is not read further (its
    connection is closed rather than reused)."""
    body = bytearray()
    while len(body) < limit and (piece := await response.content.read(limit - len(body))):
        body += piece
    if not response.content.at_eof():
        response.close()
    return bytes(body)


async def sse_data(response: aiohttp.ClientResponse) -> AsyncIterator[bytes]:
    """The `data:` payloads of an SSE body, one per event (multi-line data joined by newlines).

    Works on raw bytes as they arrive (each read's, decompressed if the upstream compressed
    them): splitting and prefix checks on bytes cost less than decoding text lines, and orjson
    parses bytes directly. An event is at most `MAX_EVENT_BYTES`: an upstream that sends more
    without ending it (or without a newline) fails the stream rather than the process's memory.
    """
    buffer = b""  # the line not yet ended
    data: list[bytes] = []  # the data lines of the event not yet ended
    held = 0  # their bytes
    async for piece in response.content.iter_any():
        if b"\n" not in piece:  # a long line arriving in pieces is joined once, not re-split
            buffer += piece
            _check_event_size(held + len(buffer))
            continue
        lines = (buffer + piece).split(b"\n")
        buffer = lines.pop()
        for line in lines:
            if line.endswith(b"\r"):
                line = line[:-1]
            if not line:
                if data:
                    yield b"\n".join(data)
                    data, held = [], 0
            elif line.startswith(b"data:"):
                value = line[5:]
                data.append(value[1:] if value.startswith(b" ") else value)
                held += len(line)
            # comments (": ping"), `event:`, `id:` and `retry:` lines carry nothing for us
        _check_event_size(held + len(buffer))
    if buffer.startswith(b"data:"):
        value = buffer[5:]
        data.append(value[1:] if value.startswith(b" ") else value)
    if data:
        yield b"\n".join(data)


def _check_event_size(size: int) -> None:
    if size > MAX_EVENT_BYTES:
        raise aiohttp.ClientPayloadError(
            f"the upstream sent an event larger than {MAX_EVENT_BYTES} bytes")

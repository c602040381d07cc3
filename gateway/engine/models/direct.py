"""The direct adapter: an OpenAI-compatible chat-completions stream read straight off the socket.

litellm's streaming wrapper is costly per chunk (the openai SDK builds pydantic objects per
chunk, then litellm rebuilds its own and keeps every one for the stream's life); a
chat-completions SSE stream is simple enough to read cheaply (docs/decisions/0012). So for upstreams
that speak that protocol (OpenAI, vLLM, llama.cpp, Ollama, LM Studio, Groq, ...) the gateway
streams them itself, and litellm stays the path for every other provider and for non-streamed
calls (`complete`).

To a client the two paths are indistinguishable: the same deltas (`_deltas` mirrors
`model._deltas` on plain JSON), and errors go through litellm's own exception mapping and then
`LiteLLMModel.failed` (classified, and logged once), so codes, messages and key scrubbing are
those of the litellm path.

The connections are aiohttp's (`upstream_pool`, docs/decisions/0013). Cancelling or closing the stream closes the upstream connection at once;
an abandoned connection is never returned to the pool.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import aiohttp
import httpx
import orjson

from ..context_window import context_error
from ..deltas import (
    Delta,
    Finish,
    ModelError,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    Usage,
    usage_of,
)
from ..stream_contract import diagnosed, incomplete
from .litellm_model import LiteLLMModel, ModelRequest, UsageSink
from .reasoning import replayable
from .server_info import server_count, server_window
from .upstream_pool import UpstreamPool

# litellm's defaults for an OpenAI request: 600 s between bytes, no overall deadline (the run's
# own deadline is the caller's business).
READ_TIMEOUT_SECONDS = 600.0
CONNECT_TIMEOUT_SECONDS = 10.0
DRAIN_SECONDS = 1.0  # reading what follows `[DONE]`, at most (`_drain`)
# Bounds on what an upstream can make the gateway hold: one SSE event (a chunk; a provider may
# send a whole tool call's arguments in one) and an error answer's body, which only its message
# is read from.
MAX_EVENT_BYTES = 8 * 1024 * 1024
MAX_ERROR_BYTES = 64 * 1024
OPENAI_BASE = "https://api.openai.com/v1"


@dataclass
class DirectModel:
    """Streams from `api_base` + `/chat/completions`, its connections in one aiohttp session
    (`upstream_pool`).

    `model` is the name the upstream knows (litellm's provider prefix removed), `litellm_model`
    the full litellm string, used for the non-streamed calls and the error mapping.
    """

    model: str
    api_base: str
    api_key: str | None
    provider: str
    litellm_model: str
    fallback: LiteLLMModel
    _pool: UpstreamPool | None = field(default=None, repr=False)
    _names: dict[str, str | None] = field(default_factory=dict, repr=False)

    @property
    def client(self) -> UpstreamPool:
        if self._pool is None:
            headers = {"Accept": "text/event-stream"}
            if self.api_key:
                headers["Authorization"] = f"Bearer {self.api_key}"
            self._pool = UpstreamPool(self.api_base, headers, READ_TIMEOUT_SECONDS,
                                      CONNECT_TIMEOUT_SECONDS)
        return self._pool

    def open(self) -> None:
        """Make the upstream's pool now: its TLS context is costly to load, better paid at
        start-up than in the first run's model call."""
        self.client  # noqa: B018 (made on first access)

    async def aclose(self) -> None:
        if self._pool is not None:
            await self._pool.aclose()
            self._pool = None

    async def stream(self, request: ModelRequest) -> AsyncGenerator[Delta, None]:
        name = self.model
        if request.model and request.model != self.litellm_model:
            # A run that picked another allowed model (`GATEWAY_MODELS`): direct too if it is
            # served by the same upstream, else litellm's path for that model.
            found = self._upstream_name(request.model)
            if found is None:
                async for delta in self.fallback.stream(request):
                    yield delta
                return
            name = found
        body: dict[str, Any] = {
            "model": name,
            "messages": replayable(request.messages, False),
            "stream": True,
            "stream_options": {"include_usage": True},
            **request.options(),
        }
        if self.api_base == OPENAI_BASE and "max_tokens" in body:
            # OpenAI's own API takes the output cap under its newer name (its reasoning models
            # refuse the old one); other servers know `max_tokens`.
            body["max_completion_tokens"] = body.pop("max_tokens")
        try:
            async with self.client.post("/chat/completions", orjson.dumps(body)) as response:
                if response.status >= 400:
                    text = (await _read_at_most(response, MAX_ERROR_BYTES)).decode(
                        errors="replace")
                    raise self._status_error(response.status, text,
                                             httpx.Headers(list(response.headers.items())))
                try:
                    async for delta in self._deltas_of(_sse_data(response)):
                        yield delta
                except _Silent:
                    response.close()
                    raise await self._diagnosed(body) from None
                except BaseException:
                    response.close()  # left before its end: the connection is not reused
                    raise
        except ModelError:
            raise
        except TimeoutError as exc:  # aiohttp's read and connect timeouts are TimeoutErrors
            raise self._mapped(_timeout(exc, self.litellm_model, self.provider), exc) from None
        except (aiohttp.ClientError, orjson.JSONDecodeError) as exc:
            # A refused or cut connection, or a garbled stream: litellm reports these as a 500.
            raise self._mapped(_openai_error(500, str(exc) or type(exc).__name__), exc) from None

    async def _deltas_of(self, payloads: AsyncIterator[bytes]) -> AsyncGenerator[Delta, None]:
        """The deltas of a stream's `data:` payloads, up to `[DONE]` (then the body's rest is
        read, so that its connection goes back to the pool). A body that ends before `[DONE]`
        is incomplete (`stream_contract`), whatever it held."""
        reasoning: list[str] = []  # for a usage that does not break it down
        chunk: Any = None
        async for payload in payloads:
            if payload == b"[DONE]":
                await _drain(payloads)
                return
            chunk = orjson.loads(payload)
            if type(chunk) is not dict:
                raise incomplete("the stream held a payload that is not a chunk",
                                 payload.decode(errors="replace"), self.litellm_model)
            if "error" in chunk and not chunk.get("choices"):
                raise self._stream_error(chunk["error"])
            for delta in _deltas(chunk):
                if type(delta) is ReasoningDelta:
                    reasoning.append(delta.text)
                elif type(delta) is Usage and reasoning:
                    delta = with_reasoning_tokens(delta, reasoning)
                yield delta
        if chunk is None:
            raise _Silent
        raise incomplete("the upstream ended the stream without [DONE]", None,
                         self.litellm_model)

    async def _diagnosed(self, body: dict[str, Any]) -> ModelError:
        """The error of a stream that ended before it said a word (`200 OK`, then nothing):
        the same request once more, not streamed and capped at one token, to hear what the
        server says (`stream_contract.diagnosed`)."""
        asked = {k: v for k, v in body.items() if k not in ("stream", "stream_options")}
        asked.pop("max_completion_tokens", None)
        asked.update(stream=False, max_tokens=1)
        try:
            async with self.client.post("/chat/completions", orjson.dumps(asked)) as response:
                text = (await _read_at_most(response, MAX_ERROR_BYTES)).decode(errors="replace")
                if response.status >= 400:
                    return self._status_error(response.status, text,
                                              httpx.Headers(list(response.headers.items())))
        except (aiohttp.ClientError, TimeoutError) as exc:
            text = f"asking again failed: {exc!r}"
        return diagnosed(text, self.litellm_model)

    async def context_window(self) -> int | None:
        """The window the upstream says its model has (`server_window`), if it says."""
        return await server_window(self.api_base, self.api_key, self.model)

    async def count_tokens(self, texts: Sequence[str]) -> list[int] | None:
        """Tokens as the upstream's tokenizer counts them (`server_count`), for a call whose
        upstream reported no usage; None when it has no way to say."""
        return await server_count(self.api_base, self.api_key, self.model, texts)

    async def complete(self, messages: list[dict[str, Any]], max_tokens: int = 200,
                       task: str | None = None, usage: UsageSink | None = None) -> str:
        """Non-streamed calls are rare and not on the token path: litellm's, unchanged."""
        return await self.fallback.complete(messages, max_tokens, task, usage)

    def _upstream_name(self, model: str) -> str | None:
        """The upstream's name for `model` if litellm resolves it to this same upstream."""
        if model not in self._names:
            import litellm

            try:
                name, provider, _, base = litellm.get_llm_provider(
                    model, api_base=self.fallback.api_base, api_key=self.api_key)
            except Exception:
                name, provider, base = "", "", None
            same = provider == self.provider and (base or self.api_base) == self.api_base
            self._names[model] = name if same else None
        return self._names[model]

    def _status_error(self, status: int, text: str, headers: httpx.Headers) -> ModelError:
        """An HTTP error answer, worded as the openai SDK words it for litellm."""
        text = text.strip()
        body: Any = None
        try:
            body = orjson.loads(text)
            message = f"Error code: {status} - {body}"
        except orjson.JSONDecodeError:
            message = text or f"Error code: {status}"
        error = _openai_error(status, message, headers=headers,
                              body=body if isinstance(body, dict) else None)
        return self._mapped(error)

    def _stream_error(self, error: Any) -> ModelError:
        """An error event in the stream (after `200 OK`): a context-length error is told
        as a 400 would be (so the run can trim and retry), anything else as a 500."""
        message = error.get("message") if isinstance(error, dict) else str(error)
        code = error.get("code") if isinstance(error, dict) else None
        status = code if isinstance(code, int) else 500
        if code == "context_length_exceeded" or context_error(str(message or "")):
            status = 400
        return self._mapped(_openai_error(status,
                                          str(message or "An error occurred during streaming")))

    def _mapped(self, error: Exception, transport: Exception | None = None) -> ModelError:
        """Through litellm's own exception mapping, then the gateway's classification (which
        also logs the failure, with `transport`: the connection error, if that was the cause)."""
        from litellm.litellm_core_utils.exception_mapping_utils import exception_type

        try:
            mapped = exception_type(
                model=self.litellm_model, original_exception=error,
                custom_llm_provider=self.provider)
        except Exception as exc:  # exception_type raises the mapped exception
            mapped = exc
        return self.fallback.failed(mapped, transport)


async def _drain(rest: AsyncIterator[bytes]) -> None:
    """Read a response to its end after `[DONE]` (what is left is the body's last bytes), so
    that its connection goes back to the pool: one whose response was left unread is closed,
    and the next run would pay for a new one (with a hosted provider, a TLS handshake: CPU here
    and round trips before the first token). Not for long, though: an upstream that keeps the
    stream open after `[DONE]` loses its connection instead."""
    try:
        async with asyncio.timeout(DRAIN_SECONDS):
            async for _ in rest:
                pass
    except (TimeoutError, aiohttp.ClientError):
        pass


async def _read_at_most(response: aiohttp.ClientResponse, limit: int) -> bytes:
    """The first `limit` bytes of `response`'s body; a longer body is not read further (its
    connection is closed rather than reused)."""
    body = bytearray()
    while len(body) < limit and (piece := await response.content.read(limit - len(body))):
        body += piece
    if not response.content.at_eof():
        response.close()
    return bytes(body)


async def _sse_data(response: aiohttp.ClientResponse) -> AsyncIterator[bytes]:
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


class _Silent(Exception):
    """A stream that ended before its first payload (`DirectModel._diagnosed`)."""


def _check_event_size(size: int) -> None:
    if size > MAX_EVENT_BYTES:
        raise aiohttp.ClientPayloadError(
            f"the upstream sent an event larger than {MAX_EVENT_BYTES} bytes")


def _deltas(chunk: dict[str, Any]) -> list[Delta]:
    """`model._deltas` for a chunk as plain JSON."""
    out: list[Delta] = []
    usage = usage_of(chunk.get("usage"))
    if usage is not None:
        out.append(usage)
    for choice in chunk.get("choices") or ():
        delta = choice.get("delta") or {}
        reasoning = delta.get("reasoning_content")
        if reasoning:
            out.append(ReasoningDelta(reasoning))
        content = delta.get("content")
        if content:
            out.append(TextDelta(content))
        for call in delta.get("tool_calls") or ():
            function = call.get("function") or {}
            out.append(ToolCallDelta(
                index=call.get("index") or 0,
                id=call.get("id") or None,
                name=function.get("name") or None,
                arguments=function.get("arguments") or "",
            ))
        finish = choice.get("finish_reason")
        if finish:
            out.append(Finish(finish))
    return out


def with_reasoning_tokens(usage: Usage, reasoning: list[str]) -> Usage:
    """`usage` with its reasoning tokens counted from the streamed reasoning when the provider
    did not say (vLLM, llama.cpp): what litellm's stream wrapper does, so both paths report
    the same numbers."""
    if usage.reasoning_tokens:
        return usage
    from litellm import token_counter

    counted = token_counter(text="".join(reasoning), count_response_tokens=True)
    return replace(usage, reasoning_tokens=min(max(0, counted), usage.output_tokens))


def _openai_error(status: int, message: str, **extra: Any) -> Exception:
    from litellm.llms.openai.common_utils import OpenAIError

    error: Exception = OpenAIError(status_code=status, message=message, **extra)
    return error


def _timeout(exc: Exception, model: str, provider: str) -> Exception:
    from litellm.exceptions import Timeout

    error: Exception = Timeout(message=f"Request timed out: {exc}", model=model,
                               llm_provider=provider)
    return error

"""The direct adapter: an OpenAI-compatible chat-completions stream read straight off the socket.

litellm's streaming wrapper is costly per chunk (the openai SDK builds pydantic objects per
chunk, then litellm rebuilds its own and keeps every one for the stream's life); a
chat-completions SSE stream is simple enough to read cheaply (docs/decisions/0012). So for upstreams
that speak that protocol (OpenAI, vLLM, llama.cpp, Ollama, LM Studio, Groq, ...) the gateway
streams them itself, and litellm stays the path for every other provider and for non-streamed
calls (`complete`).

To a client the two paths are indistinguishable: the same deltas (`_deltas` mirrors
`model._deltas` on plain JSON), and errors go through litellm's own exception mapping and then
`LiteLLMModel.failed` (classified, and logged once: `socket_model`), so codes, messages and key
scrubbing are those of the litellm path.

The connections are aiohttp's (`upstream_pool`, docs/decisions/0013). Cancelling or closing
the stream closes the upstream connection at once; an abandoned connection is never returned to
the pool.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from dataclasses import dataclass, replace
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
from .litellm_model import ModelRequest
from .reasoning import replayable
from .server_info import server_count, server_window
from .socket_model import (
    CONNECT_TIMEOUT_SECONDS,
    MAX_ERROR_BYTES,
    READ_TIMEOUT_SECONDS,
    TRANSPORT_FAILURES,
    SocketModel,
    drain,
    read_at_most,
    sse_data,
)
from .upstream_pool import UpstreamPool

OPENAI_BASE = "https://api.openai.com/v1"


@dataclass(kw_only=True)
class DirectModel(SocketModel):
    """Streams from `api_base` + `/chat/completions`, its connections in one aiohttp session
    (`upstream_pool`)."""

    api_base: str

    def new_pool(self) -> UpstreamPool:
        headers = {"Accept": "text/event-stream"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return UpstreamPool(self.api_base, headers, READ_TIMEOUT_SECONDS,
                            CONNECT_TIMEOUT_SECONDS)

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
                    raise await self.answered_error(response)
                try:
                    async for delta in self._deltas_of(sse_data(response)):
                        yield delta
                except _Silent:
                    response.close()
                    raise await self._diagnosed(body) from None
                except BaseException:
                    response.close()  # left before its end: the connection is not reused
                    raise
        except ModelError:
            raise
        except TRANSPORT_FAILURES as exc:
            raise self.transport_failure(exc) from None

    async def _deltas_of(self, payloads: AsyncIterator[bytes]) -> AsyncGenerator[Delta, None]:
        """The deltas of a stream's `data:` payloads, up to `[DONE]` (then the body's rest is
        read, so that its connection goes back to the pool). A body that ends before `[DONE]`
        is incomplete (`stream_contract`), whatever it held."""
        reasoning: list[str] = []  # for a usage that does not break it down
        chunk: Any = None
        async for payload in payloads:
            if payload == b"[DONE]":
                await drain(payloads)
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
                text = (await read_at_most(response, MAX_ERROR_BYTES)).decode(errors="replace")
                if response.status >= 400:
                    return self.mapped(self.upstream_error(
                        response.status, text, httpx.Headers(list(response.headers.items()))))
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

    def upstream_error(self, status: int, text: str,
                       headers: httpx.Headers | None = None) -> Exception:
        """An HTTP error answer, worded as the openai SDK words it for litellm."""
        text = text.strip()
        body: Any = None
        try:
            body = orjson.loads(text)
            message = f"Error code: {status} - {body}"
        except orjson.JSONDecodeError:
            message = text or f"Error code: {status}"
        return _openai_error(status, message, headers=headers,
                             body=body if isinstance(body, dict) else None)

    def _stream_error(self, error: Any) -> ModelError:
        """An error event in the stream (after `200 OK`): a context-length error is told
        as a 400 would be (so the run can trim and retry), anything else as a 500."""
        message = error.get("message") if isinstance(error, dict) else str(error)
        code = error.get("code") if isinstance(error, dict) else None
        status = code if isinstance(code, int) else 500
        if code == "context_length_exceeded" or context_error(str(message or "")):
            status = 400
        return self.mapped(_openai_error(status,
                                         str(message or "An error occurred during streaming")))

class _Silent(Exception):
    """A stream that ended before its first payload (`DirectModel._diagnosed`)."""


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

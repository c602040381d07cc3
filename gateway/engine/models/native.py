"""The direct adapter for providers with a streaming format of their own: Anthropic's Messages
and Google's Gemini, read straight off the socket as `direct.py` reads an OpenAI-compatible
stream.

litellm's stream wrapper costs several times the CPU per chunk of reading the chunk itself
(it builds objects per chunk and keeps them for the stream's life; for Anthropic it also runs
its OpenAI-shaped post-processing on each), and most agents run on Claude. So the gateway
streams these providers itself, and keeps of litellm what is not per token: the request
(litellm's parameter mapping, message and tool translation and headers for the provider, in
`anthropic_wire` and `gemini_wire`), the error mapping (litellm's exception mapping for the
provider, then `LiteLLMModel.failed`), and every call that is not streamed (`complete`).

To a client the two paths are indistinguishable: the same deltas (each wire module mirrors
litellm's reading of the provider's events) and the same error codes and messages; except that
an answer that stops before the provider said it was over is an error here
(`LLM_STREAM_INCOMPLETE`, after what did stream), where litellm's wrapper ends it as if complete.
The connections are one aiohttp pool per provider host (`upstream_pool`); cancelling or closing
the stream closes its connection at once.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, field, replace

import httpx
import orjson
from yarl import URL

from ..deltas import Delta, ModelError
from ..stream_contract import incomplete
from . import anthropic_wire, gemini_wire
from .litellm_model import ModelRequest
from .reasoning import replayable
from .socket_model import (
    CONNECT_TIMEOUT_SECONDS,
    READ_TIMEOUT_SECONDS,
    TRANSPORT_FAILURES,
    SocketModel,
    drain,
    sse_data,
)
from .upstream_pool import UpstreamPool
from .wire import Incomplete, ProviderError, StreamReader, WireRequest

log = logging.getLogger(__name__)
PROVIDERS = (anthropic_wire.PROVIDER, gemini_wire.PROVIDER)


@dataclass(kw_only=True)
class NativeModel(SocketModel):
    """Streams `provider`'s own format from its API (`api_base`: the configured base URL, None
    for the provider's own), its connections in one aiohttp session."""

    api_base: str | None
    _endpoints: dict[str, tuple[str, dict[str, str]]] = field(default_factory=dict, repr=False)

    def endpoint(self, name: str) -> tuple[str, dict[str, str]]:
        """The streaming URL for model `name`, and the headers its key goes in (Gemini's; an
        Anthropic key goes in litellm's request headers)."""
        if name not in self._endpoints:
            if self.provider == anthropic_wire.PROVIDER:
                self._endpoints[name] = (anthropic_wire.endpoint(self.api_base), {})
            else:
                self._endpoints[name] = gemini_wire.endpoint(name, self.api_base, self.api_key)
        return self._endpoints[name]

    def new_pool(self) -> UpstreamPool:
        origin = str(URL(self.endpoint(self.model)[0]).origin())
        return UpstreamPool(origin, {}, READ_TIMEOUT_SECONDS, CONNECT_TIMEOUT_SECONDS)

    async def stream(self, request: ModelRequest) -> AsyncGenerator[Delta, None]:
        name = self.model
        if request.model and request.model != self.litellm_model:
            found = self._upstream_name(request.model)
            if found is None:  # another provider, or another API: litellm's path
                async for delta in self.fallback.stream(request):
                    yield delta
                return
            name = found
        call = await self._request(name, request)
        url = URL(call.url)
        try:
            async with self.client.post(url.raw_path_qs, call.body, call.headers) as response:
                if response.status >= 400:
                    raise await self.answered_error(response)
                try:
                    async for delta in deltas_of(sse_data(response), call.reader):
                        yield delta
                except BaseException:
                    response.close()  # left before its end: the connection is not reused
                    raise
        except ModelError:
            raise
        except ProviderError as error:
            raise self.mapped(self.upstream_error(error.status, error.body)) from None
        except Incomplete as cut:
            raise self.incomplete(str(cut)) from None
        except TRANSPORT_FAILURES as exc:
            raise self.transport_failure(exc) from None

    async def _request(self, name: str, request: ModelRequest) -> WireRequest:
        """The call litellm would make for `request`, or why litellm would not make it."""
        url, auth = self.endpoint(name)
        messages = replayable(request.messages, True)
        if messages is not request.messages:
            request = replace(request, messages=messages)
        try:
            if self.provider == anthropic_wire.PROVIDER:
                return await anthropic_wire.build_request(name, request, url, self.api_key)
            return await gemini_wire.build_request(name, request, url, auth, self.api_key)
        except Exception as exc:
            raise self.fallback.failed(exc) from None

    def _upstream_name(self, model: str) -> str | None:
        """The provider's name for `model` if litellm resolves it to this same provider (and
        the same configured base URL)."""
        if model not in self._names:
            import litellm

            try:
                name, provider, _, _ = litellm.get_llm_provider(model)
            except Exception:
                name, provider = "", ""
            self._names[model] = name if provider == self.provider else None
        return self._names[model]

    def upstream_error(self, status: int, text: str,
                       headers: httpx.Headers | None = None) -> Exception:
        """The provider's error as litellm's provider adapter raises it (the body as sent)."""
        if self.provider == anthropic_wire.PROVIDER:
            from litellm.llms.anthropic.common_utils import AnthropicError

            error: Exception = AnthropicError(status_code=status, message=text, headers=headers)
            return error
        from litellm.llms.vertex_ai.common_utils import VertexAIError

        error = VertexAIError(status_code=status, message=text, headers=headers)
        return error

    def incomplete(self, why: str) -> ModelError:
        return incomplete(why, model=self.litellm_model)


async def deltas_of(payloads: AsyncIterator[bytes], reader: StreamReader
                    ) -> AsyncGenerator[Delta, None]:
    """The deltas of a stream's `data:` payloads as `reader` reads them, then its last ones;
    once the provider said its answer is over, the body's rest is read so that its connection
    goes back to the pool. A stream that fails after the provider counted its usage yields
    that usage before its failure: the call is metered for what it consumed."""
    try:
        async for payload in payloads:
            for delta in reader.feed(orjson.loads(payload)):
                yield delta
            if reader.done:
                await drain(payloads)
                break
        last = reader.end()
    except (Incomplete, ProviderError, *TRANSPORT_FAILURES):
        for delta in reader.usage():
            yield delta
        raise
    for delta in last:
        yield delta

"""The litellm adapter: the only module that touches litellm's request and chunk objects.

The stream is always closed in a `finally` (`aclose()`): breaking out of litellm's iterator
without closing it leaves the upstream generating (and billing) until garbage collection.
"""

from __future__ import annotations

import logging
import re
import socket
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, field
from typing import Any

from ...observability.redact import mask_secret
from ..context_window import context_error, window_in
from ..deltas import (
    Delta,
    Finish,
    ModelError,
    ReasoningDelta,
    ReasoningSignature,
    RedactedReasoning,
    Served,
    TextDelta,
    ToolCallDelta,
    Usage,
    usage_of,
)
from ..stream_contract import diagnosed, finish_reason, incomplete
from .provider_words import words
from .reasoning import Reasoning, replayable, traits, with_thinking

log = logging.getLogger(__name__)
UsageSink = Callable[[int], None]


def report_usage(response: Any, usage: UsageSink | None) -> None:
    """Tell `usage` the tokens (input and output) a non-streamed response says it used."""
    counted = getattr(response, "usage", None)
    if usage is not None and counted is not None:
        usage(int(getattr(counted, "total_tokens", 0) or 0))


@dataclass
class ModelRequest:
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] = field(default_factory=list)
    tool_choice: Any = None
    max_tokens: int | None = None
    temperature: float | None = None
    model: str | None = None  # None: the gateway's configured model
    reasoning: Reasoning | None = None  # what the agent asks of the model's thinking

    def options(self) -> dict[str, Any]:
        """The chat-completions parameters this request sets, in the OpenAI names every
        adapter sends (a tool choice only means something with tools; a reasoning budget goes
        as `thinking` where the provider understands one: `reasoning.with_thinking`)."""
        options: dict[str, Any] = {}
        if self.tools:
            options["tools"] = self.tools
            if self.tool_choice is not None:
                options["tool_choice"] = self.tool_choice
        if self.max_tokens is not None:
            options["max_tokens"] = self.max_tokens
        if self.temperature is not None:
            options["temperature"] = self.temperature
        if self.reasoning is not None and self.reasoning.effort is not None:
            options["reasoning_effort"] = self.reasoning.effort
        return options


@dataclass
class LiteLLMModel:
    model: str
    api_base: str | None = None
    api_key: str | None = None

    async def stream(self, request: ModelRequest) -> AsyncGenerator[Delta, None]:
        """The call's deltas. litellm ends every stream with a finish reason, `stop` when the
        provider sent none (an error after `200 OK`, a server that cut the answer): its wrapper
        remembers whether the provider said one, and a stream it did not is incomplete
        (`stream_contract`) however it ended."""
        stream = await self._open(request)
        first, usage, said = True, None, False
        try:
            async for chunk in stream:
                if first:
                    first = False
                    served = self._served_by(stream)
                    if served is not None:
                        yield Served(served)
                deltas = _deltas(chunk)
                if deltas and type(deltas[0]) is Usage:  # held until the stream's end
                    usage = deltas.pop(0)
                if not said and deltas and type(deltas[0]) is not Finish:
                    said = True
                for delta in deltas:
                    yield delta
        except ModelError:
            raise
        except Exception as exc:
            raise self.failed(exc) from None
        finally:
            await stream.aclose()
        if not provider_finished(stream):
            if not said:  # not a word: ask again to hear why (`stream_contract.diagnosed`)
                raise await self._diagnosed(request)
            raise incomplete("the stream ended without a finish reason from the provider",
                             model=request.model or self.model)
        if usage is not None and provider_counted(stream):
            yield usage

    async def _open(self, request: ModelRequest) -> Any:
        """The call's stream (litellm's wrapper), or the call's failure as a `ModelError`."""

        model = request.model or self.model
        kind = traits(model, self.api_base)
        params: dict[str, Any] = {
            "model": model,
            "messages": replayable(request.messages, kind.replay),
            "stream": True,
            "stream_options": {"include_usage": True},
            # Retrying is the client's call (RUN_ERROR.isRetryable); a silent retry only delays it.
            "max_retries": 0,
        }
        if self.api_base:
            params["api_base"] = self.api_base
        if self.api_key:
            params["api_key"] = self.api_key
        params.update(with_thinking(request.options(), request.reasoning, kind.budget))
        try:
            return await acompletion(params)
        except Exception as exc:
            raise self.failed(exc) from None

    def _served_by(self, stream: Any) -> str | None:
        """Which model answered, when it may not be the one asked (the Router's fallbacks)."""
        return None

    async def _diagnosed(self, request: ModelRequest) -> ModelError:
        """The error of a stream that ended before its first chunk: the same request once
        more, not streamed and capped at one token, to hear what the provider says."""

        params: dict[str, Any] = {"model": request.model or self.model,
                                  "messages": request.messages, "max_retries": 0,
                                  **request.options(), "max_tokens": 1}
        if self.api_base:
            params["api_base"] = self.api_base
        if self.api_key:
            params["api_key"] = self.api_key
        try:
            await acompletion(params)
        except Exception as exc:
            return self.failed(exc)
        return diagnosed("a second request, not streamed, was answered",
                         request.model or self.model)


    async def context_window(self) -> int | None:
        """The window the upstream says its model has, for a model served at `api_base` (an
        OpenAI-compatible server: `server_window`); None otherwise."""
        if not self.api_base:
            return None
        from .server_info import server_window

        return await server_window(self.api_base, self.api_key, self.model.split("/", 1)[-1])

    async def count_tokens(self, texts: list[str]) -> list[int] | None:
        """Tokens as the model's server counts them (`server_count`), for a model served at
        `api_base`; None otherwise (then litellm's counter is used)."""
        if not self.api_base:
            return None
        from .server_info import server_count

        return await server_count(self.api_base, self.api_key, self.model.split("/", 1)[-1],
                                  texts)

    async def complete(self, messages: list[dict[str, Any]], max_tokens: int = 200,
                       task: str | None = None, usage: UsageSink | None = None) -> str:
        """One short non-streamed answer (thread names, suggestions).

        `task` names the job for the built-in demo model only (litellm hands a custom
        provider its `metadata`); no real provider is sent it. `usage` is told the tokens the
        call used, for the caller's quotas.
        """

        from .demo import PROVIDER

        params: dict[str, Any] = {"model": self.model, "messages": messages,
                                  "max_tokens": max_tokens, "max_retries": 0}
        if task is not None and self.model.startswith(f"{PROVIDER}/"):
            params["metadata"] = {"gateway_task": task}
        if self.api_base:
            params["api_base"] = self.api_base
        if self.api_key:
            params["api_key"] = self.api_key
        try:
            response = await acompletion(params)
        except Exception as exc:
            raise self.failed(exc) from None
        report_usage(response, usage)
        return response.choices[0].message.content or ""

    def failed(self, exc: BaseException, transport: BaseException | None = None) -> ModelError:
        """Classify a failed call and log it once, with its cause, for the operator: the
        client's RUN_ERROR says only what it may act on, so the why must be in the log.

        `transport` is the connection-level error when `exc` was rebuilt from it (the direct
        adapter words its errors as litellm's), so an unreachable upstream is still seen."""
        if transport is not None and _unreachable(transport) is not None:
            exc = transport
        error = classify(exc, self.api_key, self.api_base)
        level = logging.ERROR if error.code in _OPERATOR_CODES else logging.WARNING
        log.log(level, "model call failed: %s (model %s, status %s): %s", error.code,
                self.model, error.status, cause_of(exc, self.api_key, self.api_base))
        return error


async def acompletion(params: dict[str, Any]) -> Any:
    """`litellm.acompletion(**params)`, once more on a fresh connection when the first lost
    its connection before an answer: litellm's aiohttp transport can pick a pooled keep-alive
    connection the upstream is closing that very moment (its idle timeout, uvicorn's is 5 s;
    llama.cpp's server after a failed request), and fails with "Can not write request body" or
    a reset before the upstream saw anything. A connection that cannot be made is not tried
    again."""
    import litellm

    try:
        return await litellm.acompletion(**params)
    except Exception as exc:
        if not _connection_lost(exc) or _refused(exc):
            raise
        log.info("model call lost its connection (%s); trying once more", type(exc).__name__)
        return await litellm.acompletion(**params)


# Codes only the operator can fix (a wrong URL or key); the others come and go.
_OPERATOR_CODES = {"LLM_UNREACHABLE", "LLM_AUTHENTICATION_ERROR"}


def provider_finished(stream: Any) -> bool:
    """Whether the provider itself sent a finish reason in litellm's `stream`: its wrapper's
    `received_finish_reason` (or the reason it saw mid-stream), else one of the chunks it kept
    (`chunks`, which the Router's wrapper shares with the deployment's own: its
    `received_finish_reason` stays unset). litellm's made-up final chunk is not among them. A
    stream that keeps neither is trusted."""
    if getattr(stream, "received_finish_reason", None) or getattr(
            stream, "intermittent_finish_reason", None):
        return True
    chunks = getattr(stream, "chunks", None)
    if not isinstance(chunks, list):
        return True
    return any(chunk.choices and chunk.choices[0].finish_reason for chunk in reversed(chunks))


def provider_counted(stream: Any) -> bool:
    """Whether the provider reported the stream's usage: litellm makes up a count of its own
    (with another tokenizer) when it did not, which is left for the loop to count as
    estimated (`stream_contract`). A wrapper that keeps no chunks is trusted."""
    chunks = getattr(stream, "chunks", None)
    if not isinstance(chunks, list):
        return True
    return any(getattr(chunk, "usage", None) is not None for chunk in reversed(chunks))


def _deltas(chunk: Any) -> list[Delta]:
    out: list[Delta] = []
    usage = usage_of(getattr(chunk, "usage", None))
    if usage is not None:
        out.append(usage)
    for choice in getattr(chunk, "choices", None) or []:
        delta = choice.delta
        reasoning = getattr(delta, "reasoning_content", None)
        if reasoning:
            out.append(ReasoningDelta(reasoning))
        for block in getattr(delta, "thinking_blocks", None) or ():
            out.extend(_signed(block))
        if delta.content:
            out.append(TextDelta(delta.content))
        for call in getattr(delta, "tool_calls", None) or []:
            function = call.function
            fragment = ToolCallDelta(
                index=call.index or 0,
                id=call.id or None,
                name=(function.name if function else None) or None,
                arguments=(function.arguments if function else None) or "",
            )
            if fragment.id or fragment.name or fragment.arguments:  # an empty one says nothing
                out.append(fragment)
        if choice.finish_reason:
            out.append(Finish(finish_reason(choice.finish_reason)))
    return out


def _signed(block: Any) -> list[Delta]:
    """The signature, or the redacted reasoning, that litellm passes in a thinking block (its
    text comes as `reasoning_content`)."""
    fields: dict[str, Any] = block if isinstance(block, dict) else getattr(block, "__dict__", {})
    if fields.get("type") == "redacted_thinking" and fields.get("data"):
        return [RedactedReasoning(str(fields["data"]))]
    signature = fields.get("signature")
    return [ReasoningSignature(str(signature))] if signature else []


_SECRETISH = re.compile(r"(sk-|key-|Bearer\s+)[A-Za-z0-9_\-\*\.]{4,}", re.IGNORECASE)
_LITELLM_PREFIX = re.compile(r"^(litellm\.)?\w+(Error|Exception):\s*(\w+Exception\s*-\s*)?")


def scrub(message: str, api_key: str | None) -> str:
    """Provider messages go to end users: the provider's own words (`provider_words`), without
    key material (the key's value, not its letters inside words) or litellm's class prefixes."""
    message = mask_secret(message, api_key)
    message = _SECRETISH.sub("***", words(message))
    message = _LITELLM_PREFIX.sub("", message.strip())
    return message[:500] or "The AI provider returned an error"


def _chain(exc: BaseException) -> list[BaseException]:
    """The exception and everything it wraps (litellm keeps the transport's error inside)."""
    found: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not seen for seen in found):
        found.append(current)
        current = current.__cause__ or current.__context__
    return found


def _unreachable(exc: BaseException) -> BaseException | None:
    """The transport error that says no connection was made, if that is why the call failed.

    litellm reports a refused connection as a 500 InternalServerError; only the exception
    chain tells it apart from a provider that answered with a 5xx.
    """
    import aiohttp  # litellm's default transport, one of its requirements
    import httpx

    kinds = (ConnectionRefusedError, socket.gaierror, httpx.ConnectError, httpx.ConnectTimeout,
             aiohttp.ClientConnectorError)
    chain = _chain(exc)
    hits = [e for e in chain if isinstance(e, kinds)]
    return hits[-1] if hits else None


def _refused(exc: BaseException) -> bool:
    """Whether no connection could be made at all (refused, or a name that does not resolve),
    as opposed to one that was lost."""
    return any(isinstance(e, (ConnectionRefusedError, socket.gaierror))
               or "refused" in str(e).lower() or "Name or service" in str(e)
               for e in _chain(exc))


def _connection_lost(exc: BaseException) -> bool:
    """Whether the call failed on its connection (refused, reset, closed before an answer),
    not on an answer or a timeout."""
    import aiohttp
    import httpx

    chain = _chain(exc)
    return (any(isinstance(e, (httpx.TransportError, aiohttp.ClientConnectionError))
                for e in chain)
            and not any(isinstance(e, (TimeoutError, httpx.TimeoutException)) for e in chain))


def _address(api_base: str | None, exc: BaseException) -> str:
    """host:port of the upstream the call was meant for."""
    from urllib.parse import urlsplit

    if api_base:
        parts = urlsplit(api_base)
        if parts.hostname:
            return f"{parts.hostname}:{parts.port or (443 if parts.scheme == 'https' else 80)}"
    for link in _chain(exc):  # aiohttp's connector error knows where it tried
        host, link_port = getattr(link, "host", None), getattr(link, "port", None)
        if isinstance(host, str) and link_port:
            return f"{host}:{link_port}"
    return "the provider's default endpoint"


def cause_of(exc: BaseException, api_key: str | None = None,
             api_base: str | None = None) -> str:
    """One line for the log: where the call went and the innermost reason, secrets removed."""
    inner = _unreachable(exc)
    if inner is not None:
        if isinstance(inner, socket.gaierror) or "Name or service" in str(inner):
            reason = "name resolution failed"
        elif isinstance(inner, ConnectionRefusedError) or "refused" in str(inner).lower() \
                or "Connect call failed" in str(inner):
            reason = "connection refused"
        else:
            reason = "cannot connect"
        return f"{reason} to {_address(api_base, exc)}: {scrub(str(inner), api_key)}"
    return scrub(str(exc), api_key)


def classify(exc: BaseException, api_key: str | None = None,
             api_base: str | None = None) -> ModelError:
    """Map a litellm exception to the codes the Tambo clients read from `RUN_ERROR`."""
    from litellm import exceptions

    if _unreachable(exc) is not None:
        return ModelError("LLM_UNREACHABLE", "The gateway cannot reach the AI provider",
                          "server_error", True, 502)
    status = getattr(exc, "status_code", None)
    status = status if isinstance(status, int) else None
    if isinstance(exc, exceptions.ContextWindowExceededError) or (
            status == 400 and context_error(str(exc))):
        return ModelError("LLM_CONTEXT_WINDOW_EXCEEDED",
                          "The conversation is too long for the model's context window",
                          "client_error", False, 400, window=window_in(str(exc)))
    if isinstance(exc, exceptions.RateLimitError) or status == 429:
        return ModelError("LLM_RATE_LIMITED", scrub(str(exc), api_key), "client_error", True, 429)
    denied = (exceptions.AuthenticationError, exceptions.PermissionDeniedError)
    if isinstance(exc, denied) or status in (401, 403):
        return ModelError("LLM_AUTHENTICATION_ERROR",
                          "The AI provider rejected the gateway's credentials",
                          "server_error", False, status or 401)
    if isinstance(exc, exceptions.Timeout):
        return ModelError("LLM_TIMEOUT", "The AI provider did not answer in time",
                          "server_error", True, 504)
    if status is not None and 400 <= status < 500:
        return ModelError("LLM_CLIENT_ERROR", scrub(str(exc), api_key), "client_error", False,
                          status)
    if status is not None and status >= 500:
        return ModelError("LLM_SERVER_ERROR", "The AI provider encountered a temporary error",
                          "server_error", True, status)
    return ModelError("LLM_ERROR", "An error occurred communicating with the AI provider",
                      "server_error", False, status)

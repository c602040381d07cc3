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
    usage_of,
)
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
        stream = await self._open(request)
        first = True
        try:
            async for chunk in stream:
                if first:
                    first = False
                    served = self._served_by(stream)
                    if served is not None:
                        yield Served(served)
                for delta in _deltas(chunk):
                    yield delta
        except ModelError:
            raise
        except Exception as exc:
            raise self.failed(exc) from None
        finally:
            await stream.aclose()

    async def _open(self, request: ModelRequest) -> Any:
        """The call's stream (litellm's wrapper), or the call's failure as a `ModelError`."""
        import litellm

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
            return await litellm.acompletion(**params)
        except Exception as exc:
            raise self.failed(exc) from None

    def _served_by(self, stream: Any) -> str | None:
        """Which model answered, when it may not be the one asked (the Router's fallbacks)."""
        return None

    async def complete(self, messages: list[dict[str, Any]], max_tokens: int = 200,
                       task: str | None = None, usage: UsageSink | None = None) -> str:
        """One short non-streamed answer (thread names, suggestions).

        `task` names the job for the built-in demo model only (litellm hands a custom
        provider its `metadata`); no real provider is sent it. `usage` is told the tokens the
        call used, for the caller's quotas.
        """
        import litellm

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
            try:
                response = await litellm.acompletion(**params)
            except Exception as exc:
                if not _connection_lost(exc):
                    raise
                # Once more, on a fresh connection: litellm's aiohttp transport can pick a
                # pooled keep-alive connection the upstream is closing that very moment (its
                # idle timeout; uvicorn's is 5 s), and fails with "Can not write request body"
                # before the upstream saw anything. These calls are side-effect free.
                log.info("model call lost its connection (%s); trying once more",
                         type(exc).__name__)
                response = await litellm.acompletion(**params)
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


# Codes only the operator can fix (a wrong URL or key); the others come and go.
_OPERATOR_CODES = {"LLM_UNREACHABLE", "LLM_AUTHENTICATION_ERROR"}


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
            out.append(Finish(choice.finish_reason))
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
    key material or litellm's class prefixes."""
    if api_key:
        message = message.replace(api_key, "***")
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
    if isinstance(exc, exceptions.ContextWindowExceededError):
        return ModelError("LLM_CONTEXT_WINDOW_EXCEEDED",
                          "The conversation is too long for the model's context window",
                          "client_error", False, 400)
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

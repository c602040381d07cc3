"""Prometheus metrics: what the gateway is doing, scraped at `GET /metrics`.

The collectors are process-wide (one gateway per process in production). The per-token cost is
one counter increment and two clock reads; everything per model call (tokens per second, the
gateway's own time per token) is summed while streaming and observed once at its end. Labels
are bounded sets (run status, error code, store operation), never ids.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import time
from collections.abc import AsyncGenerator, Iterator
from typing import Any, TypeVar

from prometheus_client import CONTENT_TYPE_LATEST, Counter, Gauge, Histogram, generate_latest
from starlette.requests import Request
from starlette.responses import Response

from ..engine.deltas import (
    Delta,
    ModelError,
    ReasoningDelta,
    Served,
    TextDelta,
    ToolCallDelta,
    Usage,
)
from . import tracing

RUNS_STARTED = Counter("gateway_runs_started", "Runs started by this process.")
RUNS_ENDED = Counter("gateway_runs_ended", "Runs ended by this process, by final status and "
                     "error code (empty when none).", ["status", "code"])
ACTIVE_RUNS = Gauge("gateway_active_runs", "Runs executing in this process.")
ACTIVE_SUBSCRIBERS = Gauge("gateway_active_subscribers", "Clients reading a run's event stream.")
STARTS_WAITING = Gauge("gateway_starts_waiting", "Run requests waiting for their turn to start "
                       "(GATEWAY_START_CONCURRENCY).")
TIME_TO_FIRST_TOKEN = Histogram(
    "gateway_time_to_first_token_seconds",
    "From a model call to its first streamed content (text, reasoning or tool call).",
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 32, 64))
TOKENS_STREAMED = Counter("gateway_tokens_streamed", "Content chunks streamed from the model.")
MODEL_ERRORS = Counter("gateway_model_errors", "Failed model calls, by error code.", ["code"])
TOKENS_PER_SECOND = Histogram(
    "gateway_model_tokens_per_second",
    "Per model call: content chunks streamed per second, from the first to the last.",
    buckets=(1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000))
ADDED_LATENCY = Histogram(
    "gateway_added_latency_per_token_seconds",
    "Per model call: the gateway's own time per streamed chunk, from the adapter handing it "
    "over until the agent loop asks for the next (frames written to the run's live log).",
    buckets=(0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
             0.025, 0.1))
DATABASE_SECONDS = Histogram(
    "gateway_database_operation_seconds",
    "Time of one store operation (a query or a transaction, waiting for a connection "
    "included), by operation.", ["operation"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
REDIS_SECONDS = Histogram(
    "gateway_redis_operation_seconds",
    "Time of a Redis write (`append`: a batch of a run's live tail; `publish`: a cancel or "
    "thread event), with GATEWAY_REDIS_URL.", ["operation"],
    buckets=(0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1))
MODEL_TOKENS = Counter(
    "gateway_model_tokens", "Tokens the model calls of ended runs consumed, as the providers "
    "reported them, by agent, model and kind (`input`, `output`; `reasoning` is part of "
    "output, `cached_input` part of input).", ["agent", "model", "kind"])
MODEL_COST = Counter(
    "gateway_model_cost_usd", "What the model calls of ended runs cost in US dollars, from "
    "litellm's price map, by agent and model (models it does not price add nothing).",
    ["agent", "model"])
REFUSALS = Counter("gateway_refusals", "Requests refused before a run started, by code "
                   "(shutting down, payload too large, a quota).", ["code"])


async def metrics_endpoint(_: Request) -> Response:
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)


class MeteredModel:
    """The model adapter with time to first token, streamed tokens and errors counted.

    A wrapper rather than hooks in each adapter, so any adapter the engine is given is measured
    the same way; everything else (`complete`, attributes) goes to the wrapped adapter.
    """

    def __init__(self, model: Any, name: str | None = None) -> None:
        self._model = model
        self._name = name  # the configured model (a request may pick another)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)

    async def stream(self, request: Any) -> AsyncGenerator[Delta, None]:
        clock = time.perf_counter
        started = clock()
        first = last = 0.0
        chunks = handed = 0
        working = 0.0  # the consumer's time between taking a delta and asking for the next
        span = tracing.model_span(request.model or self._name)
        served = usage = code = None
        try:
            # aclosing: when the run stops reading (cancel), the adapter's own `finally` must
            # close the upstream now, not when the garbage collector finds the generator.
            async with contextlib.aclosing(self._model.stream(request)) as deltas:
                async for delta in deltas:
                    now = clock()
                    if isinstance(delta, _CONTENT):
                        TOKENS_STREAMED.inc()
                        chunks += 1
                        last = now
                        if chunks == 1:
                            first = now
                            TIME_TO_FIRST_TOKEN.observe(now - started)
                    elif span is not None:  # once or twice a call: what the span reports
                        if isinstance(delta, Usage):
                            usage = delta
                        elif isinstance(delta, Served):
                            served = delta.model
                    yield delta
                    working += clock() - now
                    handed += 1
        except ModelError as error:
            MODEL_ERRORS.labels(error.code).inc()
            code = error.code
            raise
        finally:
            if span is not None:
                tracing.model_ended(span, served, usage, code)
        if handed:
            ADDED_LATENCY.observe(working / handed)
        if chunks > 1 and last > first:
            TOKENS_PER_SECOND.observe((chunks - 1) / (last - first))

    async def complete(self, *args: Any, **kwargs: Any) -> str:
        try:
            return await self._model.complete(*args, **kwargs)
        except ModelError as error:
            MODEL_ERRORS.labels(error.code).inc()
            raise


def record_usage(agent: str, entries: list[dict[str, Any]]) -> None:
    """A run's usage (`engine.usage` entries), counted once when the run ends. Labels are the
    operator's agents and models, bounded sets; never a user or a key."""
    for entry in entries:
        model = entry["model"]
        for kind, key in (("input", "inputTokens"), ("output", "outputTokens"),
                          ("reasoning", "reasoningTokens"), ("cached_input", "cachedInputTokens")):
            if entry[key]:
                MODEL_TOKENS.labels(agent, model, kind).inc(entry[key])
        if entry["costUsd"]:
            MODEL_COST.labels(agent, model).inc(entry["costUsd"])


_CONTENT = (TextDelta, ReasoningDelta, ToolCallDelta)
T = TypeVar("T")


def time_store_operations(store: T) -> T:
    """`store` with each of its public coroutine methods timed into `DATABASE_SECONDS`,
    labelled by the method's name (wrapped on the instance: the store knows nothing of it)."""
    for name in dir(type(store)):
        method = getattr(store, name)
        if not name.startswith("_") and inspect.iscoroutinefunction(method):
            setattr(store, name, _timed(method, DATABASE_SECONDS.labels(name)))
    return store


def _timed(method: Any, histogram: Any) -> Any:
    @functools.wraps(method)
    async def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return await method(*args, **kwargs)
        finally:
            histogram.observe(time.perf_counter() - started)

    return timed


@contextlib.contextmanager
def timed_redis(operation: str) -> Iterator[None]:
    """Times a Redis call into `REDIS_SECONDS` (failed calls too: a timeout is latency)."""
    started = time.perf_counter()
    try:
        yield
    finally:
        REDIS_SECONDS.labels(operation).observe(time.perf_counter() - started)

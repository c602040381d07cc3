"""Prometheus metrics: what the gateway is doing, scraped at `GET /metrics`.

The collectors are process-wide (one gateway per process in production). The per-token cost is
one counter increment; labels are bounded sets (run status, error code), never ids.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncGenerator
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, Counter, Gauge, Histogram, generate_latest
from starlette.requests import Request
from starlette.responses import Response

from ..engine.deltas import Delta, ModelError, ReasoningDelta, TextDelta, ToolCallDelta

RUNS_STARTED = Counter("gateway_runs_started", "Runs started by this process.")
RUNS_ENDED = Counter("gateway_runs_ended", "Runs ended by this process, by final status and "
                     "error code (empty when none).", ["status", "code"])
ACTIVE_RUNS = Gauge("gateway_active_runs", "Runs executing in this process.")
ACTIVE_SUBSCRIBERS = Gauge("gateway_active_subscribers", "Clients reading a run's event stream.")
TIME_TO_FIRST_TOKEN = Histogram(
    "gateway_time_to_first_token_seconds",
    "From a model call to its first streamed content (text, reasoning or tool call).",
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 32, 64))
TOKENS_STREAMED = Counter("gateway_tokens_streamed", "Content chunks streamed from the model.")
MODEL_ERRORS = Counter("gateway_model_errors", "Failed model calls, by error code.", ["code"])
REFUSALS = Counter("gateway_refusals", "Requests refused before a run started, by code "
                   "(shutting down, payload too large).", ["code"])


async def metrics_endpoint(_: Request) -> Response:
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)


class MeteredModel:
    """The model adapter with time to first token, streamed tokens and errors counted.

    A wrapper rather than hooks in each adapter, so any adapter the engine is given is measured
    the same way; everything else (`complete`, attributes) goes to the wrapped adapter.
    """

    def __init__(self, model: Any) -> None:
        self._model = model

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)

    async def stream(self, request: Any) -> AsyncGenerator[Delta, None]:
        started = time.perf_counter()
        first = True
        try:
            # aclosing: when the run stops reading (cancel), the adapter's own `finally` must
            # close the upstream now, not when the garbage collector finds the generator.
            async with contextlib.aclosing(self._model.stream(request)) as deltas:
                async for delta in deltas:
                    if isinstance(delta, _CONTENT):
                        TOKENS_STREAMED.inc()
                        if first:
                            first = False
                            TIME_TO_FIRST_TOKEN.observe(time.perf_counter() - started)
                    yield delta
        except ModelError as error:
            MODEL_ERRORS.labels(error.code).inc()
            raise

    async def complete(self, *args: Any, **kwargs: Any) -> str:
        try:
            return await self._model.complete(*args, **kwargs)
        except ModelError as error:
            MODEL_ERRORS.labels(error.code).inc()
            raise


_CONTENT = (TextDelta, ReasoningDelta, ToolCallDelta)

"""Prometheus metrics: what the gateway is doing, scraped at `GET /metrics`.

The collectors are process-wide (one gateway per process in production). The per-token cost is
one counter increment and two clock reads; everything per model call (tokens per second, the
gateway's own time per token) is summed while streaming and observed once at its end. Labels
are bounded sets (run status, error code, store operation), never ids.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)

from . import tracing

RUNS_STARTED = Counter("gateway_runs_started", "Runs started by this process.")
RUNS_ENDED = Counter("gateway_runs_ended", "Runs ended by this process, by final status and "
                     "error code (empty when none).", ["status", "code"])
# Gauges under `--workers`: the sum over the live workers.
ACTIVE_RUNS = Gauge("gateway_active_runs", "Runs executing in this process.",
                    multiprocess_mode="livesum")
ACTIVE_SUBSCRIBERS = Gauge("gateway_active_subscribers", "Clients reading a run's event stream.",
                           multiprocess_mode="livesum")
STARTS_WAITING = Gauge("gateway_starts_waiting", "Run requests waiting for their turn to start "
                       "(GATEWAY_START_CONCURRENCY).", multiprocess_mode="livesum")
TIME_TO_FIRST_TOKEN = Histogram(
    "gateway_time_to_first_token_seconds",
    "From a model call to its first streamed content (text, reasoning or tool call).",
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 32, 64))
TOKENS_STREAMED = Counter("gateway_tokens_streamed", "Content chunks (not tokens: a provider "
                          "may send several tokens in one) streamed from the model; tokens "
                          "are `gateway_model_tokens`.")
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
QUOTA_OUTAGE_ADMISSIONS = Counter(
    "gateway_quota_outage_admissions", "Starts admitted while the shared quota counters (Redis) "
    "could not be reached, by how they were checked: `local` (this process's share of each "
    "limit) or `admit` (unchecked, `GATEWAY_QUOTA_OUTAGE=admit`).", ["checked"])
OVERLOADED = Counter("gateway_overloaded_refusals", "New runs refused with 503 OVERLOADED, by "
                     "the admission limit that refused them (its setting's name).", ["reason"])


# Set (by `gateway serve --workers N`, or by the operator) when several processes serve one
# port: each writes its samples to files there, and any of them answers a scrape for all.
MULTIPROCESS_DIR = "PROMETHEUS_MULTIPROC_DIR"


def exposition() -> tuple[bytes, str]:
    """The Prometheus text of this process, or of every worker sharing `MULTIPROCESS_DIR`
    (whichever one the scrape reached), and its content type."""
    if not os.environ.get(MULTIPROCESS_DIR):
        return generate_latest(), CONTENT_TYPE_LATEST
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]  # unannotated
    return generate_latest(registry), CONTENT_TYPE_LATEST


def process_exited() -> None:
    """A worker's gauges leave the sums when it stops."""
    if os.environ.get(MULTIPROCESS_DIR):
        multiprocess.mark_process_dead(os.getpid())  # type: ignore[no-untyped-call]  # unannotated


class ModelCallMeter:
    """One streamed model call, measured through the agent loop's hooks (`engine.hooks`):
    time to first token, streamed tokens and their rate, the gateway's own time per token,
    errors, and the call's span when tracing is on."""

    __slots__ = ("_started", "_first", "_last", "_now", "_chunks", "_handed", "_working",
                 "_span", "_served", "_usage")

    def __init__(self, model: str | None) -> None:
        self._started = time.perf_counter()
        self._first = self._last = self._now = self._working = 0.0
        self._chunks = self._handed = 0
        self._span = tracing.model_span(model)
        self._served: str | None = None
        self._usage: tuple[int, int] | None = None

    def received(self, content: bool) -> None:
        self._now = now = time.perf_counter()
        if content:
            TOKENS_STREAMED.inc()
            self._chunks += 1
            self._last = now
            if self._chunks == 1:
                self._first = now
                TIME_TO_FIRST_TOKEN.observe(now - self._started)

    def handled(self) -> None:
        self._working += time.perf_counter() - self._now
        self._handed += 1

    def usage(self, input_tokens: int, output_tokens: int) -> None:
        if self._span is not None:
            self._usage = (input_tokens, output_tokens)

    def served(self, model: str) -> None:
        if self._span is not None:
            self._served = model

    def ended(self, error_code: str | None, completed: bool) -> None:
        if error_code is not None:
            MODEL_ERRORS.labels(error_code).inc()
        if self._span is not None:
            tracing.model_ended(self._span, self._served, self._usage, error_code)
        if not completed:
            return
        if self._handed:
            ADDED_LATENCY.observe(self._working / self._handed)
        if self._chunks > 1 and self._last > self._first:
            TOKENS_PER_SECOND.observe((self._chunks - 1) / (self._last - self._first))


def model_call_failed(code: str) -> None:
    """A one-shot model call (a thread's name, suggestions) failed with `code`."""
    MODEL_ERRORS.labels(code).inc()


# The labelled children used so far, by their labels: `labels()` validates and locks on
# every call, and a run's end would call it up to six times. The label sets are bounded
# (statuses and error codes; the operator's agents and models), so these stay small.
_children: dict[tuple[Counter | str, ...], Counter] = {}


def child(metric: Counter, *labels: str) -> Counter:
    """`metric.labels(*labels)`, looked up once."""
    key: tuple[Counter | str, ...] = (metric, *labels)
    found = _children.get(key)
    if found is None:
        found = _children[key] = metric.labels(*labels)
    return found


def run_ended(status: str, code: str) -> None:
    """A run ended (`RUNS_ENDED`)."""
    child(RUNS_ENDED, status, code).inc()


def record_usage(agent: str, entries: Sequence[Mapping[str, Any]]) -> None:
    """A run's usage (`engine.usage` entries), counted once when the run ends. Labels are the
    operator's agents and models, bounded sets; never a user or a key."""
    for entry in entries:
        model = entry["model"]
        for kind, key in (("input", "inputTokens"), ("output", "outputTokens"),
                          ("reasoning", "reasoningTokens"), ("cached_input", "cachedInputTokens")):
            if entry[key]:
                child(MODEL_TOKENS, agent, model, kind).inc(entry[key])
        if entry["costUsd"]:
            child(MODEL_COST, agent, model).inc(entry["costUsd"])


class StoreTimer:
    """The store's operation hook: each operation's time into `DATABASE_SECONDS`, labelled by
    the store method's name."""

    def __init__(self) -> None:
        self._histograms: dict[str, Histogram] = {}

    def operation_timed(self, name: str, seconds: float) -> None:
        histogram = self._histograms.get(name)
        if histogram is None:
            histogram = self._histograms[name] = DATABASE_SECONDS.labels(name)
        histogram.observe(seconds)


@contextlib.contextmanager
def timed_redis(operation: str) -> Iterator[None]:
    """Times a Redis call into `REDIS_SECONDS` (failed calls too: a timeout is latency)."""
    started = time.perf_counter()
    try:
        yield
    finally:
        REDIS_SECONDS.labels(operation).observe(time.perf_counter() - started)

"""What a run consumed: tokens and cost per model, summed over its model calls.

Each call's usage comes from the provider (the adapters ask for it with
`stream_options.include_usage`); its cost comes from litellm's price map
(`litellm.cost_per_token`), and is unknown (None) for a model the map does not list, such as a
self-hosted one: a guessed price would be worse than none. A model's cost is None as soon as
one of its calls could not be priced, so a sum never silently leaves calls out.

A call cut off before the provider reported its usage (a cancel, a dropped connection, an error
mid-answer) still cost tokens: `estimate` counts them from what was sent and what streamed
(about four characters a token), and the entry says how many of its calls were estimated
(`estimatedCalls`), so nobody takes the estimate for the provider's figure.

An operator's own prices (`GATEWAY_MODEL_PRICES`, given to each run's `RunUsage`) come before
litellm's map: a self-hosted model has none there, and a negotiated price is not the list one.

The entries are plain JSON objects in the wire's camelCase (`UsageEntry` in
`protocol/frames_schema.py`): the same object goes on the run's terminal frame, into the
`run_usage` table and out in the REST answers.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any, Final

from ..protocol.frames_schema import UsageEntry
from .deltas import Usage

COUNTS: Final = ("inputTokens", "outputTokens", "reasoningTokens", "cachedInputTokens")
# Models litellm's (offline) price map does not list: asking again is costly, at every run's
# end, for the same answer (docs/decisions/0030). Bounded: model names come from the operator's
# allow-list and fallbacks, but a bound costs nothing.
_unpriced: set[str] = set()
UNPRICED_MAX = 1024
CHARS_PER_TOKEN = 4  # the usual rule of thumb for English text and JSON, for estimates only
MILLION = 1_000_000
# model -> (input, output, cached input) in USD per million tokens (`GATEWAY_MODEL_PRICES`).
Prices = Mapping[str, tuple[float, float, float | None]]
NO_PRICES: Prices = {}


def price_of(model: str, prices: Prices = NO_PRICES
             ) -> tuple[str, float | None, float | None, float | None]:
    """Where a model's price comes from (`setting`, `litellm` or `none`) and the price: input,
    output and cached input, in US dollars per million tokens (None: unknown)."""
    own = prices.get(model)
    if own is not None:
        return ("setting", *own)
    litellm = sys.modules.get("litellm")
    if litellm is None or model in _unpriced:
        return ("none", None, None, None)
    try:
        info = litellm.get_model_info(model)
    except Exception:  # litellm raises for a model its map does not list
        return ("none", None, None, None)

    def per_million(value: Any) -> float | None:
        return None if value is None else float(value) * MILLION

    return ("litellm", per_million(info.get("input_cost_per_token")),
            per_million(info.get("output_cost_per_token")),
            per_million(info.get("cache_read_input_token_cost")))


def estimate(request_chars: int, streamed_chars: int) -> Usage:
    """A cut-off call's usage from what it was sent and what streamed before it stopped."""
    return Usage(input_tokens=-(-request_chars // CHARS_PER_TOKEN),
                 output_tokens=-(-streamed_chars // CHARS_PER_TOKEN), estimated=True)


def call_cost(model: str, usage: Usage, prices: Prices = NO_PRICES) -> float | None:
    """The price of one call in US dollars, from litellm's price map; None when unknown.

    Only with litellm already loaded (`app.load_litellm`, offline): importing it here could
    fetch its price map from the network, on the event loop."""
    own = prices.get(model)
    if own is not None:
        input_price, output_price, cached_price = own
        cached = usage.cached_input_tokens if cached_price is not None else 0
        return ((usage.input_tokens - cached) * input_price + cached * (cached_price or 0)
                + usage.output_tokens * output_price) / MILLION
    litellm = sys.modules.get("litellm")
    if litellm is None or model in _unpriced:
        return None
    try:
        prompt, completion = litellm.cost_per_token(
            model=model, prompt_tokens=usage.input_tokens,
            completion_tokens=usage.output_tokens,
            cache_read_input_tokens=usage.cached_input_tokens)
    except Exception as error:  # litellm raises for a model its map does not list
        if type(error).__name__ == "ModelNotMappedError" and len(_unpriced) < UNPRICED_MAX:
            _unpriced.add(model)
        return None
    return float(prompt) + float(completion)


class RunUsage:
    """A run's usage so far, one entry per model, in the order the models were first used."""

    def __init__(self, prices: Prices = NO_PRICES) -> None:
        self.prices = prices  # the operator's, before litellm's map
        self._by_model: dict[str, UsageEntry] = {}

    def add(self, model: str, usage: Usage) -> None:
        entry = {"model": model, "calls": 1, "inputTokens": usage.input_tokens,
                 "outputTokens": usage.output_tokens, "reasoningTokens": usage.reasoning_tokens,
                 "cachedInputTokens": usage.cached_input_tokens,
                 "costUsd": call_cost(model, usage, self.prices)}
        if usage.estimated:
            entry["estimatedCalls"] = 1
        merge(self._by_model.setdefault(model, new_entry(model)), entry)

    def entries(self) -> list[UsageEntry]:
        return [entry.copy() for entry in self._by_model.values()]

    def __bool__(self) -> bool:
        return bool(self._by_model)


def new_entry(model: str) -> UsageEntry:
    return {"model": model, "calls": 0, "inputTokens": 0, "outputTokens": 0, "totalTokens": 0,
            "reasoningTokens": 0, "cachedInputTokens": 0, "costUsd": 0.0}


def merge(into: UsageEntry, entry: Mapping[str, Any]) -> None:
    """Add `entry`'s calls, tokens and cost to `into` (same model)."""
    into["calls"] += entry["calls"]
    for key in COUNTS:
        into[key] += entry[key]
    into["totalTokens"] = into["inputTokens"] + into["outputTokens"]
    into["costUsd"] = (None if entry["costUsd"] is None or into["costUsd"] is None
                       else into["costUsd"] + entry["costUsd"])
    if entry.get("estimatedCalls"):  # present only when some are: most runs have none
        into["estimatedCalls"] = into.get("estimatedCalls", 0) + entry["estimatedCalls"]


def summed(entries: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Totals over entries (a thread's runs, or a run's models) and the entries per model:
    `{inputTokens, ..., costUsd, models: [...]}`; the total cost is None if any part is."""
    by_model: dict[str, UsageEntry] = {}
    for entry in entries:
        merge(by_model.setdefault(entry["model"], new_entry(entry["model"])), entry)
    models = list(by_model.values())
    totals = {key: sum(m[key] for m in models) for key in COUNTS}
    costs = [m["costUsd"] for m in models]
    return {**totals, "totalTokens": totals["inputTokens"] + totals["outputTokens"],
            "costUsd": None if None in costs else sum(costs), "models": models}

"""The run's usage as the terminal events carry it: AG-UI 1.0's `TokenUsage`, validated by
`ag_ui.core`, and the same list on the Tambo `RUN_FINISHED`."""

from __future__ import annotations

import os
from typing import Any

import pytest
from ag_ui.core import RunErrorEvent, RunFinishedEvent

from gateway.engine.deltas import Usage
from gateway.engine.usage import RunUsage, summed
from gateway.protocol import timbal
from gateway.protocol.frames_schema import frame_adapter
from gateway.protocol.usage_events import agui_usage, tambo_usage


def finished_frame() -> timbal.Frame:
    usage = RunUsage()
    usage.add("openai/gpt-4o-mini", Usage(120, 30, reasoning_tokens=10, cached_input_tokens=100))
    usage.add("openai/gpt-4o-mini", Usage(10, 5))
    usage.add("hosted_vllm/llama", Usage(7, 3))
    frame = {"c": timbal.RUN_FINISHED, "usage": usage.entries()}
    frame_adapter.validate_python(frame)  # the published frame schema accepts it
    return frame


def test_agui_terminal_events_carry_token_usage_per_model() -> None:
    frame = finished_frame()
    event = RunFinishedEvent(thread_id="t", run_id="r", usage=agui_usage(frame))
    wire = event.model_dump(by_alias=True, exclude_none=True, mode="json")
    assert wire["usage"] == [
        {"provider": "openai", "model": "openai/gpt-4o-mini", "inputTokens": 130,
         "outputTokens": 35, "totalTokens": 165, "reasoningTokens": 10,
         "cachedInputTokens": 100},
        {"provider": "hosted_vllm", "model": "hosted_vllm/llama", "inputTokens": 7,
         "outputTokens": 3, "totalTokens": 10}]
    error = RunErrorEvent(message="boom", code="LLM_ERROR", usage=agui_usage(frame))
    assert error.usage is not None and error.usage[0].input_tokens == 130
    assert agui_usage({"c": timbal.RUN_FINISHED}) is None


def test_the_tambo_run_finished_gets_the_same_list_and_nothing_without_usage() -> None:
    frame = finished_frame()
    assert tambo_usage(frame)["usage"][0]["inputTokens"] == 130
    assert tambo_usage({"c": timbal.RUN_FINISHED}) == {}


def test_a_sum_keeps_an_unknown_price_unknown() -> None:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # as the server loads it
    import litellm  # noqa: F401  (prices need it loaded)

    usage = RunUsage()
    usage.add("openai/gpt-4o-mini", Usage(1000, 100))
    usage.add("openai/not-a-priced-model", Usage(10, 1))
    entries = usage.entries()
    assert entries[0]["costUsd"] > 0 and entries[1]["costUsd"] is None
    total = summed(entries)
    assert (total["inputTokens"], total["outputTokens"], total["costUsd"]) == (1010, 101, None)
    assert summed(entries[:1])["costUsd"] == entries[0]["costUsd"]


def test_a_model_the_price_map_does_not_list_is_looked_up_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    asked: list[str] = []
    lookup = litellm.cost_per_token

    def counted(**kwargs: Any) -> Any:
        asked.append(kwargs["model"])
        return lookup(**kwargs)

    monkeypatch.setattr(litellm, "cost_per_token", counted)
    for _ in range(3):  # each run's end prices its calls
        usage = RunUsage()
        usage.add("openai/unlisted-model-once", Usage(10, 1))
        usage.add("openai/gpt-4o-mini", Usage(10, 1))
        cost = [e["costUsd"] for e in usage.entries()]
        assert cost[0] is None and cost[1] > 0
    assert asked.count("openai/unlisted-model-once") == 1
    assert asked.count("openai/gpt-4o-mini") == 3  # a price is computed for its tokens each time

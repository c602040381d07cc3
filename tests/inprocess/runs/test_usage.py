"""What a run consumed is recorded with its end, whatever the end: a cancelled run keeps the
usage of the model calls it completed, and an estimate of the call it cut off (flagged:
`estimatedCalls`), on its terminal frame and in `run_usage`."""

from __future__ import annotations

import asyncio

from gateway.engine.deltas import TextDelta, Usage
from gateway.protocol import timbal
from gateway.store.repository import Store
from tests.inprocess.conftest import (
    ManagerFactory,
    ScriptedDeltas,
    new_thread,
    tool_turn,
    user,
)


async def test_a_cancelled_run_records_the_calls_it_completed(
        managers: ManagerFactory, store: Store, model: ScriptedDeltas) -> None:
    # A tool the run does not have: its error result goes back to the model, which answers.
    manager = managers(model_name="openai/configured")
    hold = asyncio.Event()
    model.enqueue(tool_turn("call_1", "add", '{"a": 1, "b": 2}') + [Usage(40, 4, 1, 30)],
                  [TextDelta("partial "), hold])  # cut off: its usage never arrives
    thread = await new_thread(store, user_key="alice")
    run = (await manager.start(thread, user("add"))).run
    while len(model.requests) < 2:
        await asyncio.sleep(0.005)
    assert (await manager.cancel(run.id)).status == "cancelled"

    [recorded] = await store.run_usage(run.id)
    # The completed call as reported, and the cut-off one estimated: what it was sent, and
    # "partial " (8 characters, 2 tokens at 4 a token).
    estimated_input = recorded["inputTokens"] - 40
    assert estimated_input > 0
    expected = {"model": "openai/configured", "calls": 2, "inputTokens": 40 + estimated_input,
                "outputTokens": 4 + 2, "totalTokens": 46 + estimated_input,
                "reasoningTokens": 1, "cachedInputTokens": 30, "costUsd": None,
                "estimatedCalls": 1}
    assert recorded == expected
    assert await store.thread_usage(thread.id) == [expected]
    report = await store.usage_report(0, "user")
    assert [(r["name"], r["runs"], r["inputTokens"]) for r in report] == [
        ("alice", 1, 40 + estimated_input)]
    last = (await store.last_frame(run.id)).frame
    assert last["c"] == timbal.RUN_CANCELLED and last["usage"] == [expected]
